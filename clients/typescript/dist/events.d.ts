import type { AgentEvent, EventMessage } from './types.js';
/** Options of {@link MoatClient.events}. */
export interface EventsOptions {
    /** The first event to yield, by its seq (default 0: the run's first). */
    fromSeq?: number;
    /**
     * Most events kept for a consumer that reads slowly (default 8192). Past
     * it, the client drops its subscription and subscribes again from the next
     * seq once the consumer has caught up: memory stays bounded and nothing
     * is lost (the rest comes from the server's store).
     */
    highWaterMark?: number;
}
/** What an {@link EventStream} needs of its client. */
export interface StreamHost {
    /** Subscribes `stream` to its run from `fromSeq`; answers through `attach`/`fail`. */
    subscribeStream(stream: EventStream, fromSeq: number): void;
    /** Forgets a subscription; `unsubscribe` tells the server too. */
    detachStream(subscriptionId: string, unsubscribe: boolean): Promise<void>;
}
/**
 * The events of one run, in seq order, each once, ending after its `done`:
 * an async iterator. `lagged` from the server is handled inside (it
 * subscribes again where it stopped). Breaking out of a `for await` over it
 * (or calling {@link EventStream.close}) unsubscribes.
 */
export declare class EventStream implements AsyncIterableIterator<AgentEvent> {
    #private;
    /** The run's id (or the prefix it was asked by). */
    readonly runId: string;
    /** The seq of the last event yielded; -1 before the first. */
    seq: number;
    /** How many times the server said this stream lagged. */
    lags: number;
    /** How many times it subscribed again (after a lag, or to bound its buffer). */
    get resubscriptions(): number;
    constructor(host: StreamHost, runId: string, options?: EventsOptions);
    [Symbol.asyncIterator](): this;
    next(): Promise<IteratorResult<AgentEvent, undefined>>;
    /** Stops the stream: unsubscribes; the iteration ends. */
    return(): Promise<IteratorResult<AgentEvent, undefined>>;
    throw(error?: unknown): Promise<IteratorResult<AgentEvent, undefined>>;
    /** Stops the stream (as breaking out of its loop does). */
    close(): Promise<void>;
    /** The server answered the subscribe: `subscriptionId`, and the events that came first. */
    attach(subscriptionId: string, early: EventMessage[]): boolean;
    /** A message of this stream's subscription. */
    handle(message: EventMessage): void;
    /** The subscription failed, or the connection is gone. */
    fail(error: Error): void;
}
//# sourceMappingURL=events.d.ts.map