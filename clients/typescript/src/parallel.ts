// cligent's `runParallel` over `moat serve`: several runs, one stream.
import { randomUUID } from 'node:crypto';

import type { EventsOptions } from './events.js';
import { MoatError } from './errors.js';
import type { EventStream } from './events.js';
import type { PermissionHandler } from './permissions.js';
import type { AgentEvent, DoneEvent, ErrorEvent, ProtocolErrorCode, RunOptions, RunRequest } from './types.js';

/**
 * One task of `MoatClient.runParallel`: cligent's `ParallelTask`, with
 * the adapter by name (as `runAgent` takes it) and the task's `role`.
 */
export interface ParallelTask {
  /** The adapter: a built-in's name, an installed adapter's, or a component's path. */
  adapter: string;
  prompt: string;
  /**
   * Set as `role` on every event of this task (cligent's `CligentEvent`),
   * which tells the tasks' events apart in the merged stream; absent: the
   * events have none.
   */
  role?: string;
  /**
   * The run's options, as {@link RunAgentOptions}: flat (`model`, `cwd`, …)
   * or under `options`, with `trust`, `grants`, `limits`, `parent`,
   * `workspace`, `ask`, `onPermissionRequest`, `highWaterMark` and
   * `abortSignal`. Aborting any task's signal cancels every task.
   */
  options?: RunAgentOptions;
}

