import type { EventsOptions } from './events.js';
import type { EventStream } from './events.js';
import type { PermissionHandler } from './permissions.js';
import type { AgentEvent, DoneEvent, RunOptions, RunRequest } from './types.js';
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
export declare function splitOptions(options?: RunAgentOptions): {
    request: RunRequest;
    abortSignal: AbortSignal | undefined;
    highWaterMark: number | undefined;
    resume: string | undefined;
    onPermissionRequest: PermissionHandler | undefined;
};
/** The `done` of a run that never started, as cligent gives for a signal aborted before the start. */
export declare function interruptedDone(agent: string, resumeToken?: string): DoneEvent;
/** `event` with `role` set (where moat's `parallel` puts it: before `metadata` and `payload`). */
export declare function withRole(event: AgentEvent, role: string | undefined): AgentEvent;
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
export declare function runTasks(client: RunsHost, tasks: readonly ParallelTask[]): AsyncGenerator<AgentEvent, void, void>;
//# sourceMappingURL=parallel.d.ts.map