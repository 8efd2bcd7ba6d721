/** A JSON object, as carried by tool inputs, capabilities and metadata. */
export type JsonObject = {
    [key: string]: unknown;
};
/** How a run ended. */
export type DoneStatus = 'success' | 'error' | 'interrupted' | 'max_turns' | 'max_budget';
/** How a tool call ended. */
export type ToolStatus = 'success' | 'error' | 'denied';
/** Whether a token report covers every model request of the run (cligent's). */
export type UsageCoverage = 'complete' | 'partial';
/** Inclusive input-token accounting for one measured scope (cligent's). */
export interface InputTokenUsage {
    /** All input tokens, including every reported cache tier. */
    total: number;
    /** Input tokens that were neither cache reads nor cache writes. */
    uncached?: number;
    /** Input tokens served from a prompt cache. */
    cacheRead?: number;
    /** Input tokens written into a prompt cache. */
    cacheWrite?: number;
}
/** Inclusive output-token accounting for one measured scope (cligent's). */
export interface OutputTokenUsage {
    /** All model-generated output, including reasoning or thinking. */
    total: number;
    /** Output excluding reasoning or thinking. */
    visible?: number;
    /** Reasoning or thinking tokens included in `total`. */
    reasoning?: number;
}
/**
 * Inclusive token totals with the exact subsets the backend reported
 * (cligent's): an absent detail is unreported, a present zero measured.
 */
export interface TokenUsage {
    input: InputTokenUsage;
    output: OutputTokenUsage;
}
/**
 * Where a cost figure comes from (cligent's, DR-014): `provider-reported`
 * (the vendor billed or reported it), `agent-estimate` (the agent or the
 * adapter estimated it from its own prices), `account-estimate` (moat
 * computed it from the prices the user gave, `--price-table`).
 */
export type UsageCostSource = 'provider-reported' | 'agent-estimate' | 'account-estimate';
/** What a run (or a usage record) cost, as reported; never made up (cligent's). */
export interface UsageCost {
    amount: number;
    currency: 'USD';
    source: UsageCostSource;
}
/** A separately priced non-token unit (cligent's). */
export interface PricedUsageUnit {
    name: string;
    quantity: number;
}
/** One rate-card group of a run's work (cligent's, DR-014). */
export interface UsageRecord {
    /** The rate-card key as the backend named it; absent when it did not say. */
    model?: string;
    /** The rate-card family, where the backend distinguishes one. */
    provider?: string;
    /** API requests this record covers (`1`: a context-length tier is determinable). */
    requests?: number;
    tokens: TokenUsage;
    cost?: UsageCost;
    pricedUnits?: PricedUsageUnit[];
}
/** The tokens of one run, exactly as the backend reported them (cligent's). */
export interface TokenUsageReport {
    /** Whether the report covers every model request of the run. */
    coverage: UsageCoverage;
    /** Inclusive totals of the requests it covers. */
    totals: TokenUsage;
    /** The same totals by rate-card group, where reported. */
    records?: UsageRecord[];
}
/**
 * What a run used (cligent's `DoneUsage`): in a `done` payload, and as an
 * {@link EngineResult}'s `usage`. `tokens` and `cost` are absent when the
 * backend did not report them.
 */
export interface DoneUsage {
    /** Distinct tool calls observed in the run. */
    toolUses: number;
    tokens?: TokenUsageReport;
    cost?: UsageCost;
}
/** moat's name for {@link DoneUsage}. */
export type Usage = DoneUsage;
export interface InitPayload {
    /** The model the backend uses; `"unknown"` when nobody knows. */
    model: string;
    /** The backend's working directory. */
    cwd: string;
    /** The tools the backend offers in this session. */
    tools: string[];
    /** What the backend can do, as it describes it. */
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
    /** The final answer. */
    result?: string;
    /** Resumes the session (`resume` of a later run). */
    resumeToken?: string;
    usage: DoneUsage;
    durationMs: number;
}
/**
 * moat's additions to an `init` event, in its `metadata` (cligent's
 * `BaseEvent.metadata`), never in its payload.
 */
