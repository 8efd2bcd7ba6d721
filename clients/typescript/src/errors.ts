import type { EngineResult, ProtocolErrorCode } from './types.js';

/**
 * The codes a {@link MoatError} carries: the protocol's five, and two the
 * client gives itself: `CONNECTION_CLOSED` (the server went away, or the
 * client was closed, before the answer came) and `PROTOCOL_ERROR` (the
 * server sent something the protocol does not allow).
 */
export type MoatErrorCode = ProtocolErrorCode | 'CONNECTION_CLOSED' | 'PROTOCOL_ERROR';

/** An error from `moat serve`, or from the connection to it. */
export class MoatError extends Error {
  /** The protocol code (or `CONNECTION_CLOSED` / `PROTOCOL_ERROR`). */
  readonly code: MoatErrorCode;
  /** What else the server said, e.g. `{results}` of a failed `await`. */
  readonly data: unknown;

  constructor(code: MoatErrorCode, message: string, data?: unknown, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MoatError';
    this.code = code;
    this.data = data;
  }

  /** The results of a `RUN_FAILED` await, when the server sent them. */
  get results(): Record<string, EngineResult> | undefined {
    const data = this.data as { results?: Record<string, EngineResult> } | null | undefined;
    return data && typeof data === 'object' ? data.results : undefined;
  }
}

/** Whether `error` is a {@link MoatError}, optionally of `code`. */
export function isMoatError(error: unknown, code?: MoatErrorCode): error is MoatError {
  return error instanceof MoatError && (code === undefined || error.code === code);
}
