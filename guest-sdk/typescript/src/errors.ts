/**
 * Errors an adapter raises on purpose.
 *
 * Host-independent: usable (and tested) outside a component.
 */

/** The code given to an exception the adapter did not raise on purpose. */
export const ADAPTER_ERROR = "ADAPTER_ERROR";

/**
 * An error with a machine-readable code.
 *
 * Thrown from `run` before the first event, it refuses the run (the caller
 * gets it as is and nothing has started). Thrown later, the run ends with
 * it as an `error` event, then `done` of status `error`.
 */
export class AdapterError extends Error {
  /** Machine-readable code, e.g. `"AUTH_FAILED"`. */
  readonly code: string | undefined;
  /** Whether trying again may work. */
  readonly recoverable: boolean;

  constructor(code: string | undefined, message: string, recoverable = false) {
    super(message);
    this.name = "AdapterError";
    this.code = code;
    this.recoverable = recoverable;
  }
}

/**
 * Raised by the SDK's waits (`fetch`, SSE reads) once the user has
 * interrupted the run. An adapter may catch it to end with its own `done`
 * (e.g. with a resume token); left uncaught, the SDK ends the run with
 * `done` of status `interrupted`.
 */
export class InterruptedError extends Error {
  constructor(message = "the run was interrupted") {
    super(message);
    this.name = "InterruptedError";
  }
}

/** A short description of any thrown value, for an error event. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    return error.message ? `${error.name}: ${error.message}` : error.name;
  }
  try {
    return typeof error === "string" ? error : JSON.stringify(error) ?? String(error);
  } catch {
    return String(error);
  }
}
