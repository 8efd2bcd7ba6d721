// The shapes `moat serve` speaks (docs/protocol.md,
// protocol/moat-protocol.schema.json). Field names are the wire's.

/** A JSON object, as carried by tool inputs, capabilities and metadata. */
export type JsonObject = { [key: string]: unknown };

// ---------------------------------------------------------------------------
// The Unified Event Stream (host/engine/src/event.rs), as cligent's AgentEvent.

/** How a run ended. */
export type DoneStatus = 'success' | 'error' | 'interrupted' | 'max_turns' | 'max_budget';

/** How a tool call ended. */
export type ToolStatus = 'success' | 'error' | 'denied';

/** Where a cost figure comes from. */
export type CostSource = 'vendor' | 'agent_estimate' | 'adapter_estimate' | 'price_table';

/** Token usage exactly as the backend reported it. */
export interface TokenReport {
  coverage: 'complete' | 'partial';
  input: { total: number; cacheRead?: number; cacheWrite?: number };
  output: { total: number; reasoning?: number };
}

/** What a run used (in a `done` event); `tokens` and `cost` absent when unknown. */
export interface Usage {
  toolUses: number;
  tokens?: TokenReport;
  cost?: { usd: number; source: CostSource };
}

export interface InitPayload {
  model?: string;
  cwd?: string;
  tools: string[];
  capabilities?: JsonObject;
}
export interface TextPayload {
  content: string;
}
export interface TextDeltaPayload {
  delta: string;
}
export interface ThinkingPayload {
  summary: string;
}
export interface ToolUsePayload {
  toolName: string;
  toolUseId: string;
  input: JsonObject;
  description?: string;
}
export interface ToolResultPayload {
  toolUseId: string;
  toolName: string;
  status: ToolStatus;
  /** Any JSON value (a string for plain text). */
  output: unknown;
  durationMs?: number;
}
export interface PermissionRequestPayload {
  toolName: string;
  toolUseId: string;
  input: JsonObject;
  reason?: string;
}
export interface ErrorPayload {
  code?: string;
  message: string;
  recoverable: boolean;
}
export interface DonePayload {
  status: DoneStatus;
  result?: string;
  resumeToken?: string;
  usage: Usage;
  durationMs: number;
  metadata?: JsonObject;
}

/** The fields every event has. */
export interface BaseEvent<T extends string, P> {
  type: T;
  /** The adapter's registered name. */
  agent: string;
  /** Milliseconds since the Unix epoch. */
  timestamp: number;
  sessionId: string;
  /** The task's role in a parallel run; absent for a single run. */
  role?: string;
  payload: P;
}

export type InitEvent = BaseEvent<'init', InitPayload>;
export type TextEvent = BaseEvent<'text', TextPayload>;
export type TextDeltaEvent = BaseEvent<'text_delta', TextDeltaPayload>;
export type ThinkingEvent = BaseEvent<'thinking', ThinkingPayload>;
export type ToolUseEvent = BaseEvent<'tool_use', ToolUsePayload>;
export type ToolResultEvent = BaseEvent<'tool_result', ToolResultPayload>;
export type PermissionRequestEvent = BaseEvent<'permission_request', PermissionRequestPayload>;
export type ErrorEvent = BaseEvent<'error', ErrorPayload>;
export type DoneEvent = BaseEvent<'done', DonePayload>;
/**
 * A namespaced extension event: its `type` is its `vendor:name`
 * (e.g. `codex:file_change`), its payload any JSON value.
 */
export type ExtensionEvent = BaseEvent<`${string}:${string}`, unknown>;

/** One event of a run: a union discriminated on `type`. */
export type AgentEvent =
  | InitEvent
  | TextEvent
  | TextDeltaEvent
  | ThinkingEvent
  | ToolUseEvent
  | ToolResultEvent
  | PermissionRequestEvent
  | ErrorEvent
  | DoneEvent
  | ExtensionEvent;

/** The `type` strings of the built-in events. */
export type BuiltInEventType = Exclude<AgentEvent['type'], `${string}:${string}`>;

// ---------------------------------------------------------------------------
// Runs.

/** What a run may reach; each list empty or absent means nothing of that kind. */
export interface Grants {
  /** host, host:port, *.domain or scheme://host:port */
  net?: string[];
  /** absolute directories */
  read?: string[];
  /** absolute directories */
  write?: string[];
  env?: string[];
  run?: string[];
  /** NAME@HOST: a secret the server keeps, added to requests to HOST (the run holds a placeholder) */
  secrets?: string[];
}