export type InitMetadata = JsonObject & {
    /** The run's id in moat's run store (`r_…`), when the run is recorded. */
    runId?: string;
    /**
     * How the programs the run starts are contained (`namespaces`,
     * `landlock+seccomp`, `off`, …); absent for a run that may start none.
     */
    containment?: string;
};
/** The adapter's details about a run, in its `done` event's `metadata`. */
export type DoneMetadata = JsonObject & {
    /** The turns the run took, when the adapter counted them. */
    turns?: number;
};
/** The fields every event has (cligent's `BaseEvent`, with `type` and `payload`). */
export interface BaseEvent<T extends string = string, P = unknown, M extends JsonObject = JsonObject> {
    type: T;
    /** The adapter's registered name. */
    agent: string;
    /** Milliseconds since the Unix epoch. */
    timestamp: number;
    sessionId: string;
    /** The task's role in a parallel run (cligent's `CligentEvent`); absent for a single run. */
    role?: string;
    /** What moat or the adapter says beside the payload (cligent's `BaseEvent.metadata`). */
    metadata?: M;
    payload: P;
}
export type InitEvent = BaseEvent<'init', InitPayload, InitMetadata>;
export type TextEvent = BaseEvent<'text', TextPayload>;
export type TextDeltaEvent = BaseEvent<'text_delta', TextDeltaPayload>;
export type ThinkingEvent = BaseEvent<'thinking', ThinkingPayload>;
export type ToolUseEvent = BaseEvent<'tool_use', ToolUsePayload>;
export type ToolResultEvent = BaseEvent<'tool_result', ToolResultPayload>;
export type PermissionRequestEvent = BaseEvent<'permission_request', PermissionRequestPayload>;
export type ErrorEvent = BaseEvent<'error', ErrorPayload>;
export type DoneEvent = BaseEvent<'done', DonePayload, DoneMetadata>;
/**
 * A namespaced extension event: its `type` is its `vendor:name`
 * (e.g. `codex:file_change`, `moat:resume_fallback`), its payload any JSON value.
 */
export type ExtensionEvent = BaseEvent<`${string}:${string}`, unknown>;
/** One event of a run: a union discriminated on `type` (cligent's `AgentEvent`). */
export type AgentEvent = InitEvent | TextEvent | TextDeltaEvent | ThinkingEvent | ToolUseEvent | ToolResultEvent | PermissionRequestEvent | ErrorEvent | DoneEvent | ExtensionEvent;
/**
 * cligent's `CligentEvent` (an event with its task's `role`): moat's
 * {@link AgentEvent} already carries `role`, so they are one type.
 */
export type CligentEvent = AgentEvent;
/** The `type` strings of the built-in events. */
export type BuiltInEventType = Exclude<AgentEvent['type'], `${string}:${string}`>;
/** cligent's `AgentEventType`: a built-in event's `type`. */
export type AgentEventType = BuiltInEventType;
/**
 * cligent's `AgentType`: an event's `agent`, the adapter's name (in moat a
 * built-in's, an installed adapter's, or a component's).
 */
export type AgentType = string;
/** Each built-in event's payload by its `type` (cligent's `AgentEventMap`). */
export interface AgentEventMap {
    init: InitPayload;
    text: TextPayload;
    text_delta: TextDeltaPayload;
    thinking: ThinkingPayload;
    error: ErrorPayload;
    permission_request: PermissionRequestPayload;
    tool_use: ToolUsePayload;
    tool_result: ToolResultPayload;
    done: DonePayload;
}
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
    /** absolute paths of Unix sockets outside the write grants the run's programs may connect to */
    unixSocket?: string[];
    /** absolute paths of files that run code later (docs/security.md) the run may change inside its write grants all the same */
    writeProtected?: string[];
    /**
     * `HOST[:PORT]=openai|anthropic|gemini`: requests there are model calls whose usage moat reads from
     * their answers (besides the vendors' own hosts); a rule grants no destination
     */
    meter?: string[];
    /** Under a budget in tokens or dollars, the run's programs may still make model calls moat cannot read (a tunnel to a model API's host) */
    unmetered?: boolean;
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
    /** The run's memory: its programs' together, the adapter's share at most 1 GiB. */
    maxMemoryBytes?: number;
    maxEventBytes?: number;
    /** The most processes and threads the run's programs may have at once. */
    maxProcesses?: number;
    /** The CPUs the run's programs may use together, e.g. 0.5. */
    cpus?: number;
    /** The most tokens the run (with its children) may use; its budget in dollars is `options.maxBudgetUsd`. */
    maxTokens?: number;
}
/**
 * Ask for what the run's grants do not cover (a host, a program, a tool
 * call) instead of refusing it (docs/approvals.md): the run emits a
 * `permission_request` and waits (status `waiting`) until a client answers
 * ({@link MoatClient.approve}, {@link MoatClient.deny}, a handler given to
 * {@link MoatClient.onPermissionRequest}), `moat approve|deny`, or the
 * timeout denies it. `{}` asks with the default timeout (10 minutes).
 */
