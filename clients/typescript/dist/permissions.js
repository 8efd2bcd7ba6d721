// Permission requests of the runs a client follows, answered by a handler
// (docs/approvals.md): the Claude Agent SDK's `canUseTool`, for moat's runs.
import { MoatError } from './errors.js';
/**
 * Watches the events of a client's subscriptions for `permission_request`s
 * and answers each once with its run's handler (or the client's).
 * @internal
 */
export class Permissions {
    /** The client's handler, for every run it follows. */
    handler = null;
    #host;
    /** Handlers of single runs (runAgent's, a parallel task's), before the client's. */
    #byRun = new Map();
    /** Requests seen (`run\0requestId`), until their run's `done`. */
    #asked = new Map();
    #closed = false;
    constructor(host) {
        this.#host = host;
    }
    /** Sets `handler` for the requests of one run; the returned function removes it. */
    forRun(runId, handler) {
        this.#byRun.set(runId, handler);
        return () => {
            if (this.#byRun.get(runId) === handler) {
                this.#byRun.delete(runId);
            }
        };
    }
    /** An event of one of the client's subscriptions (called as it is read). */
    observe(message) {
        const { run, data } = message;
        if (typeof data !== 'object' || data === null) {
            return;
        }
        if (data.type === 'permission_request') {
            this.#requested(run, data);
        }
        else if (data.type === 'moat:permission_answer') {
            const payload = data.payload;
            const requestId = payload?.requestId;
            if (typeof requestId === 'string') {
                this.#asked.get(key(run, requestId))?.controller.abort();
            }
        }
        else if (data.type === 'done') {
            for (const [k, asked] of this.#asked) {
                if (asked.runId === run) {
                    asked.controller.abort();
                    this.#asked.delete(k);
                }
            }
        }
    }
    /** The connection is gone: no answer can be sent. */
    close() {
        this.#closed = true;
        for (const asked of this.#asked.values()) {
            asked.controller.abort();
        }
        this.#asked.clear();
        this.#byRun.clear();
    }
    #requested(runId, event) {
        const payload = event.payload;
        const requestId = payload.requestId;
        if (this.#closed || typeof requestId !== 'string') {
            return; // a request the adapter only reports: its backend answered it
        }
        const handler = this.#byRun.get(runId) ?? this.handler;
        const number = Number(requestId);
        if (!handler || !Number.isInteger(number) || number < 1) {
            return;
        }
        const k = key(runId, requestId);
        if (this.#asked.has(k)) {
            return; // seen already (another stream of the same run, a replay)
        }
        const controller = new AbortController();
        this.#asked.set(k, { runId, controller });
        void this.#ask(runId, number, requestId, event, handler, controller.signal);
    }
    async #ask(runId, number, requestId, event, handler, signal) {
        const payload = event.payload;
        const request = {
            requestId,
            number,
            kind: payload.kind ?? kindOf(payload.toolName),
            toolName: payload.toolName,
            toolUseId: payload.toolUseId,
            input: payload.input ?? {},
            ...(payload.reason === undefined ? {} : { reason: payload.reason }),
            event,
        };
        try {
            // Only an open request is put to the handler: a replayed one (a
            // subscription from an earlier seq) may have been answered already.
            const approval = (await this.#host.approvals(runId)).find((a) => a.number === number);
            if (!approval || approval.answer !== null || signal.aborted) {
                return;
            }
            request.kind = payload.kind ?? approval.request.kind;
            let decision;
            try {
                decision = await handler(runId, request, { signal });
                if (decision != null && decision.behavior !== 'allow' && decision.behavior !== 'deny') {
                    throw new TypeError(`a permission handler decides {behavior: 'allow' | 'deny'}, not ${JSON.stringify(decision)}`);
                }
            }
            catch (error) {
                if (signal.aborted) {
                    return;
                }
                this.#host.reportPermissionError(error, runId, request);
                decision = { behavior: 'deny', message: `the client's permission handler failed: ${messageOf(error)}` };
            }
            if (decision == null || signal.aborted) {
                return; // left open, or answered by someone else meanwhile
            }
            if (decision.behavior === 'allow') {
                await this.#host.approve(runId, { request: number, ...(decision.always ? { always: true } : {}) });
            }
            else {
                await this.#host.deny(runId, { request: number, ...(decision.message === undefined ? {} : { reason: decision.message }) });
            }
        }
        catch (error) {
            if (!answeredOrGone(error)) {
                this.#host.reportPermissionError(error, runId, request);
            }
        }
    }
}
function key(runId, requestId) {
    return `${runId}\u0000${requestId}`;
}
/** `moat:net` → `net`; a tool's own name → `tool`. */
function kindOf(toolName) {
    const kind = toolName.startsWith('moat:') ? toolName.slice('moat:'.length) : 'tool';
    return kind;
}
function messageOf(error) {
    return error instanceof Error ? error.message : String(error);
}
/**
 * An answer that came too late, for nobody's fault: the request was
 * answered already or the run ended (`INVALID_REQUEST`), the run is gone
 * (`NOT_FOUND`), or the connection is (`CONNECTION_CLOSED`).
 */
function answeredOrGone(error) {
    return error instanceof MoatError && (error.code === 'INVALID_REQUEST' || error.code === 'NOT_FOUND' || error.code === 'CONNECTION_CLOSED');
}
//# sourceMappingURL=permissions.js.map