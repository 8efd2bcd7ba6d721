import type { EngineResult, ProtocolErrorCode } from './types.js';
/**
 * The codes a {@link MoatError} carries: the protocol's five, and two the
 * client gives itself: `CONNECTION_CLOSED` (the server went away, or the
 * client was closed, before the answer came) and `PROTOCOL_ERROR` (the
 * server sent something the protocol does not allow).
 */
export type MoatErrorCode = ProtocolErrorCode | 'CONNECTION_CLOSED' | 'PROTOCOL_ERROR';
/** An error from `moat serve`, or from the connection to it. */
export declare class MoatError extends Error {
    /** The protocol code (or `CONNECTION_CLOSED` / `PROTOCOL_ERROR`). */
    readonly code: MoatErrorCode;
    /** What else the server said, e.g. `{results}` of a failed `await`. */
    readonly data: unknown;
    constructor(code: MoatErrorCode, message: string, data?: unknown, options?: {
        cause?: unknown;
    });
    /** The results of a `RUN_FAILED` await, when the server sent them. */
    get results(): Record<string, EngineResult> | undefined;
}
/** Whether `error` is a {@link MoatError}, optionally of `code`. */
export declare function isMoatError(error: unknown, code?: MoatErrorCode): error is MoatError;
//# sourceMappingURL=errors.d.ts.map