export interface Ask {
    /** Denied after this long unanswered (default 10 minutes). */
    timeoutMs?: number;
    /** Wait as long as the run lasts (no `timeoutMs` with it). */
    noTimeout?: boolean;
    /** Tools whose calls the run's agent asks about first (Claude Code's permission prompts). */
    tools?: string[];
}
/**
 * How a run's workspace is made: `worktree`, a git worktree of the project
 * (on a branch `moat/RUN`); `copy`, a copy of its directory (reflinked
 * where the filesystem can), for projects without git.
 */
export type WorkspaceMode = 'worktree' | 'copy';
/**
 * A workspace of the run's own (docs/workspaces.md), of the project at
 * `options.cwd` (absolute, and granted to the run): the run works there and
 * may write only it. `diff` shows what it changed against its base,
 * `apply` applies that to the project.
 */
export interface Workspace {
    mode: WorkspaceMode;
    /** What a worktree starts from (a git ref; `HEAD` when absent). */
    base?: string;
    /** Carry the project's uncommitted changes into a worktree (else a dirty project is refused). */
    includeDirty?: boolean;
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
    /** A workspace of the project at `options.cwd`: the run may then write only it. */
    workspace?: Workspace;
    /** Ask for what the grants do not cover instead of being refused: the run waits for an answer. */
    ask?: Ask;
}
/**
 * The result of one run (the engine contract's): what `moat run -o json`
 * prints and `await` answers.
 */
export interface EngineResult {
    status: DoneStatus;
    /** The final answer. */
    text?: string;
    sessionId?: string;
    /** Resumes the session (`resume` of a later run). */
    resumeToken?: string;
    /** The run's id in moat's run store, when it is recorded. */
    runId?: string;
    /** Exactly the `usage` of the run's `done`. */
    usage: DoneUsage;
    /** How long the run took, in milliseconds, when known. */
    durationMs?: number;
    /** The turns the run took, when the adapter counted them. */
    turns?: number;
    /** Why it failed, when it did and said so. */
    error?: {
        code?: string;
        message: string;
    };
}
/** A run record's status; `waiting`: running, with a request open for an answer. */
export type RunStatus = 'pending' | 'running' | 'waiting' | 'completed' | 'failed';
/** What a run may ask for. */
export type ApprovalKind = 'tool' | 'net' | 'run' | 'read' | 'write' | 'secret';
/** What a request asks for, and why: `kind` with what it names. */
export interface ApprovalRequest {
    kind: ApprovalKind;
    /** Why it asks, in the words of whoever raised it. */
    reason: string;
    /** `net`: the host, as the run named it. */
    host?: string;
    /** `net`: the port. */
    port?: number;
    /** `run`: the program, as the run named it. */
    program?: string;
    /** `read`, `write`: the directory. */
    dir?: string;
    /** `tool`: the tool; `secret`: the secret. */
    name?: string;
    /** `tool`: the call's id, as its `tool_use` names it. */
    toolUseId?: string;
    /** `tool`: the call's arguments. */
    input?: JsonObject;
}
/** How a request was answered. */
export interface ApprovalAnswer {
    approved: boolean;
    /** Approved for this request and every later one of the run for the same host, program, directory or tool. */
    always: boolean;
    /** Why (a denial's reason), as the one who answered said it. */
    reason?: string;
    /** Who or what answered: `a client of moat serve (pid N)`, `moat approve (pid N, user)`, `the approval timeout (10m)`, `the ceiling of this server`, … */
    by: string;
    /** When (ms since the Unix epoch). */
    atMs: number;
}
/** A run's request (the protocol's `approval`), and its answer once it has one. */
export interface Approval {
    /** Its number in its run, from 1 (a `permission_request`'s `requestId`, as a number). */
    number: number;
    request: ApprovalRequest;
    /** When it was asked (ms since the Unix epoch). */
    askedMs: number;
    /** `null` while it is open. */
    answer: ApprovalAnswer | null;
}
/**
 * One request or connection a run made through moat (a `moat:traffic`
 * event's payload). Never a body, a header's value or a URL's query.
 */
