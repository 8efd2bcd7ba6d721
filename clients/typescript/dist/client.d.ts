import { type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { MoatError } from './errors.js';
import { EventStream, type EventsOptions, type StreamHost } from './events.js';
import { type ParallelTask, type RunAgentOptions } from './parallel.js';
import { type PermissionHandler, type PermissionRequest, type PermissionsHost } from './permissions.js';
import type { AdapterDescription, AdapterInspection, AgentEvent, Approval, EngineResult, Op, RunRecord, RunRequest, RunStatus, RunTraffic, WorkflowStatusResult } from './types.js';
/** The longest request line the server reads (4 MiB). */
export declare const MAX_REQUEST_BYTES: number;
/** Options of {@link MoatClient.spawn}. */
export interface SpawnOptions {
    /** The `moat` binary (default: `$MOAT_BIN`, else `moat` on the PATH). */
    bin?: string;
    /** Flags after `moat serve`, e.g. `['--allow-env', 'HOME']`. */
    args?: string[];
    /** Variables set over this process's environment (e.g. `MOAT_STORE`). */
    env?: Record<string, string | undefined>;
    /** The server's working directory. */
    cwd?: string;
    /**
     * The server's stderr: `pipe` (default) keeps its tail for error
     * messages, `inherit` shares this process's, `ignore` drops it.
     */
    stderr?: 'pipe' | 'inherit' | 'ignore';
}
/** How a spawned server exited. */
export interface ExitStatus {
    code: number | null;
    signal: NodeJS.Signals | null;
}
/** Options of {@link MoatClient.list}. */
export interface ListOptions {
    status?: RunStatus[];
    /** Only runs of this adapter. */
    adapter?: string;
    /** Only the children of this run (an id or a prefix). */
    parent?: string;
    limit?: number;
}
/** Options of {@link MoatClient.diff}. */
export interface DiffOptions {
    /** git's `--stat` summary (files changed, insertions, deletions) instead of the diff. */
    stat?: boolean;
}
/** Options of {@link MoatClient.approve}. */
export interface ApproveOptions {
    /** The request's number (a `permission_request`'s `requestId`); absent: the run's only open request. */
    request?: number | string;
    /** Also every later request of the run for the same host, program, directory or tool. */
    always?: boolean;
}
/** Options of {@link MoatClient.deny}. */
export interface DenyOptions {
    /** The request's number (a `permission_request`'s `requestId`); absent: the run's only open request. */
    request?: number | string;
    /** Why, for the run (its `CAPABILITY_DENIED` error says it) and its record. */
    reason?: string;
}
/** Options of {@link MoatClient.workflowRun}: how the workflow starts. */
export interface WorkflowRunOptions {
    /** Start over though an earlier run of it did not finish (`moat workflow run --fresh`). */
    fresh?: boolean;
    /** Go on where its state says: completed tasks are skipped (`moat workflow resume`). Not with `fresh`. */
    resume?: boolean;
    /** With `resume`: resume though the file changed since its state was written (`--force`). */
    force?: boolean;
    /** How many tasks run at once, at least 1 (else as the file says, else 4; the server runs at most 64). */
    maxParallel?: number;
}
/** Options of {@link MoatClient.runAgent}: the run's options (flat, as cligent's), its request fields, and an abort signal. */
export type { RunAgentOptions } from './parallel.js';
/**
 * A connection to `moat serve`: over a spawned server's stdin/stdout
 * ({@link MoatClient.spawn}) or a Unix socket ({@link MoatClient.connect}).
 *
 * Requests get ids and promises; responses are matched by id, in whatever
 * order they come; events go to their {@link EventStream}. Errors are
 * {@link MoatError}s. When the connection ends, pending requests reject with
 * `CONNECTION_CLOSED` and live event streams end with that error.
 *
 * Emits `event` (every event message as sent: `run_event`, `lagged`),
 * `close` (the {@link MoatError} saying why the connection ended) and
 * `permissionError` (`(error, runId, request)`: a permission handler threw,
 * or its answer failed for another reason than the request having been
 * answered already; see {@link MoatClient.onPermissionRequest}).
 */
export declare class MoatClient extends EventEmitter implements StreamHost, PermissionsHost {
    #private;
    /** The spawned server, when there is one. */
    readonly process: ChildProcess | undefined;
    /** Resolves with the reason once the connection has ended (never rejects). */
    readonly closed: Promise<MoatError>;
    /** Resolves when a spawned server exited (with its status); `null` for a socket, once closed. */
    readonly exited: Promise<ExitStatus | null>;
    private constructor();
    /** Starts `moat serve` (stdio) as a child and connects to it. */
    static spawn(options?: SpawnOptions): Promise<MoatClient>;
    /** Connects to a server on a Unix socket (`moat serve --socket PATH`). */
    static connect(socketPath: string): Promise<MoatClient>;
    /** Whether the connection has ended. */
    get isClosed(): boolean;
    /**
     * Sends one request as it is: `{id, op, ...fields}`; its result, or a
     * {@link MoatError} with the server's code. The low-level door to every op.
     */
    request<T = unknown>(op: Op | (string & {}), fields?: Record<string, unknown>): Promise<T>;
    /**
     * Starts a run of `adapter` (a built-in's name or a component's path); its id, as soon as it is recorded.
     * With `workspace`, the run works on a workspace of the project at `options.cwd` (absolute, granted):
     * see {@link MoatClient.diff} and {@link MoatClient.apply}.
     */
    run(adapter: string, prompt: string, request?: RunRequest): Promise<string>;
    /**
     * Waits for every run to end; their results by id. When one did not
     * complete: a `RUN_FAILED` {@link MoatError} whose `data.results` has them.
     */
    await(runIds: string[]): Promise<Record<string, EngineResult>>;
    /** Waits for one run to end; its result (`RUN_FAILED` as {@link MoatClient.await}). */
    awaitRun(runId: string): Promise<EngineResult>;
    /** Cancels a run; an unknown, ended or cancelled run is a success too. */
    cancel(runId: string): Promise<void>;
    /** A run's record. */
    get(runId: string): Promise<RunRecord>;
    /** Run records, newest first. */
    list(options?: ListOptions): Promise<RunRecord[]>;
    /** The adapters the server knows. */
    adapters(): Promise<AdapterDescription[]>;
    /** An adapter's description, with the most a run of it may be granted here. */
    inspect(adapter: string): Promise<AdapterInspection>;
    /**
     * What a run with a workspace changed there, against its base: a unified
     * diff (`''`: nothing), or with `stat` git's `--stat` summary.
     * `NOT_FOUND` for a run without a workspace.
     */
    diff(runId: string, options?: DiffOptions): Promise<string>;
    /**
     * Applies a run's changes to its project's working tree, all or nothing:
     * `true` once they are in, `false` when it changed nothing. `CONFLICT`
     * when they do not apply to the project as it is now (nothing was
     * changed); `INVALID_REQUEST` while the run is live. With `commits`,
     * the commits the run made in its workspace's repository land on the
     * project's branch instead (fast-forward or cherry-picked, all or none).
     * Links the run made that point outside the project and changes to
     * files that run code later are refused (`BOUNDARY_VIOLATION`, nothing
     * changed) unless `includeProtected`.
     */
    apply(runId: string, options?: {
        commits?: boolean;
        includeProtected?: boolean;
    }): Promise<boolean>;
    /**
     * Approves a run's request for approval (its only open one when
     * `request` is absent); the request, answered. `INVALID_REQUEST` when it
     * was answered already (by anyone: the first answer wins) or the run has
     * ended; `NOT_FOUND` for an unknown run.
     */
    approve(runId: string, options?: ApproveOptions): Promise<Approval>;
    /** Denies a run's request for approval, as {@link MoatClient.approve} approves one. */
    deny(runId: string, options?: DenyOptions): Promise<Approval>;
    /** A run's requests for approval, oldest first, each with its answer (`null` while open). */
    approvals(runId: string): Promise<Approval[]>;
    /**
     * A run's traffic through moat (docs/protocol.md#traffic): every request
     * and connection it made, oldest first (the first 1,000; past them,
     * counts per destination in `overflow`), and its model calls' usage as
     * moat read it from their answers (`metered`) beside what its adapter
     * reported (`reported`). A row never holds a body, a header's value or a
     * query. `NOT_FOUND` for an unknown run.
     */
    traffic(runId: string): Promise<RunTraffic>;
    /**
     * Starts the workflow file `file` (a path on the server's machine,
     * absolute) in the server, as `moat workflow run` would
     * (docs/workflows.md): its own run record (adapter `workflow`), whose
     * children are its tasks' runs (each with its task's id as `role`: see
     * {@link MoatClient.list}'s `parent`), its state file in its project.
     * Answers as soon as its state is taken, with its record's id, which
     * {@link MoatClient.await}, {@link MoatClient.get} and
     * {@link MoatClient.cancel} take as any run's; `null` on a server whose
     * runs go to a cluster (the record stays with a store of that machine).
     *
     * `INVALID_REQUEST`: a relative path, a file with a mistake (its message
     * names the file and line), `resume` with `fresh`; `CONFLICT`: an earlier
     * run did not finish (give `resume` or `fresh`), the file changed since
     * (`resume` with `force`), or it is running already (another run holds
     * its lock); `NOT_FOUND`: `resume` of a workflow that has not run here;
     * `RUN_FAILED`: its state or record could not be written.
     */
    workflowRun(file: string, options?: WorkflowRunOptions): Promise<string | null>;
    /**
     * The workflow file `file`'s state here (a path on the server's machine,
     * absolute): its name, and its state file as `moat workflow status -o
     * json` prints it (`status`, each task's `status`, the `runs` of the
     * workflow's records, …), `null` when it has not run here.
     * `INVALID_REQUEST` for a relative path or a file with a mistake.
     */
    workflowStatus(file: string): Promise<WorkflowStatusResult>;
    /**
     * Sets the handler of the permission requests of every run this client
     * follows ({@link MoatClient.events}, {@link MoatClient.runAgent},
     * {@link MoatClient.runParallel}), as the Claude Agent SDK's `canUseTool`:
     * when a `permission_request` of such a run arrives (a run started with
     * `ask`), the handler is called with the run's id and the request
     * (`requestId`, `kind`, `toolName`, `input`, `reason`), and its decision
     * — `{behavior: 'allow', always?}` or `{behavior: 'deny', message?}`,
     * returned or resolved — is sent as {@link MoatClient.approve} /
     * {@link MoatClient.deny}. `undefined` leaves the request open.
     *
     * Each request is put to the handler once per client, and only while it
     * is open; an answer that comes after someone else's (another client,
     * `moat approve`, the timeout) is dropped, and `context.signal` aborts
     * then. A handler that throws denies the request. A run's own handler
     * (`runAgent`'s `onPermissionRequest`) comes before this one. `null`
     * removes it; the returned function removes it too.
     */
    onPermissionRequest(handler: PermissionHandler | null): () => void;
    /** Stops the server: it starts no new run, ends its live runs (with `done` interrupted) and exits. */
    shutdown(): Promise<void>;
    /**
     * The events of a run (the `data` of its `run_event`s), from `fromSeq`,
     * each once and in order, ending after its `done`. Lags are handled
     * inside; breaking out of the loop unsubscribes.
     */
    events(runId: string, options?: EventsOptions): EventStream;
    /**
     * cligent's `runAgent` loop: starts a run and yields its every event until
     * its `done`. Options are the run's options (flat: `model`, `cwd`, …, or
     * under `options`), `trust`, `grants`, `limits`, `parent`, `workspace`, and
     * `abortSignal`: aborting it cancels the run, whose stream then ends with
     * its `done` interrupted. Aborted before the start: no run, one `done`
     * interrupted. Leaving the loop early cancels the run.
     */
    runAgent(adapter: string, prompt: string, options?: RunAgentOptions): AsyncGenerator<AgentEvent, void, void>;
    /**
     * cligent's `runParallel`: starts a run per task at once and yields the
     * events of them all as they come, one merged stream, each event with its
     * task's `role` (when the task has one), until every run's `done`. Each
     * run's events keep their order; each run ends with exactly one `done`.
     *
     * - Aborting any task's `abortSignal` cancels every run: each then ends
     *   with its `done` interrupted. Aborted before the start: no run starts,
     *   and each task yields one `done` interrupted.
     * - A task the server refuses to start (an unknown adapter, grants beyond
     *   the server's, …) yields an `error` (the protocol's code and message,
     *   not recoverable) and a `done` error; the other tasks go on.
     * - Leaving the loop early cancels every run still going. A lost
     *   connection ends the stream with its `CONNECTION_CLOSED` error.
     *
     * Each task is a run of its own (recorded, cancellable alone); roles are
     * the client's (the server's runs have none).
     */
    runParallel(tasks: readonly ParallelTask[]): AsyncGenerator<AgentEvent, void, void>;
    /**
     * Ends the connection: pending requests reject with `CONNECTION_CLOSED`.
     * A spawned server sees its stdin close and stops (its live runs end
     * interrupted); it is killed if it has not exited after `timeoutMs`
     * (default 10 s).
     */
    close(options?: {
        timeoutMs?: number;
    }): Promise<void>;
    /**
     * Answers the permission requests of run `runId` with `handler` (before
     * the client's own) until the returned function is called.
     * @internal
     */
    handlePermissions(runId: string, handler: PermissionHandler): () => void;
    /** @internal */
    reportPermissionError(error: unknown, runId: string, request: PermissionRequest): void;
    /** @internal */
    subscribeStream(stream: EventStream, fromSeq: number): void;
    /** @internal */
    detachStream(subscriptionId: string, unsubscribe: boolean): Promise<void>;
}
/**
 * cligent's `runAgent(agent, prompt, options, registry)` with a
 * {@link MoatClient} in the registry's place: the same loop, run by moat.
 */
export declare function runAgent(agent: string, prompt: string, options: RunAgentOptions | undefined, client: MoatClient): AsyncGenerator<AgentEvent, void, void>;
/**
 * cligent's `runParallel(tasks)` with a {@link MoatClient} to run them: see
 * {@link MoatClient.runParallel}. A task names its adapter (`adapter: 'echo'`)
 * where cligent's holds an adapter object, and may carry a `role`.
 */
export declare function runParallel(tasks: readonly ParallelTask[], client: MoatClient): AsyncGenerator<AgentEvent, void, void>;
//# sourceMappingURL=client.d.ts.map