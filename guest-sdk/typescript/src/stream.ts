/**
 * The pull side of a run: an adapter's events (an async generator, a sync
 * generator or any iterable) served one at a time to the host's
 * `session.next-batch()`.
 *
 * What it adds to the adapter's own stream, and why:
 * - interruption: before each event and while waiting for one, it looks at
 *   the abort flag; once set, the run's signal is aborted, the adapter may
 *   still yield its own `done` (e.g. with a resume token), and otherwise
 *   the generator is closed (its `finally` blocks run) and the run ends
 *   with `done` interrupted;
 * - failures: an exception becomes an `error` event, then `done` error
 *   (an {@link AdapterError} keeps its code; anything else is
 *   `ADAPTER_ERROR`), so the user sees the message, not a bare trap;
 * - the end: after a `done` nothing more is pulled.
 *
 * It never fixes up the events themselves: the host validates every one,
 * adds `MISSING_DONE` to a stream that ends without `done`, and stops an
 * adapter that ignores an interruption.
 *
 * Host-independent (the abort flag is passed in): tested natively.
 */

import { ADAPTER_ERROR, AdapterError, InterruptedError, describeError } from "./errors.js";
import { done, error, isDone } from "./events.js";
import { watch } from "./interrupt.js";
import type { Event } from "./types.js";

/** What a run produces: its events, in order, ending with `done`. */
export type EventSource = AsyncIterable<Event> | Iterable<Event>;

type Pull = Promise<IteratorResult<Event, unknown>> | IteratorResult<Event, unknown>;

/** An async or sync iterator, pulled uniformly. */
interface Puller {
  next(): Pull;
  close(): Pull | undefined;
}

function puller(source: EventSource): Puller {
  const iterator: AsyncIterator<Event> | Iterator<Event> =
    Symbol.asyncIterator in source
      ? (source as AsyncIterable<Event>)[Symbol.asyncIterator]()
      : (source as Iterable<Event>)[Symbol.iterator]();
  return {
    next: () => iterator.next(),
    close: () => iterator.return?.(),
  };
}

/** One run's events, served one per {@link EventStream.next} call. */
export class EventStream {
  readonly #source: Puller;
  readonly #controller: AbortController;
  readonly #isInterrupted: () => boolean;
  /** Events decided by the SDK, sent before pulling the adapter again. */
  readonly #queue: Event[] = [];
  #finished = false;

  /**
   * Serves `source`; `controller` is the run's (its signal was given to
   * the adapter), `isInterrupted` reads the host's abort flag.
   */
  constructor(source: EventSource, controller: AbortController, isInterrupted: () => boolean) {
    this.#source = puller(source);
    this.#controller = controller;
    this.#isInterrupted = isInterrupted;
  }

  /**
   * Pulls the first event ahead, so that an exception the adapter raises
   * before its first event can refuse the run instead of starting it.
   */
  async prime(): Promise<void> {
    const step = await watch(
      Promise.resolve(this.#source.next()),
      this.#controller,
      this.#isInterrupted,
    );
    if (step.done) {
      this.#finished = true;
    } else {
      this.#queue.push(step.value);
    }
  }

  /** The next event for the host; `undefined` once the stream is over. */
  async next(): Promise<Event | undefined> {
    const queued = this.#queue.shift();
    if (queued !== undefined) {
      return this.#emit(queued);
    }
    if (this.#finished) {
      return undefined;
    }
    if (!this.#controller.signal.aborted && this.#isInterrupted()) {
      this.#controller.abort(new InterruptedError());
    }
    let step: IteratorResult<Event, unknown>;
    try {
      step = await watch(Promise.resolve(this.#source.next()), this.#controller, this.#isInterrupted);
    } catch (thrown) {
      return this.#fail(thrown);
    }
    if (this.#controller.signal.aborted) {
      // Interrupted: only the adapter's own `done` still counts.
      if (!step.done && isDone(step.value)) {
        return this.#emit(step.value);
      }
      return this.#stop();
    }
    if (step.done) {
      this.#finished = true;
      return undefined;
    }
    return this.#emit(step.value);
  }

  #emit(event: Event): Event {
    if (isDone(event)) {
      this.#finished = true;
    }
    return event;
  }

  /** Ends an interrupted run: closes the generator, then `done`. */
  async #stop(): Promise<Event> {
    this.#finished = true;
    try {
      await this.#source.close();
    } catch {
      // The run is over either way; a failing cleanup changes nothing.
    }
    return done("interrupted");
  }

  /** Ends a run whose adapter threw `thrown`. */
  #fail(thrown: unknown): Promise<Event> | Event {
    if (this.#controller.signal.aborted || thrown instanceof InterruptedError) {
      return this.#stop();
    }
    this.#finished = true;
    this.#queue.push(done("error"));
    if (thrown instanceof AdapterError) {
      return error(thrown.code, thrown.message, false);
    }
    return error(ADAPTER_ERROR, describeError(thrown), false);
  }
}