export interface TrafficRow {
    /** When it started (ms since the Unix epoch). */
    at: number;
    /** `component`: its `wasi:http` requests; `program`: a program's, through the run's proxy. */
    who: 'component' | 'program';
    /** A program's process id as the host sees it, when moat made its connection (the run's own network). */
    pid?: number;
    /** The program's name, with its `pid`. */
    program?: string;
    /** `tunnel`: a program's `CONNECT`, opaque to moat; `secret_route`: a request on a secret's route. */
    kind: 'request' | 'tunnel' | 'secret_route';
    /** `secret_route`: the secret whose route it took. */
    secret?: string;
    /** The request's method (not for a tunnel). */
    method?: string;
    /** Its path, without the query (not for a tunnel). */
    path?: string;
    scheme: 'http' | 'https';
    host: string;
    port: number;
    /** The grant that allowed it, `approved`, or `own loopback`. */
    allowedBy?: string;
    /** Why it was refused. */
    refused?: string;
    /** `host:port`: the `net` grant that would allow it. */
    wouldAllow?: string;
    /** `grants.unmetered` would allow it (a tunnel to a model API under a budget). */
    unmetered?: true;
    /** The answer's status. */
    status?: number;
    /** Why it failed after it was allowed. */
    error?: string;
    /** Bytes of the request's body (a tunnel's: everything). */
    sent: number;
    /** Bytes of the answer's body (a tunnel's: everything). */
    received: number;
    /** How long it took, in milliseconds. */
    ms: number;
    /** A model call: whose API. */
    vendor?: 'openai' | 'anthropic' | 'gemini';
    /** A model call: the model its answer named. */
    model?: string;
    /** A model call: what it used, read from its answer. */
    usage?: {
        inputTokens: number;
        outputTokens: number;
    };
}
/** What one source says a run's model calls used. */
export interface UsageCount {
    calls: number;
    inputTokens: number;
    outputTokens: number;
    /** Calls whose usage could not be read (a tunnel, an answer without usage); absent when none. */
    usageUnknown?: number;
}
/** What a run did past the rows kept, at one destination. */
export interface TrafficOverflow {
    allowed: number;
    refused: number;
    sent: number;
    received: number;
}
/** A run's traffic through moat (the `traffic` op's result). */
export interface RunTraffic {
    /** Its rows, oldest first: at most 1,000. */
    rows: TrafficRow[];
    /** Past the 1,000 rows kept, what more it did per `host:port`; absent unless it did. */
    overflow?: Record<string, TrafficOverflow>;
    /** Its model calls as moat read them from the answers it carried. */
    metered: UsageCount;
    /** Its model calls as its adapter reported them (`moat:usage` events, or its `done`'s totals). */
    reported: UsageCount;
}
/**
 * A `permission_request` payload as moat sends it: cligent's
 * {@link PermissionRequestPayload} with moat's `requestId` (the request's
 * number in its run, as a string: absent for a request the adapter only
 * reports, its backend having asked and answered itself) and `kind`.
 * `toolName` is `moat:KIND` for a grant, the tool's own for a tool call.
 */
