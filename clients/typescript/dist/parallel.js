// cligent's `runParallel` over `moat serve`: several runs, one stream.
import { randomUUID } from 'node:crypto';
import { MoatError } from './errors.js';
/** The parts of {@link RunAgentOptions}: the run request, and what the loop keeps. */
export function splitOptions(options = {}) {
    const { abortSignal, options: nested, trust, grants, limits, parent, workspace, ask, onPermissionRequest, highWaterMark, ...flat } = options;
    const runOptions = { ...flat, ...nested };
    return {
        request: {
            options: Object.keys(runOptions).length > 0 ? runOptions : undefined,
            trust,
            grants,
            limits,
            parent,
            workspace,
            // A run with a handler of its own asks: the handler is there to answer.
            ask: ask ?? (onPermissionRequest ? {} : undefined),
        },
        abortSignal,
        highWaterMark,
        resume: runOptions.resume,
        onPermissionRequest,
    };
}
/** The `done` of a run that never started, as cligent gives for a signal aborted before the start. */
export function interruptedDone(agent, resumeToken) {
    return {
        type: 'done',
        agent,
        timestamp: Date.now(),
        sessionId: randomUUID(),
        payload: {
            status: 'interrupted',
            ...(resumeToken ? { resumeToken } : {}),
            usage: { toolUses: 0 },
            durationMs: 0,
        },
    };
}
/** `event` with `role` set (where moat's `parallel` puts it: before `metadata` and `payload`). */
export function withRole(event, role) {
    if (role === undefined) {
        return event;
    }
    const out = {};
    for (const [key, value] of Object.entries(event)) {
        if (key === 'role')
            continue;
        if ((key === 'metadata' || key === 'payload') && !('role' in out)) {
            out['role'] = role;
        }
        out[key] = value;
    }
    if (!('role' in out)) {
        out['role'] = role;
    }
    return out;
}
/** The server's refusals of a request: a task it refuses fails alone. */
const REFUSALS = new Set([
    'INVALID_REQUEST',
    'NOT_FOUND',
    'BOUNDARY_VIOLATION',
    'RUN_FAILED',
    'CONFLICT',
]);
/** The `error` and `done` error of a task whose run the server refused to start (cligent's synthetic pair). */
function refused(agent, error, startedMs) {
    const sessionId = randomUUID();
    const timestamp = Date.now();
    return [
        {
            type: 'error',
            agent,
            timestamp,
            sessionId,
            payload: { code: error.code, message: error.message, recoverable: false },
        },
        {
            type: 'done',
            agent,
            timestamp,
            sessionId,
            payload: { status: 'error', usage: { toolUses: 0 }, durationMs: timestamp - startedMs },
        },
    ];
}
/** See `MoatClient.runParallel`. */
export async function* runTasks(client, tasks) {
    if (tasks.length === 0) {
        return;
    }
    const split = tasks.map((task) => splitOptions(task.options));
    const signals = split.map((s) => s.abortSignal).filter((s) => s !== undefined);
    if (signals.some((signal) => signal.aborted)) {
        // As cligent: no run starts; each task ends interrupted.
        for (const [index, task] of tasks.entries()) {
            yield withRole(interruptedDone(task.adapter, split[index].resume), task.role);
        }
        return;
    }
    const startedMs = Date.now();
    const pending = new Map();
    const states = tasks.map((task, index) => {
        const { request, highWaterMark, onPermissionRequest } = split[index];
        const start = client.run(task.adapter, task.prompt, request);
        pending.set(index, start.then((runId) => ({ index, kind: 'started', runId }), (error) => ({ index, kind: 'refused', error })));
        return {
            task,
            index,
            start,
            highWaterMark,
            onPermissionRequest,
            runId: undefined,
            forget: undefined,
            stream: undefined,
            done: false,
            cancelled: false,
        };
    });
    let aborted = false;
    const cancel = (state) => {
        if (!state.cancelled && !state.done && state.runId !== undefined && !client.isClosed) {
            state.cancelled = true;
            client.cancel(state.runId).catch(() => { });
        }
    };
    const onAbort = () => {
        aborted = true;
        for (const state of states)
            cancel(state);
    };
    for (const signal of signals) {
        signal.addEventListener('abort', onAbort, { once: true });
    }
    const next = (state) => {
        pending.set(state.index, state.stream.next().then((result) => ({ index: state.index, kind: 'event', result }), (error) => ({ index: state.index, kind: 'failed', error })));
    };
    let finished = false;
    try {
        while (pending.size > 0) {
            // The task just served goes to the back of the map: a busy run does not starve the others.
            const step = await Promise.race(pending.values());
            pending.delete(step.index);
            const state = states[step.index];
            switch (step.kind) {
                case 'started':
                    state.runId = step.runId;
                    if (state.onPermissionRequest)
                        state.forget = client.handlePermissions(step.runId, state.onPermissionRequest);
                    state.stream = client.events(step.runId, state.highWaterMark === undefined ? {} : { highWaterMark: state.highWaterMark });
                    if (aborted)
                        cancel(state);
                    next(state);
                    break;
                case 'refused':
                    if (!(step.error instanceof MoatError) || !REFUSALS.has(step.error.code)) {
                        throw step.error; // the connection is gone: every task is
                    }
                    state.done = true;
                    for (const event of refused(state.task.adapter, step.error, startedMs)) {
                        yield withRole(event, state.task.role);
                    }
                    break;
                case 'event': {
                    if (step.result.done) {
                        state.done = true; // (a stream ends after its done, or throws)
                        break;
                    }
                    const event = step.result.value;
                    if (event.type === 'done') {
                        state.done = true;
                    }
                    else {
                        next(state);
                    }
                    yield withRole(event, state.task.role);
                    break;
                }
                case 'failed':
                    throw step.error;
            }
        }
        finished = true;
    }
    finally {
        for (const signal of signals) {
            signal.removeEventListener('abort', onAbort);
        }
        for (const state of states) {
            state.forget?.();
        }
        if (!finished) {
            // The loop was left early (or failed): its runs are this loop's.
            for (const state of states) {
                if (state.done)
                    continue;
                if (state.runId !== undefined) {
                    cancel(state);
                    void state.stream?.close();
                }
                else {
                    state.start.then((runId) => {
                        if (!client.isClosed)
                            client.cancel(runId).catch(() => { });
                    }, () => { });
                }
            }
        }
    }
}
//# sourceMappingURL=parallel.js.map