// @moat/client: the TypeScript client of `moat serve` (docs/protocol.md).
export { MoatClient, runAgent, runParallel, MAX_REQUEST_BYTES } from './client.js';
export type { SpawnOptions, ExitStatus, ListOptions, DiffOptions, ApproveOptions, DenyOptions, RunAgentOptions, WorkflowRunOptions } from './client.js';
export type { PermissionHandler, PermissionRequest, PermissionContext, PermissionDecision } from './permissions.js';
export type { ParallelTask } from './parallel.js';
export { EventStream } from './events.js';
export { isAgentEvent } from './guards.js';
export type { EventsOptions } from './events.js';
export { MoatError, isMoatError } from './errors.js';
export type { MoatErrorCode } from './errors.js';
export type * from './types.js';
