/**
 * `defineAdapter`: an adapter's info and run function, turned into the
 * component's `moat:adapter/adapter` export (the `info` and `run`
 * functions and the `session` resource with its `nextBatch()`).
 */

import { ADAPTER_ERROR, AdapterError, describeError } from "./errors.js";
import { interrupted } from "./host.js";
import { setActiveSignal } from "./interrupt.js";
import { runOptions, type RunOptions } from "./options.js";
import { EventStream, type EventSource } from "./stream.js";
import type { AdapterInfo, ErrorInfo, Event, Options } from "./types.js";

/** What an adapter says of itself (`moat inspect` shows it). */
export interface AdapterInfoInit {
  /** Short lowercase name, e.g. `"openai"`. */
  name: string;
  version: string;
  description: string;
  /**
   * What it needs from the host: network hosts (`"host:port"`),
   * environment variables, programs. A component from a path gets none of
   * it until the user grants it.
   */
  needs?: { hosts?: string[]; env?: string[]; programs?: string[] };
  /** Whether tool names in allowed/disallowed lists may be patterns. */
  toolPatterns?: boolean;
}

/** What a run gets besides its prompt and options. */
export interface RunContext {
  /**
   * Aborted when the user interrupts the run. The SDK's `fetch` and SSE
   * reads listen to it already; pass it to anything else that waits.
   */
  signal: AbortSignal;
}

/** An adapter: its description and what one run does. */
export interface AdapterDefinition {
  info: AdapterInfoInit;
  /**
   * Starts a run and returns its events, usually as an `async function*`
   * generator ending with `done`. Throw an {@link AdapterError} before the
   * first event to refuse the run (before the backend starts): the caller
   * gets that error and nothing has run.
   */
  run(prompt: string, options: RunOptions, context: RunContext): EventSource | Promise<EventSource>;
}

/** The session resource the host holds and pulls. */
export interface SessionResource {
  nextBatch(max: number): Promise<Event[]>;
}

/** The shape componentize-js exports as `moat:adapter/adapter`. */
export interface AdapterExport {
  info(): AdapterInfo;
  run(prompt: string, options: Options): Promise<SessionResource>;
  Session: new (stream: EventStream) => SessionResource;
}

/** The contract's error for a refusal raised as `thrown`. */
function refusal(thrown: unknown): ErrorInfo {
  if (thrown instanceof AdapterError) {
    return { code: thrown.code, message: thrown.message, recoverable: thrown.recoverable };
  }
  return { code: ADAPTER_ERROR, message: describeError(thrown), recoverable: false };
}

/**
 * The component export for `definition`. Export it as `adapter` from the
 * adapter's entry module:
 *
 * ```ts
 * export const adapter = defineAdapter({ info: {...}, async *run(prompt) {...} });
 * ```
 */
export function defineAdapter(definition: AdapterDefinition): AdapterExport {
  const info: AdapterInfo = {
    name: definition.info.name,
    version: definition.info.version,
    description: definition.info.description,
    needs: {
      hosts: [...(definition.info.needs?.hosts ?? [])],
      env: [...(definition.info.needs?.env ?? [])],
      programs: [...(definition.info.needs?.programs ?? [])],
    },
    toolPatterns: definition.info.toolPatterns ?? false,
  };

  /** One run, owned by the host through a resource handle. */
  class Session implements SessionResource {
    readonly #stream: EventStream;
    constructor(stream: EventStream) {
      this.#stream = stream;
    }
    /**
     * One event per pull: whether a generator's next event is at hand
     * cannot be told without waiting for it, and waiting could hold back
     * the event already pulled.
     */
    async nextBatch(_max: number): Promise<Event[]> {
      const event = await this.#stream.next();
      return event === undefined ? [] : [event];
    }
  }

  return {
    info: () => info,
    async run(prompt: string, options: Options): Promise<SessionResource> {
      const controller = new AbortController();
      setActiveSignal(controller.signal);
      try {
        const source = await definition.run(prompt, runOptions(options), {
          signal: controller.signal,
        });
        const stream = new EventStream(source, controller, interrupted);
        await stream.prime();
        return new Session(stream);
      } catch (thrown) {
        // componentize-js returns a thrown value as the `err` case of
        // `result<session, error-info>`: the run's refusal.
        throw refusal(thrown);
      }
    },
    Session,
  };
}
