import { spawn as spawnProcess, type ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { createConnection } from 'node:net';
import type { Readable, Writable } from 'node:stream';

import { MoatError } from './errors.js';
import { EventStream, type EventsOptions, type StreamHost } from './events.js';
import { interruptedDone, runTasks, splitOptions, type ParallelTask, type RunAgentOptions } from './parallel.js';
import { Permissions, type PermissionHandler, type PermissionRequest, type PermissionsHost } from './permissions.js';
import type {
  AdapterDescription,
  AdapterInspection,
  AgentEvent,
  Approval,
  EngineResult,
  EventMessage,
  Op,
  ResponseMessage,
  RunRecord,
  RunRequest,
  RunStatus,
  RunTraffic,
  WireError,
  WorkflowStatusResult,
} from './types.js';

/** The longest request line the server reads (4 MiB). */
export const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

/** How much of a spawned server's stderr is kept for error messages. */
const STDERR_TAIL = 8 * 1024;

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

interface Pending {
  /** Called synchronously when the response is read. */
  settle(response: ResponseMessage): void;
  fail(error: MoatError): void;
}

function protocolError(error: WireError): MoatError {
  return new MoatError(error.code, error.message, error.data);
}

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
export class MoatClient extends EventEmitter implements StreamHost, PermissionsHost {
  /** The spawned server, when there is one. */
  readonly process: ChildProcess | undefined;
  /** Resolves with the reason once the connection has ended (never rejects). */
  readonly closed: Promise<MoatError>;
  /** Resolves when a spawned server exited (with its status); `null` for a socket, once closed. */
  readonly exited: Promise<ExitStatus | null>;

  readonly #input: Writable;
  readonly #output: Readable;
  #nextId = 1;
  readonly #pending = new Map<number, Pending>();
  readonly #streams = new Map<string, EventStream>();
  /** Events of subscriptions whose subscribe answer has not come yet. */
  readonly #orphans = new Map<string, EventMessage[]>();
  #subscribing = 0;
  #closedError: MoatError | null = null;
  #resolveClosed!: (error: MoatError) => void;
  #partial = '';
  #stderrTail = '';
  readonly #permissions = new Permissions(this);

  private constructor(input: Writable, output: Readable, child?: ChildProcess) {
    super();
    this.#input = input;
    this.#output = output;
    this.process = child;
    this.closed = new Promise((resolve) => {
      this.#resolveClosed = resolve;
    });
    if (child) {
      this.exited = new Promise((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) {
          resolve({ code: child.exitCode, signal: child.signalCode });
        } else {
          child.once('exit', (code, signal) => resolve({ code, signal }));
        }
      });
      child.stderr?.setEncoding('utf8');
      child.stderr?.on('data', (chunk: string) => {
        this.#stderrTail = (this.#stderrTail + chunk).slice(-STDERR_TAIL);
      });
      child.stderr?.on('error', () => {});
      child.on('error', (error) => this.#lose(`the moat server failed: ${error.message}`, error));
    } else {
      this.exited = this.closed.then(() => null);
    }
    output.setEncoding('utf8');
    output.on('data', (chunk: string) => this.#read(chunk));
    output.on('error', (error) => this.#lost(error));
    output.on('end', () => this.#lost());
    output.on('close', () => this.#lost());
    if ((input as unknown) !== output) {
      input.on('error', (error) => this.#lost(error));
    }
  }

  /** Starts `moat serve` (stdio) as a child and connects to it. */
  static spawn(options: SpawnOptions = {}): Promise<MoatClient> {
    const bin = options.bin ?? process.env['MOAT_BIN'] ?? 'moat';
    const args = ['serve', ...(options.args ?? [])];
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const [name, value] of Object.entries(options.env ?? {})) {
      if (value === undefined) {
        delete env[name];
      } else {
        env[name] = value;
      }
    }
    return new Promise((resolve, reject) => {
      let child: ChildProcess;
      try {
        child = spawnProcess(bin, args, {
          env,
          cwd: options.cwd,
          stdio: ['pipe', 'pipe', options.stderr ?? 'pipe'],
        });
      } catch (error) {
        reject(new MoatError('CONNECTION_CLOSED', `could not start ${bin} serve: ${String(error)}`, undefined, { cause: error }));
        return;
      }
      const failed = (error: Error): void => {
        reject(new MoatError('CONNECTION_CLOSED', `could not start ${bin} serve: ${error.message}`, undefined, { cause: error }));
      };
      child.once('error', failed);
      child.once('spawn', () => {
        child.off('error', failed);
        resolve(new MoatClient(child.stdin!, child.stdout!, child));
      });
    });
  }

  /** Connects to a server on a Unix socket (`moat serve --socket PATH`). */
  static connect(socketPath: string): Promise<MoatClient> {
    return new Promise((resolve, reject) => {
      const socket = createConnection(socketPath);
      const failed = (error: Error): void => {
        reject(new MoatError('CONNECTION_CLOSED', `could not connect to ${socketPath}: ${error.message}`, undefined, { cause: error }));
      };
      socket.once('error', failed);
      socket.once('connect', () => {
        socket.off('error', failed);
        resolve(new MoatClient(socket, socket));
      });
    });
  }

  /** Whether the connection has ended. */
  get isClosed(): boolean {
    return this.#closedError !== null;
  }

  // ----- operations ----------------------------------------------------------

  /**
   * Sends one request as it is: `{id, op, ...fields}`; its result, or a
   * {@link MoatError} with the server's code. The low-level door to every op.
   */
  request<T = unknown>(op: Op | (string & {}), fields: Record<string, unknown> = {}): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      this.#send(op, fields, {
        settle: (response) => {
          if (response.error) {
            reject(protocolError(response.error));
          } else {
            resolve(response.result as T);
          }
        },
        fail: reject,
      });
    });
  }

  /**
   * Starts a run of `adapter` (a built-in's name or a component's path); its id, as soon as it is recorded.
   * With `workspace`, the run works on a workspace of the project at `options.cwd` (absolute, granted):
   * see {@link MoatClient.diff} and {@link MoatClient.apply}.
   */
  async run(adapter: string, prompt: string, request: RunRequest = {}): Promise<string> {
    const { options, trust, grants, limits, parent, workspace, ask } = request;
    const result = await this.request<{ run: string }>('run', { adapter, prompt, options, trust, grants, limits, parent, workspace, ask });
    return result.run;
  }

  /**
   * Waits for every run to end; their results by id. When one did not
   * complete: a `RUN_FAILED` {@link MoatError} whose `data.results` has them.
   */
  async await(runIds: string[]): Promise<Record<string, EngineResult>> {
    const result = await this.request<{ results: Record<string, EngineResult> }>('await', { runs: runIds });
    return result.results;
  }

  /** Waits for one run to end; its result (`RUN_FAILED` as {@link MoatClient.await}). */
  async awaitRun(runId: string): Promise<EngineResult> {
    const results = await this.await([runId]);
    const result = results[runId] ?? Object.values(results)[0];
    if (!result) {
      throw new MoatError('PROTOCOL_ERROR', `await of ${runId} answered no result`, { results });
    }
    return result;
  }

  /** Cancels a run; an unknown, ended or cancelled run is a success too. */
  async cancel(runId: string): Promise<void> {
    await this.request('cancel', { run: runId });
  }

  /** A run's record. */
  get(runId: string): Promise<RunRecord> {
    return this.request<RunRecord>('get', { run: runId });
  }

  /** Run records, newest first. */
  async list(options: ListOptions = {}): Promise<RunRecord[]> {
    const { status, adapter, parent, limit } = options;
    const result = await this.request<{ runs: RunRecord[] }>('list', { status, adapter, parent, limit });
    return result.runs;
  }

  /** The adapters the server knows. */
  async adapters(): Promise<AdapterDescription[]> {
    const result = await this.request<{ adapters: AdapterDescription[] }>('adapters');
    return result.adapters;
  }

  /** An adapter's description, with the most a run of it may be granted here. */
  inspect(adapter: string): Promise<AdapterInspection> {
    return this.request<AdapterInspection>('inspect', { adapter });
  }

  /**
   * What a run with a workspace changed there, against its base: a unified
   * diff (`''`: nothing), or with `stat` git's `--stat` summary.
   * `NOT_FOUND` for a run without a workspace.
   */
  async diff(runId: string, options: DiffOptions = {}): Promise<string> {
    const { stat } = options;
    const result = await this.request<{ diff: string }>('diff', { run: runId, stat });
    return result.diff;
  }

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
  async apply(
    runId: string,
    options: { commits?: boolean; includeProtected?: boolean } = {},
  ): Promise<boolean> {
    const params: Record<string, unknown> = { run: runId };
    if (options.commits) params.commits = true;
    if (options.includeProtected) params.includeProtected = true;
    const result = await this.request<{ applied: boolean }>('apply', params);
    return result.applied;
  }

  /**
   * Approves a run's request for approval (its only open one when
   * `request` is absent); the request, answered. `INVALID_REQUEST` when it
   * was answered already (by anyone: the first answer wins) or the run has
   * ended; `NOT_FOUND` for an unknown run.
   */
  async approve(runId: string, options: ApproveOptions = {}): Promise<Approval> {
    const { request, always } = options;
    const result = await this.request<{ request: Approval }>('approve', { run: runId, request: requestNumber(request), always });
    return result.request;
  }

  /** Denies a run's request for approval, as {@link MoatClient.approve} approves one. */
  async deny(runId: string, options: DenyOptions = {}): Promise<Approval> {
    const { request, reason } = options;
    const result = await this.request<{ request: Approval }>('deny', { run: runId, request: requestNumber(request), reason });
    return result.request;
  }

  /** A run's requests for approval, oldest first, each with its answer (`null` while open). */
  async approvals(runId: string): Promise<Approval[]> {
    const result = await this.request<{ requests: Approval[] }>('approvals', { run: runId });
    return result.requests;
  }

  /**
   * A run's traffic through moat (docs/protocol.md#traffic): every request
   * and connection it made, oldest first (the first 1,000; past them,
   * counts per destination in `overflow`), and its model calls' usage as
   * moat read it from their answers (`metered`) beside what its adapter
   * reported (`reported`). A row never holds a body, a header's value or a
   * query. `NOT_FOUND` for an unknown run.
   */
  async traffic(runId: string): Promise<RunTraffic> {
    return this.request<RunTraffic>('traffic', { run: runId });
  }

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
  async workflowRun(file: string, options: WorkflowRunOptions = {}): Promise<string | null> {
    const { fresh, resume, force, maxParallel } = options;
    if (maxParallel !== undefined && (!Number.isInteger(maxParallel) || maxParallel < 1)) {
      throw new MoatError('INVALID_REQUEST', `maxParallel is a number of tasks (1, 2, …), not ${JSON.stringify(maxParallel)}`);
    }
    const result = await this.request<{ run: string | null }>('workflow_run', { file, fresh, resume, force, maxParallel });
    return result.run;
  }

  /**
   * The workflow file `file`'s state here (a path on the server's machine,
   * absolute): its name, and its state file as `moat workflow status -o
   * json` prints it (`status`, each task's `status`, the `runs` of the
   * workflow's records, …), `null` when it has not run here.
   * `INVALID_REQUEST` for a relative path or a file with a mistake.
   */
  workflowStatus(file: string): Promise<WorkflowStatusResult> {
    return this.request<WorkflowStatusResult>('workflow_status', { file });
  }

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
  onPermissionRequest(handler: PermissionHandler | null): () => void {
    this.#permissions.handler = handler;
    return () => {
      if (this.#permissions.handler === handler) {
        this.#permissions.handler = null;
      }
    };
  }

  /** Stops the server: it starts no new run, ends its live runs (with `done` interrupted) and exits. */
  async shutdown(): Promise<void> {
    await this.request('shutdown');
  }

  /**
   * The events of a run (the `data` of its `run_event`s), from `fromSeq`,
   * each once and in order, ending after its `done`. Lags are handled
   * inside; breaking out of the loop unsubscribes.
   */
  events(runId: string, options: EventsOptions = {}): EventStream {
    return new EventStream(this, runId, options);
  }

  /**
   * cligent's `runAgent` loop: starts a run and yields its every event until
   * its `done`. Options are the run's options (flat: `model`, `cwd`, …, or
   * under `options`), `trust`, `grants`, `limits`, `parent`, `workspace`, and
   * `abortSignal`: aborting it cancels the run, whose stream then ends with
   * its `done` interrupted. Aborted before the start: no run, one `done`
   * interrupted. Leaving the loop early cancels the run.
   */
  async *runAgent(adapter: string, prompt: string, options: RunAgentOptions = {}): AsyncGenerator<AgentEvent, void, void> {
    const { request, abortSignal, highWaterMark, resume, onPermissionRequest } = splitOptions(options);
    if (abortSignal?.aborted) {
      yield interruptedDone(adapter, resume);
      return;
    }
    const runId = await this.run(adapter, prompt, request);
    const forget = onPermissionRequest ? this.handlePermissions(runId, onPermissionRequest) : undefined;
    let cancelled = false;
    const cancel = (): void => {
      if (!cancelled) {
        cancelled = true;
        this.cancel(runId).catch(() => {});
      }
    };
    abortSignal?.addEventListener('abort', cancel, { once: true });
    if (abortSignal?.aborted) {
      cancel();
    }
    let done = false;
    const stream = this.events(runId, highWaterMark === undefined ? {} : { highWaterMark });
    try {
      for await (const event of stream) {
        done = event.type === 'done';
        yield event;
      }
    } finally {
      forget?.();
      abortSignal?.removeEventListener('abort', cancel);
      if (!done && !this.isClosed) {
        cancel(); // the loop was left early: the run is this loop's
      }
    }
  }

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
  runParallel(tasks: readonly ParallelTask[]): AsyncGenerator<AgentEvent, void, void> {
    return runTasks(this, tasks);
  }

  /**
   * Ends the connection: pending requests reject with `CONNECTION_CLOSED`.
   * A spawned server sees its stdin close and stops (its live runs end
   * interrupted); it is killed if it has not exited after `timeoutMs`
   * (default 10 s).
   */
  async close(options: { timeoutMs?: number } = {}): Promise<void> {
    this.#lose('the client was closed');
    const timeoutMs = options.timeoutMs ?? 10_000;
    this.#input.end();
    const child = this.process;
    if (child) {
      if (!(await within(this.exited, timeoutMs))) {
        child.kill('SIGKILL');
        await this.exited;
      }
      this.#output.destroy();
    } else {
      const socket = this.#output;
      if (!(await within(onceClosed(socket), timeoutMs))) {
        socket.destroy();
      }
    }
  }

  // ----- PermissionsHost -----------------------------------------------------

  /**
   * Answers the permission requests of run `runId` with `handler` (before
   * the client's own) until the returned function is called.
   * @internal
   */
  handlePermissions(runId: string, handler: PermissionHandler): () => void {
    return this.#permissions.forRun(runId, handler);
  }

  /** @internal */
  reportPermissionError(error: unknown, runId: string, request: PermissionRequest): void {
    if (this.listenerCount('permissionError') > 0) {
      this.emit('permissionError', error, runId, request);
    } else {
      const message = error instanceof Error ? error.message : String(error);
      process.emitWarning(`request ${request.requestId} of ${runId}: ${message}`, { type: 'MoatPermissionWarning' });
    }
  }

  // ----- StreamHost ----------------------------------------------------------

  /** @internal */
  subscribeStream(stream: EventStream, fromSeq: number): void {
    this.#subscribing += 1;
    let counted = true;
    const settled = (): void => {
      if (counted) {
        counted = false;
        this.#subscribing -= 1;
        if (this.#subscribing === 0) {
          this.#orphans.clear();
        }
      }
    };
    this.#send('subscribe', { runs: [stream.runId], fromSeq }, {
      settle: (response) => {
        if (response.error) {
          settled();
          stream.fail(protocolError(response.error));
          return;
        }
        const id = (response.result as { subscriptionId?: unknown } | undefined)?.subscriptionId;
        if (typeof id !== 'string') {
          settled();
          stream.fail(new MoatError('PROTOCOL_ERROR', 'subscribe answered no subscriptionId', response.result));
          return;
        }
        const early = this.#orphans.get(id) ?? [];
        this.#orphans.delete(id);
        settled();
        this.#streams.set(id, stream);
        if (!stream.attach(id, early)) {
          void this.detachStream(id, true);
        }
      },
      fail: (error) => {
        settled();
        stream.fail(error);
      },
    });
  }

  /** @internal */
  async detachStream(subscriptionId: string, unsubscribe: boolean): Promise<void> {
    this.#streams.delete(subscriptionId);
    if (unsubscribe && !this.isClosed) {
      await this.request('unsubscribe', { subscriptionId }).catch(() => {});
    }
  }

  // ----- the wire ------------------------------------------------------------

  #send(op: string, fields: Record<string, unknown>, pending: Pending): void {
    if (this.#closedError) {
      pending.fail(this.#closedError);
      return;
    }
    const id = this.#nextId++;
    const line = JSON.stringify(Object.assign({ id, op }, fields, { id, op }));
    if (Buffer.byteLength(line) > MAX_REQUEST_BYTES) {
      pending.fail(new MoatError('INVALID_REQUEST', `a request line is at most ${MAX_REQUEST_BYTES} bytes; this ${op} is longer`));
      return;
    }
    this.#pending.set(id, pending);
    try {
      this.#input.write(`${line}\n`);
    } catch (error) {
      this.#lost(error as Error);
    }
  }

  #read(chunk: string): void {
    let text = this.#partial + chunk;
    let start = 0;
    for (;;) {
      const end = text.indexOf('\n', start);
      if (end === -1) {
        break;
      }
      const line = text.slice(start, end);
      start = end + 1;
      if (this.#closedError) {
        return;
      }
      this.#line(line);
    }
    text = text.slice(start);
    this.#partial = text;
  }

  #line(line: string): void {
    if (line.trim() === '') {
      return;
    }
    let message: unknown;
    try {
      message = JSON.parse(line);
    } catch {
      this.emit('unmatched', line);
      return;
    }
    if (message === null || typeof message !== 'object') {
      this.emit('unmatched', message);
      return;
    }
    if ('event' in message) {
      const event = message as EventMessage;
      if (this.listenerCount('event') > 0) {
        this.emit('event', event);
      }
      if (event.event === 'run_event') {
        this.#permissions.observe(event);
        this.#route(event.subscriptionId, event);
      } else if (event.event === 'lagged') {
        for (const id of event.subscriptionIds) {
          this.#route(id, event);
        }
      }
      return;
    }
    const response = message as ResponseMessage;
    const pending = typeof response.id === 'number' ? this.#pending.get(response.id) : undefined;
    if (!pending) {
      // An answer to no request of ours (an INVALID line whose id could not be read).
      this.emit('unmatched', response);
      return;
    }
    this.#pending.delete(response.id as number);
    pending.settle(response);
  }

  #route(subscriptionId: string, message: EventMessage): void {
    const stream = this.#streams.get(subscriptionId);
    if (stream) {
      stream.handle(message);
    } else if (this.#subscribing > 0) {
      // Perhaps the subscription whose answer is on its way: its events may
      // come before it.
      let early = this.#orphans.get(subscriptionId);
      if (!early) {
        early = [];
        this.#orphans.set(subscriptionId, early);
      }
      early.push(message);
    }
  }

  /** The connection broke or ended from the server's side. */
  #lost(error?: Error): void {
    if (this.#closedError) {
      return;
    }
    const child = this.process;
    const why = error ? `: ${error.message}` : '';
    if (!child) {
      this.#lose(`the moat server closed the connection${why}`, error);
      return;
    }
    // Say how the server ended, if it ends soon.
    void within(this.exited, 1000).then((status) => {
      const how = status
        ? status.signal
          ? ` (killed by ${status.signal})`
          : ` (exit code ${status.code})`
        : '';
      const stderr = this.#stderrTail.trim();
      this.#lose(`the moat server closed the connection${how}${why}${stderr ? `; its stderr ends: ${stderr.slice(-2000)}` : ''}`, error);
    });
  }

  #lose(message: string, cause?: unknown): void {
    if (this.#closedError) {
      return;
    }
    const error = new MoatError('CONNECTION_CLOSED', message, undefined, cause === undefined ? undefined : { cause });
    this.#closedError = error;
    this.#permissions.close();
    const pending = [...this.#pending.values()];
    this.#pending.clear();
    const streams = [...this.#streams.values()];
    this.#streams.clear();
    this.#orphans.clear();
    for (const request of pending) {
      request.fail(error);
    }
    for (const stream of streams) {
      stream.fail(error);
    }
    this.#resolveClosed(error);
    this.emit('close', error);
  }
}