export interface MoatPermissionRequestPayload extends PermissionRequestPayload {
    requestId?: string;
    kind?: ApprovalKind;
}
/** How a request was decided, in a word. */
export type PermissionDecisionWord = 'approved' | 'approved always' | 'denied';
/** The payload of a `moat:permission_answer` event: a request of the run was answered. */
export interface PermissionAnswerPayload {
    requestId: string;
    decision: PermissionDecisionWord;
    approved: boolean;
    always: boolean;
    by: string;
    reason: string | null;
}
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
    /** The part it plays among its siblings: a workflow task's run has its task's id. */
    role?: string | null;
    options: {
        [K in keyof RunOptions]-?: RunOptions[K] | null;
    } & JsonObject;
    /** The effective grants. */
    grants: Required<Grants>;
    /** The effective trust level (a workflow's own record: the most its tasks may have; null in records older than trust). */
    trust?: Trust | null;
    /** The effective limits (null for a workflow's own record). */
    limits: {
        timeoutMs: number | null;
        fuel: number | null;
        maxMemoryBytes: number | null;
        maxEventBytes: number | null;
        maxConnections?: number | null;
        maxOpenFiles?: number | null;
        maxProgramMemoryBytes?: number | null;
        maxProcesses?: number | null;
        milliCpus?: number | null;
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
    /** Its requests for approval, oldest first, with their answers (`get` only). */
    requests?: Approval[];
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
/** How a workflow stands, in its state file. */
export type WorkflowStatus = 'running' | 'completed' | 'failed' | 'cancelled';
/** How one of a workflow's tasks stands, in its state file. */
export type WorkflowTaskStatus = 'PENDING' | 'RUNNING' | 'COMPLETED' | 'FAILED';
/** One task's state in a workflow's state file (its keys as the file writes them, snake_case). */
export interface WorkflowTaskState {
    status: WorkflowTaskStatus;
    /** When its first attempt started (RFC 3339). */
    started_at: string | null;
    /** When it completed or failed (RFC 3339). */
    completed_at: string | null;
    /** The files it produced. */
    outputs: string[];
    /** Loop iterations done (1 for a task without a loop, once done). */
    iterations: number;
    /** The current attempt of its current iteration. */
    attempts: number;
    /** What it hands over to the tasks after it. */
    handover?: JsonObject;
    /** Why it failed, or why it runs again. */
    error?: string;
    /** The task whose failure keeps it from running. */
    blocked_by?: string;
    /** The run records of its attempts, oldest first, each listed once its attempt ended. */
    runs: string[];
    /** The run of its attempt in flight. */
    run?: string;
    /** Tokens and cost of all its attempts. */
    usage: DoneUsage;
    /** Wall time of all its attempts, in milliseconds. */
    duration_ms: number;
    [key: string]: unknown;
}
/**
 * A workflow's state file (`.moat/workflows/NAME/state.json` in its
 * project), as `moat workflow status -o json` prints it: its keys as the
 * file writes them, snake_case.
 */
export interface WorkflowState {
    /** The state file's format. */
    version: string;
    /** The workflow's name. */
    workflow: string;
    /** Its project directory (the workflow file's). */
    project: string;
    status: WorkflowStatus;
    /** Each task's state, by task id. */
    tasks: Record<string, WorkflowTaskState>;
    /** The workflow's own run records, oldest first (each start or resume adds one). */
    runs: string[];
    /** When it was first started (RFC 3339). */
    started_at: string;
    /** When its latest run ended (RFC 3339). */
    ended_at: string | null;
    /** SHA-256 of the workflow file it was started with. */
    file_sha256: string;
    [key: string]: unknown;
}
/** What `workflow_status` answers: the workflow's name and its state here. */
export interface WorkflowStatusResult {
    /** The workflow's name (its file's `name`). */
    workflow: string;
    /** Its state file; `null` when it has not run here. */
    state: WorkflowState | null;
}
/** A request's id. */
export type RequestId = number | string;
export type Op = 'run' | 'await' | 'cancel' | 'get' | 'list' | 'subscribe' | 'unsubscribe' | 'adapters' | 'inspect' | 'diff' | 'apply' | 'approve' | 'deny' | 'approvals' | 'traffic' | 'workflow_run' | 'workflow_status' | 'shutdown';
/** The error codes of the protocol. */
export type ProtocolErrorCode = 'INVALID_REQUEST' | 'NOT_FOUND' | 'BOUNDARY_VIOLATION' | 'RUN_FAILED' | 'CONFLICT';
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
//# sourceMappingURL=types.d.ts.map