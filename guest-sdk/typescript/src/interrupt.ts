/**
 * Turning the host's abort flag into an `AbortSignal`.
 *
 * The host only sets a flag (`interrupted()`); it cannot wake a component
 * that waits inside the JavaScript event loop. So while the SDK waits for
 * the adapter's next event it looks at the flag every
 * {@link CHECK_INTERVAL_MS} and aborts the run's signal when it is set:
 * a `fetch` or SSE read then fails at once instead of waiting for a slow
 * server until the host cuts the run off.
 */

import { InterruptedError } from "./errors.js";

/** How often a wait looks at the abort flag (as the Rust SDK does). */
export const CHECK_INTERVAL_MS = 20;

/** The signal of the run being served, for helpers called without one. */
let active: AbortSignal | undefined;

/** The signal of the run this component is serving, if any. */
export function activeSignal(): AbortSignal | undefined {
  return active;
}

/** Makes `signal` the one helpers use when given none. */
export function setActiveSignal(signal: AbortSignal | undefined): void {
  active = signal;
}

/**
 * Waits for `promise` while looking at `isInterrupted` every
 * {@link CHECK_INTERVAL_MS}; the first time it says yes, `controller` is
 * aborted (which fails the waits that listen to its signal).
 */
export async function watch<T>(
  promise: Promise<T>,
  controller: AbortController,
  isInterrupted: () => boolean,
): Promise<T> {
  if (controller.signal.aborted) {
    return promise;
  }
  const timer = setInterval(() => {
    if (isInterrupted()) {
      controller.abort(new InterruptedError());
    }
  }, CHECK_INTERVAL_MS);
  try {
    return await promise;
  } finally {
    clearInterval(timer);
  }
}

/**
 * `promise`, or an {@link InterruptedError} as soon as `signal` aborts,
 * whichever comes first. The abandoned promise is left to settle unseen:
 * the engine's own `fetch` abort support is not relied on.
 */
export function abortable<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (signal === undefined) {
    return promise;
  }
  if (signal.aborted) {
    promise.catch(() => {});
    return Promise.reject(new InterruptedError());
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(new InterruptedError());
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
