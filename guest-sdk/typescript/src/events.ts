/**
 * Builders for the events an adapter yields, one per event kind of the
 * contract (the same kinds as the Rust SDK's `Event`).
 *
 * JSON fields take JSON values and are encoded here, so they are always
 * valid JSON text; token counts take plain numbers and become the
 * contract's 64-bit integers. Nothing else is checked: the host validates
 * every event it receives and drops the ones that break the contract.
 *
 * Host-independent: usable (and tested) outside a component.
 */

import { encodeJson, type JsonObject, type JsonValue } from "./json.js";
import type {
  CostSource,
  DoneStatus,
  Event,
  EventKind,
  TokenCoverage,
  ToolStatus,
  Usage,
} from "./types.js";

/** The error code for a resume the backend cannot honour because the
 * session is gone; the host then retries the run as a fresh session. */
export const SESSION_NOT_FOUND = "SESSION_NOT_FOUND";

/** The `done` metadata key for the run's turns (model round trips). */
export const TURNS_METADATA_KEY = "turns";

function event(kind: EventKind): Event {
  return { kind };
}

/**
 * `n` as the contract's u64. Throws a `RangeError` naming `field` for a
 * negative or fractional number, which has no u64 form; the host checks
 * the rest (e.g. that details do not exceed totals).
 */
function u64(field: string, n: number): bigint {
  if (!Number.isSafeInteger(n) || n < 0) {
    throw new RangeError(`${field} must be a non-negative integer, got ${n}`);
  }
  return BigInt(n);
}

function optionalU64(field: string, n: number | undefined): bigint | undefined {
  return n === undefined ? undefined : u64(field, n);
}

/** What the session started with. */
export interface InitFields {
  model?: string;
  cwd?: string;
  /** Tools the backend offers in this session. */
  tools?: string[];
  /** The backend's capabilities. */
  capabilities?: JsonObject;
}

/** The session has started. */
export function init(fields: InitFields = {}): Event {
  return event({
    tag: "init",
    val: {
      model: fields.model,
      cwd: fields.cwd,
      tools: fields.tools ?? [],
      capabilities:
        fields.capabilities === undefined
          ? undefined
          : encodeJson("init.capabilities", fields.capabilities),
    },
  });
}

/** A complete piece of assistant text. */
export function text(content: string): Event {
  return event({ tag: "text", val: content });
}

/** A streamed fragment of assistant text. */
export function textDelta(delta: string): Event {
  return event({ tag: "text-delta", val: delta });
}

/** A summary of the agent's reasoning. */
export function thinking(summary: string): Event {
  return event({ tag: "thinking", val: summary });
}

/** The agent calls tool `toolName`; `input` is a JSON object. */
export function toolUse(
  toolName: string,
  toolUseId: string,
  input: JsonObject,
  fields: { description?: string } = {},
): Event {
  return event({
    tag: "tool-use",
    val: {
      toolName,
      toolUseId,
      input: encodeJson("tool_use.input", input),
      description: fields.description,
    },
  });
}

/** A tool call finished; `output` is any JSON value (a string for text). */
export function toolResult(
  toolUseId: string,
  toolName: string,
  status: ToolStatus,
  output: JsonValue,
  fields: { durationMs?: number } = {},
): Event {
  return event({
    tag: "tool-result",
    val: {
      toolUseId,
      toolName,
      status,
      output: encodeJson("tool_result.output", output),
      durationMs: optionalU64("tool_result.durationMs", fields.durationMs),
    },
  });
}

/** An error event; `code` is machine-readable (e.g. `"AUTH_FAILED"`). */
export function error(code: string | undefined, message: string, recoverable: boolean): Event {
  return event({ tag: "error", val: { code, message, recoverable } });
}

/** The agent asks for permission to use a tool; `input` is a JSON object. */
export function permissionRequest(
  toolName: string,
  toolUseId: string,
  input: JsonObject,
  fields: { reason?: string } = {},
): Event {
  return event({
    tag: "permission-request",
    val: {
      toolName,
      toolUseId,
      input: encodeJson("permission_request.input", input),
      reason: fields.reason,
    },
  });
}

/**
 * Token usage as the backend reported it. Never estimate: leave the whole
 * report out when the numbers are unknown. Totals include their details.
 */
export interface Tokens {
  /** Whether every model call of the run is counted (default `complete`). */
  coverage?: TokenCoverage;
  input: { total: number; cacheRead?: number; cacheWrite?: number };
  output: { total: number; reasoning?: number };
}

/** What is known at the end of a run; everything is optional. */
export interface DoneFields {
  /** The final answer. */
  result?: string;
  /** Continues this session later (`options.resume`). */
  resumeToken?: string;
  /** Distinct tool calls in the run (default 0). */
  toolUses?: number;
  tokens?: Tokens;
  cost?: { usd: number; source: CostSource };
  /** Run time as the adapter measured it; the host fills it in otherwise. */
  durationMs?: number;
  /** Backend-specific details; turns under {@link TURNS_METADATA_KEY}. */
  metadata?: JsonObject;
}

function usage(fields: DoneFields): Usage {
  const tokens = fields.tokens;
  return {
    toolUses: fields.toolUses ?? 0,
    tokens:
      tokens === undefined
        ? undefined
        : {
            coverage: tokens.coverage ?? "complete",
            input: {
              total: u64("tokens.input.total", tokens.input.total),
              cacheRead: optionalU64("tokens.input.cacheRead", tokens.input.cacheRead),
              cacheWrite: optionalU64("tokens.input.cacheWrite", tokens.input.cacheWrite),
            },
            output: {
              total: u64("tokens.output.total", tokens.output.total),
              reasoning: optionalU64("tokens.output.reasoning", tokens.output.reasoning),
            },
          },
    cost: fields.cost,
  };
}

/** The run is over: exactly one per run, and nothing follows it. */
export function done(status: DoneStatus, fields: DoneFields = {}): Event {
  return event({
    tag: "done",
    val: {
      status,
      result: fields.result,
      resumeToken: fields.resumeToken,
      usage: usage(fields),
      durationMs: optionalU64("done.durationMs", fields.durationMs),
      metadata:
        fields.metadata === undefined ? undefined : encodeJson("done.metadata", fields.metadata),
    },
  });
}

/** A namespaced extension event (`"vendor:name"`) with any JSON payload. */
export function extension(name: string, payload: JsonValue): Event {
  return event({ tag: "extension", val: { name, payload: encodeJson("extension.payload", payload) } });
}

/** `event` carrying the backend's session id. */
export function withSession(e: Event, sessionId: string): Event {
  return { ...e, sessionId };
}

/** Whether `e` is the terminal `done` event. */
export function isDone(e: Event): boolean {
  return e.kind.tag === "done";
}
