// @moat/client: the TypeScript client of `moat serve` (docs/protocol.md).
export { MoatClient, runAgent, runParallel, MAX_REQUEST_BYTES } from './client.js';
export { EventStream } from './events.js';
export { isAgentEvent } from './guards.js';
export { MoatError, isMoatError } from './errors.js';
//# sourceMappingURL=index.js.map