/** The parts of {@link RunAgentOptions}: the run request, and what the loop keeps. */
export function splitOptions(options: RunAgentOptions = {}): {
  request: RunRequest;
  abortSignal: AbortSignal | undefined;
  highWaterMark: number | undefined;
  resume: string | undefined;
  onPermissionRequest: PermissionHandler | undefined;
} {
  const { abortSignal, options: nested, trust, grants, limits, parent, workspace, ask, onPermissionRequest, highWaterMark, ...flat } =
    options;
  const runOptions: RunOptions = { ...flat, ...nested };
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
export function interruptedDone(agent: string, resumeToken?: string): DoneEvent {
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
export function withRole(event: AgentEvent, role: string | undefined): AgentEvent {
  if (role === undefined) {
    return event;
  }
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(event)) {
    if (key === 'role') continue;
    if ((key === 'metadata' || key === 'payload') && !('role' in out)) {
      out['role'] = role;
    }
    out[key] = value;
  }
  if (!('role' in out)) {
    out['role'] = role;
  }
  return out as unknown as AgentEvent;
}

/** The server's refusals of a request: a task it refuses fails alone. */
const REFUSALS: ReadonlySet<string> = new Set<ProtocolErrorCode>([
  'INVALID_REQUEST',
  'NOT_FOUND',
  'BOUNDARY_VIOLATION',
  'RUN_FAILED',
  'CONFLICT',
]);

/** The `error` and `done` error of a task whose run the server refused to start (cligent's synthetic pair). */
function refused(agent: string, error: MoatError, startedMs: number): [ErrorEvent, DoneEvent] {
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

interface TaskState {
  readonly task: ParallelTask;
  readonly index: number;
  readonly start: Promise<string>;
  readonly highWaterMark: number | undefined;
  readonly onPermissionRequest: PermissionHandler | undefined;
  runId: string | undefined;
  /** Removes the task's permission handler. */
  forget: (() => void) | undefined;
  stream: EventStream | undefined;
  /** Its `done` was yielded (or it was refused): nothing more of it. */
  done: boolean;
  cancelled: boolean;
}

type Step =
  | { index: number; kind: 'started'; runId: string }
  | { index: number; kind: 'refused'; error: unknown }
  | { index: number; kind: 'event'; result: IteratorResult<AgentEvent, undefined> }
  | { index: number; kind: 'failed'; error: unknown };

/** The options of `runAgent` and of a parallel task: flat run options, the run request, and the loop's own. */
export interface RunAgentOptions extends RunOptions, RunRequest {
  /** Aborting it cancels the run: the stream then ends with its `done` interrupted. */
  abortSignal?: AbortSignal;
  /** See {@link EventsOptions.highWaterMark}. */
  highWaterMark?: number;
  /**
   * Answers this run's permission requests (before the client's own
   * handler, {@link MoatClient.onPermissionRequest}), as the Claude Agent
   * SDK's `canUseTool`. Implies `ask: {}` when `ask` is absent.
   */
  onPermissionRequest?: PermissionHandler;
}

/** What the loop needs of a client (a `MoatClient`). */
export interface RunsHost {
  readonly isClosed: boolean;
  run(adapter: string, prompt: string, request?: RunRequest): Promise<string>;
  cancel(runId: string): Promise<void>;
  events(runId: string, options?: EventsOptions): EventStream;
  handlePermissions(runId: string, handler: PermissionHandler): () => void;
}

/** See `MoatClient.runParallel`. */
export async function* runTasks(client: RunsHost, tasks: readonly ParallelTask[]): AsyncGenerator<AgentEvent, void, void> {
  if (tasks.length === 0) {
    return;
  }
  const split = tasks.map((task) => splitOptions(task.options));
  const signals = split.map((s) => s.abortSignal).filter((s): s is AbortSignal => s !== undefined);
  if (signals.some((signal) => signal.aborted)) {
    // As cligent: no run starts; each task ends interrupted.
    for (const [index, task] of tasks.entries()) {
      yield withRole(interruptedDone(task.adapter, split[index]!.resume), task.role);
    }
    return;
  }

  const startedMs = Date.now();
  const pending = new Map<number, Promise<Step>>();
  const states: TaskState[] = tasks.map((task, index) => {
    const { request, highWaterMark, onPermissionRequest } = split[index]!;
    const start = client.run(task.adapter, task.prompt, request);
    pending.set(
      index,
      start.then(
        (runId): Step => ({ index, kind: 'started', runId }),
        (error: unknown): Step => ({ index, kind: 'refused', error }),
      ),
    );
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
  const cancel = (state: TaskState): void => {
    if (!state.cancelled && !state.done && state.runId !== undefined && !client.isClosed) {
      state.cancelled = true;
      client.cancel(state.runId).catch(() => {});
    }
  };
  const onAbort = (): void => {
    aborted = true;
    for (const state of states) cancel(state);
  };
  for (const signal of signals) {
    signal.addEventListener('abort', onAbort, { once: true });
  }
  const next = (state: TaskState): void => {
    pending.set(
      state.index,
      state.stream!.next().then(
        (result): Step => ({ index: state.index, kind: 'event', result }),
        (error: unknown): Step => ({ index: state.index, kind: 'failed', error }),
      ),
    );
  };

  let finished = false;
  try {
    while (pending.size > 0) {
      // The task just served goes to the back of the map: a busy run does not starve the others.
      const step = await Promise.race(pending.values());
      pending.delete(step.index);
      const state = states[step.index]!;
      switch (step.kind) {
        case 'started':
          state.runId = step.runId;
          if (state.onPermissionRequest) state.forget = client.handlePermissions(step.runId, state.onPermissionRequest);
          state.stream = client.events(step.runId, state.highWaterMark === undefined ? {} : { highWaterMark: state.highWaterMark });
          if (aborted) cancel(state);
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
          } else {
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
  } finally {
    for (const signal of signals) {
      signal.removeEventListener('abort', onAbort);
    }
    for (const state of states) {
      state.forget?.();
    }
    if (!finished) {
      // The loop was left early (or failed): its runs are this loop's.
      for (const state of states) {
        if (state.done) continue;
        if (state.runId !== undefined) {
          cancel(state);
          void state.stream?.close();
        } else {
          state.start.then(
            (runId) => {
              if (!client.isClosed) client.cancel(runId).catch(() => {});
            },
            () => {},
          );
        }
      }
    }
  }
}