/** Options for one run, as the adapter receives them (camelCase). */
export interface RunOptions {
  cwd?: string;
  model?: string;
  maxTurns?: number;
  maxBudgetUsd?: number;
  effort?: string;
  resume?: string;
  /** Absent: no restriction from the caller; `[]`: no tools. */
  allowedTools?: string[];
  disallowedTools?: string[];
  systemPrompt?: string;
  /** Adapter-specific options (a JSON object). */
  extra?: JsonObject;
  /** Directories the backend may use besides `cwd` (absolute). */
  directories?: string[];
  /** MCP servers, the common `mcpServers` JSON object. */
  mcpServers?: JsonObject;
  /** Sub-agents for backends that have them. */
  agents?: JsonObject;
}

/** The backend's own switches. */
export type Trust = 'sandbox' | 'controlled' | 'unrestricted';

/** Resource limits of a run request. */
export interface RunLimits {
  timeoutMs?: number;
  fuel?: number;
  maxMemoryBytes?: number;
  maxEventBytes?: number;
}

/** The optional fields of a `run` request. */
export interface RunRequest {
  options?: RunOptions;
  trust?: Trust;
  /** Only narrows the server's allowance; more is BOUNDARY_VIOLATION. */
  grants?: Grants;
  limits?: RunLimits;
  /** A live run; the new run ends when it ends. */
  parent?: string;
}

/** Usage in an EngineResult: each figure authentic or absent. */
export interface ResultUsage {
  inputTokens?: number;
  outputTokens?: number;
  cacheReadTokens?: number;
  cacheWriteTokens?: number;
  costUsd?: number;
  costSource?: CostSource;
  durationMs?: number;
  turns?: number;
  toolUses: number;
}

/** The result of one run (the engine contract's). */
export interface EngineResult {
  status: DoneStatus;
  /** The final answer. */
  text?: string;
  sessionId?: string;
  resumeToken?: string;
  usage: ResultUsage;
  /** Why it failed, when it did and said so. */
  error?: { code?: string; message: string };
}

export type RunStatus = 'pending' | 'running' | 'completed' | 'failed';

/** A run's record (as `moat show --json`). */
export interface RunRecord {
  id: string;
  parent: string | null;
  adapter: string;
  componentSha256?: string | null;
  status: RunStatus;
  /** e.g. `cancelled`, `parent ended`, `engine restart`. */
  reason: string | null;
  prompt: string;
  options: { [K in keyof RunOptions]-?: RunOptions[K] | null } & JsonObject;
  /** The effective grants. */
  grants: Required<Grants>;
  /** The effective trust level (null for a workflow's own record). */
  trust?: Trust | null;
  /** The effective limits (null for a workflow's own record). */
  limits: {
    timeoutMs: number | null;
    fuel: number | null;
    maxMemoryBytes: number | null;
    maxEventBytes: number | null;
    maxConnections?: number | null;
    maxOpenFiles?: number | null;
    [key: string]: unknown;
  } | null;
  /** The cluster worker that runs (or ran) it. */
  worker?: string | null;
  timeoutMs?: number | null;
  ownerPid?: number | null;
  createdMs: number;
  startedMs?: number | null;
  endedMs?: number | null;
  /** The payload of the run's `done`, once it ended. */
  done?: DonePayload | null;
  /** The EngineResult once it ended, else null (`get` only). */
  result?: EngineResult | null;
}

/** What an adapter says it needs from the host. */
export interface AdapterNeeds {
  env: string[];
  hosts: string[];
  programs: string[];
  [key: string]: unknown;
}

/** An adapter's description (`adapters`). */
export interface AdapterDescription {
  name: string;
  version: string;
  description: string;
  contract: string;
  sha256: string;
  needs: AdapterNeeds;
  builtIn: boolean;
  [key: string]: unknown;
}

/** An adapter's description with the most a run of it may be granted (`inspect`). */
export interface AdapterInspection extends AdapterDescription {
  allowed: Required<Grants>;
}

// ---------------------------------------------------------------------------
// The wire.

/** A request's id. */
export type RequestId = number | string;

export type Op =
  | 'run'
  | 'await'
  | 'cancel'
  | 'get'
  | 'list'
  | 'subscribe'
  | 'unsubscribe'
  | 'adapters'
  | 'inspect'
  | 'shutdown';

/** The error codes of the protocol. */
export type ProtocolErrorCode = 'INVALID_REQUEST' | 'NOT_FOUND' | 'BOUNDARY_VIOLATION' | 'RUN_FAILED';

export interface WireError {
  code: ProtocolErrorCode;
  message: string;
  data?: unknown;
}

export interface ResponseMessage {
  id: RequestId | null;
  result?: unknown;
  error?: WireError;
}

export interface RunEventMessage {
  event: 'run_event';
  subscriptionId: string;
  run: string;
  seq: number;
  data: AgentEvent;
}

export interface LaggedMessage {
  event: 'lagged';
  subscriptionIds: string[];
  run: string;
  nextSeq: number;
}

export type EventMessage = RunEventMessage | LaggedMessage;
