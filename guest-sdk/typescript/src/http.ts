/**
 * HTTP over `wasi:http`, the only way an adapter reaches the network.
 *
 * The engine inside the component implements the web `fetch` on
 * `wasi:http/outgoing-handler`, and the host sends a request only to a
 * destination the run was granted (`--allow-net`). A refused destination
 * fails the request (the engine reports it as a network error) and the
 * user sees the host's `CAPABILITY_DENIED` event naming the flag that
 * would allow it. (Known engine bug, componentize-js 0.23: a request
 * *with a body* to a refused destination aborts the whole component, which
 * the host reports as `ADAPTER_ERROR`; a GET fails normally.) This module
 * adds what an adapter needs on top: waits
 * that end at once when the run is interrupted, and errors that say which
 * request failed.
 */

import { InterruptedError } from "./errors.js";
import { abortable, activeSignal } from "./interrupt.js";

/** Why a request failed, other than an interruption. */
export class HttpError extends Error {
  /** The URL of the request. */
  readonly url: string;

  constructor(url: string, cause: unknown) {
    super(
      `request to ${url} failed: ${cause instanceof Error ? cause.message : String(cause)} ` +
        `(is the server running, and was its host granted with --allow-net?)`,
    );
    this.name = "HttpError";
    this.url = url;
  }
}

/** The URL a `fetch` input names. */
function urlOf(input: string | URL | Request): string {
  if (typeof input === "string") {
    return input;
  }
  return input instanceof URL ? input.href : input.url;
}

/**
 * `fetch`, bound to the run: it fails with an {@link InterruptedError} as
 * soon as the run is interrupted (the request is abandoned), and with an
 * {@link HttpError} naming the URL when the request cannot be made (not
 * granted, connection refused, DNS). An HTTP error status is a response,
 * not an exception, as with the web `fetch`.
 *
 * `init.signal` replaces the run's signal when given.
 */
export async function fetch(input: string | URL | Request, init: RequestInit = {}): Promise<Response> {
  const signal = init.signal ?? activeSignal();
  try {
    // The engine's own abort support is not relied on: the wait below
    // ends on abort, and the abandoned request is dropped with the run.
    const { signal: _, ...rest } = init;
    return await abortable(globalThis.fetch(input, rest), signal ?? undefined);
  } catch (error) {
    if (error instanceof InterruptedError || signal?.aborted) {
      throw new InterruptedError();
    }
    throw new HttpError(urlOf(input), error);
  }
}

/**
 * Reads a response body chunk by chunk, each read ending at once when the
 * run is interrupted. Ends when the body does.
 */
export async function* chunks(
  response: Response,
  signal: AbortSignal | undefined = activeSignal(),
): AsyncGenerator<Uint8Array, void, undefined> {
  if (response.body === null) {
    return;
  }
  const reader = response.body.getReader();
  try {
    for (;;) {
      const { done, value } = await abortable(reader.read(), signal);
      if (done) {
        return;
      }
      yield value;
    }
  } finally {
    // Dropping the body tells the host the request is over.
    reader.cancel().catch(() => {});
  }
}