/** A request's number as the protocol takes it (`"1"` → 1). */
function requestNumber(request: number | string | undefined): number | undefined {
  if (request === undefined) {
    return undefined;
  }
  const number = typeof request === 'string' ? Number(request) : request;
  if (!Number.isInteger(number) || number < 1) {
    throw new MoatError('INVALID_REQUEST', `a request is named by its number (1, 2, …), not ${JSON.stringify(request)}`);
  }
  return number;
}

/** Resolves with `promise`'s value, or `undefined` after `ms`. */
async function within<T>(promise: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

function onceClosed(stream: Readable): Promise<void> {
  if (stream.destroyed || stream.closed) {
    return Promise.resolve();
  }
  return new Promise((resolve) => stream.once('close', () => resolve()));
}

/**
 * cligent's `runAgent(agent, prompt, options, registry)` with a
 * {@link MoatClient} in the registry's place: the same loop, run by moat.
 */
export function runAgent(
  agent: string,
  prompt: string,
  options: RunAgentOptions | undefined,
  client: MoatClient,
): AsyncGenerator<AgentEvent, void, void> {
  return client.runAgent(agent, prompt, options ?? {});
}

/**
 * cligent's `runParallel(tasks)` with a {@link MoatClient} to run them: see
 * {@link MoatClient.runParallel}. A task names its adapter (`adapter: 'echo'`)
 * where cligent's holds an adapter object, and may carry a `role`.
 */
export function runParallel(tasks: readonly ParallelTask[], client: MoatClient): AsyncGenerator<AgentEvent, void, void> {
  return client.runParallel(tasks);
}
