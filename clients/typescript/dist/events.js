import { MoatError } from './errors.js';
/**
 * The events of one run, in seq order, each once, ending after its `done`:
 * an async iterator. `lagged` from the server is handled inside (it
 * subscribes again where it stopped). Breaking out of a `for await` over it
 * (or calling {@link EventStream.close}) unsubscribes.
 */
export class EventStream {
    /** The run's id (or the prefix it was asked by). */
    runId;
    /** The seq of the last event yielded; -1 before the first. */
    seq = -1;
    /** How many times the server said this stream lagged. */
    lags = 0;
    /** How many times it subscribed again (after a lag, or to bound its buffer). */
    get resubscriptions() {
        return Math.max(0, this.#subscriptions - 1);
    }
    #host;
    #highWaterMark;
    #lowWaterMark;
    /** The seq of the next event to queue. */
    #nextSeq;
    #items = [];
    #head = 0;
    #subscriptionId = null;
    #subscriptions = 0;
    #started = false;
    #subscribing = false;
    /** Dropped its subscription to bound its buffer; subscribes again when drained. */
    #paused = false;
    /** The `done` was queued: the server sends nothing more. */
    #ended = false;
    /** The `done` was yielded, or the consumer stopped: iteration is over. */
    #finished = false;
    #error = null;
    #wakers = [];
    constructor(host, runId, options = {}) {
        this.#host = host;
        this.runId = runId;
        const from = options.fromSeq ?? 0;
        if (!Number.isInteger(from) || from < 0) {
            throw new TypeError(`fromSeq must be a non-negative integer, not ${String(options.fromSeq)}`);
        }
        this.#nextSeq = from;
        const high = options.highWaterMark ?? 8192;
        if (!Number.isInteger(high) || high < 1) {
            throw new TypeError(`highWaterMark must be a positive integer, not ${String(options.highWaterMark)}`);
        }
        this.#highWaterMark = high;
        this.#lowWaterMark = Math.floor(high / 4);
    }
    [Symbol.asyncIterator]() {
        return this;
    }
    async next() {
        for (;;) {
            if (this.#finished) {
                return { value: undefined, done: true };
            }
            if (!this.#started) {
                this.#started = true;
                this.#subscribe();
            }
            const item = this.#shift();
            if (item) {
                this.seq = item.seq;
                if (item.data.type === 'done') {
                    this.#finished = true;
                }
                else if (this.#paused && this.#queued() <= this.#lowWaterMark) {
                    this.#paused = false;
                    this.#subscribe();
                }
                return { value: item.data, done: false };
            }
            if (this.#error) {
                const error = this.#error;
                this.#error = null;
                this.#finished = true;
                throw error;
            }
            await new Promise((wake) => this.#wakers.push(wake));
        }
    }
    /** Stops the stream: unsubscribes; the iteration ends. */
    async return() {
        await this.close();
        return { value: undefined, done: true };
    }
    async throw(error) {
        await this.close();
        throw error;
    }
    /** Stops the stream (as breaking out of its loop does). */
    async close() {
        if (this.#finished) {
            return;
        }
        this.#finished = true;
        this.#items = [];
        this.#head = 0;
        this.#wake();
        const subscription = this.#subscriptionId;
        this.#subscriptionId = null;
        if (subscription !== null) {
            await this.#host.detachStream(subscription, !this.#ended);
        }
        // A subscribe still on its way is undone when its answer comes (attach).
    }
    // ----- called by the client ---------------------------------------------
    /** The server answered the subscribe: `subscriptionId`, and the events that came first. */
    attach(subscriptionId, early) {
        this.#subscribing = false;
        if (this.#finished) {
            return false; // the client unsubscribes it
        }
        this.#subscriptionId = subscriptionId;
        for (const message of early) {
            if (this.#subscriptionId !== subscriptionId) {
                break;
            }
            this.handle(message);
        }
        return true;
    }
    /** A message of this stream's subscription. */
    handle(message) {
        if (this.#finished || this.#subscriptionId === null) {
            return;
        }
        if (message.event === 'lagged') {
            // The server ended the subscription; everything before `nextSeq` came.
            this.lags += 1;
            this.#subscriptionId = null;
            // Resume from `nextSeq`, which is the next seq this stream expects
            // (never past it: what was not received is asked for again).
            this.#resumeOrPause();
            return;
        }
        const { seq, data } = message;
        if (seq < this.#nextSeq) {
            return; // seen already (a resubscription's replay overlaps)
        }
        if (seq > this.#nextSeq) {
            this.fail(new MoatError('PROTOCOL_ERROR', `run ${this.runId}: event ${seq} came where ${this.#nextSeq} was expected`));
            return;
        }
        this.#items.push({ seq, data });
        this.#nextSeq = seq + 1;
        if (data.type === 'done') {
            this.#ended = true;
            const subscription = this.#subscriptionId;
            this.#subscriptionId = null;
            void this.#host.detachStream(subscription, false);
        }
        else if (this.#queued() >= this.#highWaterMark) {
            // The consumer is far behind: stop receiving, resume from the store later.
            const subscription = this.#subscriptionId;
            this.#subscriptionId = null;
            this.#paused = true;
            void this.#host.detachStream(subscription, true);
        }
        this.#wake();
    }
    /** The subscription failed, or the connection is gone. */
    fail(error) {
        this.#subscribing = false;
        if (this.#finished || this.#ended) {
            return;
        }
        const subscription = this.#subscriptionId;
        this.#subscriptionId = null;
        if (subscription !== null) {
            void this.#host.detachStream(subscription, false);
        }
        this.#paused = false;
        this.#error ??= error;
        this.#wake();
    }
    // ----- inside ------------------------------------------------------------
    #resumeOrPause() {
        if (this.#queued() > this.#lowWaterMark) {
            this.#paused = true;
        }
        else {
            this.#subscribe();
        }
    }
    #subscribe() {
        if (this.#subscribing || this.#finished || this.#ended) {
            return;
        }
        this.#subscriptions += 1;
        this.#subscribing = true;
        this.#host.subscribeStream(this, this.#nextSeq);
    }
    #queued() {
        return this.#items.length - this.#head;
    }
    #shift() {
        if (this.#head >= this.#items.length) {
            return undefined;
        }
        const item = this.#items[this.#head];
        this.#head += 1;
        if (this.#head === this.#items.length) {
            this.#items = [];
            this.#head = 0;
        }
        else if (this.#head >= 1024 && this.#head * 2 >= this.#items.length) {
            this.#items = this.#items.slice(this.#head);
            this.#head = 0;
        }
        return item;
    }
    #wake() {
        const wakers = this.#wakers;
        this.#wakers = [];
        for (const wake of wakers) {
            wake();
        }
    }
}
//# sourceMappingURL=events.js.map