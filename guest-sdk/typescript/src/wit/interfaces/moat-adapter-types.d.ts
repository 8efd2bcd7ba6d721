declare module 'moat:adapter/types@0.4.0' {
  /**
   * How much the adapter may let its backend do on its own
   * (backend-native file, web and shell tools).
   * # Variants
   * 
   * ## `"sandbox"`
   * 
   * No backend-native file, web or shell tools.
   * ## `"controlled"`
   * 
   * Files and web, no shell.
   * ## `"unrestricted"`
   * 
   * Everything, including a shell.
   */
  export type TrustLevel = 'sandbox' | 'controlled' | 'unrestricted';
  /**
   * Options for one run. Every field is optional for the caller; the
   * adapter refuses in `run` what it cannot honour.
   */
  export interface Options {
    /**
     * Working directory for the backend.
     */
    cwd?: string,
    /**
     * Backend model name.
     */
    model?: string,
    /**
     * Maximum number of agent turns.
     */
    maxTurns?: number,
    /**
     * Maximum spend for the run, in US dollars.
     */
    maxBudgetUsd?: number,
    /**
     * Reasoning effort hint (backend-specific, e.g. "low", "high").
     */
    effort?: string,
    /**
     * Resume token of an earlier session to continue.
     */
    resume?: string,
    /**
     * Tools the backend may use. `none`: no restriction from the
     * caller; `some([])`: no tools at all. Already reduced by
     * `disallowed-tools` by the host.
     */
    allowedTools?: Array<string>,
    /**
     * Tools the backend must not use.
     */
    disallowedTools: Array<string>,
    /**
     * Trust level for backend-native tools.
     */
    trust: TrustLevel,
    /**
     * System prompt to give the backend.
     */
    systemPrompt?: string,
    /**
     * Adapter-specific options as a JSON object, or `none`.
     */
    extra?: string,
    /**
     * Directories the backend may use besides `cwd` (absolute paths,
     * already granted by the host). An adapter whose backend cannot
     * take them refuses the run when the list is not empty.
     */
    directories: Array<string>,
    /**
     * MCP servers for the backend: a JSON object of the common
     * `mcpServers` shape, `{"NAME": {"command", "args"?, "env"?} |
     * {"url", "headers"?}}`, or `none`. Their programs and hosts are
     * granted like any other (`needs`, the host's grants).
     */
    mcpServers?: string,
    /**
     * Sub-agents for backends that have them: a JSON object
     * `{"NAME": {"description", "prompt", "tools"?, "model"?}}`, or
     * `none`. An adapter whose backend has none refuses the run when
     * it is given.
     */
    agents?: string,
  }
  /**
   * An error: refusal to start, or an error event.
   */
  export interface ErrorInfo {
    /**
     * Machine-readable code, e.g. "AUTH_FAILED".
     */
    code?: string,
    /**
     * What went wrong and, where possible, what to do about it.
     */
    message: string,
    /**
     * Whether the run can go on after it.
     */
    recoverable: boolean,
  }
  /**
   * The session has started.
   */
  export interface InitEvent {
    model?: string,
    cwd?: string,
    /**
     * Tools the backend offers in this session.
     */
    tools: Array<string>,
    /**
     * Backend capabilities as a JSON object, or `none`.
     */
    capabilities?: string,
  }
  /**
   * The agent calls a tool.
   */
  export interface ToolUseEvent {
    toolName: string,
    /**
     * Non-empty; a later tool-result refers to it.
     */
    toolUseId: string,
    /**
     * The tool's input as a JSON object.
     */
    input: string,
    description?: string,
  }
  /**
   * # Variants
   * 
   * ## `"success"`
   * 
   * ## `"error"`
   * 
   * ## `"denied"`
   */
  export type ToolStatus = 'success' | 'error' | 'denied';
  /**
   * A tool call finished.
   */
  export interface ToolResultEvent {
    toolUseId: string,
    toolName: string,
    status: ToolStatus,
    /**
     * The tool's output as any JSON value (a string for plain text).
     */
    output: string,
    durationMs?: bigint,
  }
  /**
   * The agent asks for permission to use a tool.
   */
  export interface PermissionRequestEvent {
    toolName: string,
    toolUseId: string,
    /**
     * The tool's input as a JSON object.
     */
    input: string,
    reason?: string,
  }
  /**
   * # Variants
   * 
   * ## `"success"`
   * 
   * ## `"error"`
   * 
   * ## `"interrupted"`
   * 
   * ## `"max-turns"`
   * 
   * ## `"max-budget"`
   */
  export type DoneStatus = 'success' | 'error' | 'interrupted' | 'max-turns' | 'max-budget';
  /**
   * Input token counts. `total` includes the details.
   */
  export interface InputTokens {
    total: bigint,
    /**
     * Tokens read from the backend's prompt cache.
     */
    cacheRead?: bigint,
    /**
     * Tokens written to the backend's prompt cache.
     */
    cacheWrite?: bigint,
  }
  /**
   * Output token counts. `total` includes the details.
   */
  export interface OutputTokens {
    total: bigint,
    /**
     * Tokens spent on reasoning.
     */
    reasoning?: bigint,
  }
  /**
   * Whether a token report covers the whole run.
   * # Variants
   * 
   * ## `"complete"`
   * 
   * Every model call of the run is counted.
   * ## `"partial"`
   * 
   * Some model calls are missing (e.g. the stream was cut).
   */
  export type TokenCoverage = 'complete' | 'partial';
  /**
   * Token usage as the backend reported it. Never estimated: an adapter
   * that does not know the numbers leaves the report out.
   */
  export interface TokenReport {
    coverage: TokenCoverage,
    input: InputTokens,
    output: OutputTokens,
  }
  /**
   * # Variants
   * 
   * ## `"vendor"`
   * 
   * The vendor billed or reported this amount.
   * ## `"agent-estimate"`
   * 
   * The agent (CLI) estimated it.
   * ## `"adapter-estimate"`
   * 
   * The adapter computed it from a price table.
   */
  export type CostSource = 'vendor' | 'agent-estimate' | 'adapter-estimate';
  export interface Cost {
    usd: number,
    source: CostSource,
  }
  export interface Usage {
    /**
     * Distinct tool calls in the run.
     */
    toolUses: number,
    tokens?: TokenReport,
    cost?: Cost,
  }
  /**
   * The run is over. Exactly one per run; nothing follows it.
   */
  export interface DoneEvent {
    status: DoneStatus,
    /**
     * The final answer, when the backend gives one.
     */
    result?: string,
    /**
     * Token to continue this session later (`options.resume`).
     */
    resumeToken?: string,
    usage: Usage,
    /**
     * Run time as the adapter measured it; the host fills it in when
     * absent.
     */
    durationMs?: bigint,
    /**
     * Backend-specific details as a JSON object (e.g. a stop reason).
     */
    metadata?: string,
  }
  /**
   * A namespaced event the host passes through unchanged.
   */
  export interface ExtensionEvent {
    /**
     * "vendor:name", e.g. "codex:file_change".
     */
    name: string,
    /**
     * Any JSON value.
     */
    payload: string,
  }
  export type EventKind = EventKindInit | EventKindText | EventKindTextDelta | EventKindThinking | EventKindToolUse | EventKindToolResult | EventKindError | EventKindPermissionRequest | EventKindDone | EventKindExtension;
  export interface EventKindInit {
    tag: 'init',
    val: InitEvent,
  }
  export interface EventKindText {
    tag: 'text',
    val: string,
  }
  export interface EventKindTextDelta {
    tag: 'text-delta',
    val: string,
  }
  /**
   * A summary of the agent's reasoning.
   */
  export interface EventKindThinking {
    tag: 'thinking',
    val: string,
  }
  export interface EventKindToolUse {
    tag: 'tool-use',
    val: ToolUseEvent,
  }
  export interface EventKindToolResult {
    tag: 'tool-result',
    val: ToolResultEvent,
  }
  export interface EventKindError {
    tag: 'error',
    val: ErrorInfo,
  }
  export interface EventKindPermissionRequest {
    tag: 'permission-request',
    val: PermissionRequestEvent,
  }
  export interface EventKindDone {
    tag: 'done',
    val: DoneEvent,
  }
  export interface EventKindExtension {
    tag: 'extension',
    val: ExtensionEvent,
  }
  export interface Event {
    /**
     * The backend's session id, when known. The host keeps the last one
     * seen and uses it for events that carry none.
     */
    sessionId?: string,
    kind: EventKind,
  }
  /**
   * What an adapter needs from the host. Used to show the user what a
   * component asks for and to preset grants for built-in adapters.
   */
  export interface Needs {
    /**
     * Network hosts, as "host" or "host:port".
     */
    hosts: Array<string>,
    /**
     * Environment variable names.
     */
    env: Array<string>,
    /**
     * Programs to spawn, by name or path.
     */
    programs: Array<string>,
  }
  export interface AdapterInfo {
    /**
     * Short lowercase name, e.g. "openai".
     */
    name: string,
    version: string,
    description: string,
    needs: Needs,
    /**
     * Whether tool names in allowed/disallowed lists may be patterns
     * the adapter understands (otherwise they are exact names).
     */
    toolPatterns: boolean,
  }
}
