/**
 * `@moat/adapter`: write moat adapters in TypeScript.
 *
 * An adapter is one module exporting `adapter = defineAdapter({ info, run })`,
 * where `run` is usually an `async function*` yielding events built with
 * this module's builders and ending with `done`. `moat-adapter build`
 * bundles it with this SDK and turns it into a WebAssembly component
 * (componentize-js), which the moat host runs as untrusted code.
 */

export { defineAdapter } from "./adapter.js";
export type { AdapterDefinition, AdapterExport, AdapterInfoInit, RunContext } from "./adapter.js";
export { ASK_TOOLS_VARIABLE, askTools, requestApproval } from "./approvals.js";
export type { Approval, ApprovalRequest } from "./approvals.js";
export {
  done,
  error,
  extension,
  init,
  isDone,
  permissionRequest,
  SESSION_NOT_FOUND,
  text,
  textDelta,
  thinking,
  toolResult,
  toolUse,
  TURNS_METADATA_KEY,
  withSession,
} from "./events.js";
export type { DoneFields, InitFields, Tokens } from "./events.js";
export { ADAPTER_ERROR, AdapterError, InterruptedError } from "./errors.js";
export { env } from "./env.js";
export { interrupted, log } from "./host.js";
export { chunks, fetch, HttpError } from "./http.js";
export { INVALID_OPTIONS } from "./json.js";
export type { JsonObject, JsonValue } from "./json.js";
export type { RunOptions } from "./options.js";
export { Child, ProcessError, spawn } from "./process.js";
export type { SpawnOptions } from "./process.js";
export { DEFAULT_MAX_EVENT_SIZE, isTooLarge, SseParser, sseEvents } from "./sse.js";
export type { SseEvent, SseTooLarge } from "./sse.js";
export type { EventSource } from "./stream.js";
// The contract's types under the names adapter authors use, and its version.
export * from "./types.js";
