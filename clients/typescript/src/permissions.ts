// Permission requests of the runs a client follows, answered by a handler
// (docs/approvals.md): the Claude Agent SDK's `canUseTool`, for moat's runs.
import { MoatError } from './errors.js';
import type {
  Approval,
  ApprovalKind,
  JsonObject,
  MoatPermissionRequestPayload,
  PermissionAnswerPayload,
  PermissionRequestEvent,
  RunEventMessage,
} from './types.js';

/** A run's open request for approval, as a {@link PermissionHandler} gets it. */
export interface PermissionRequest {
  /** The request's number in its run, as the event gives it (`"1"`): `moat approve RUN 1`. */
  requestId: string;
  /** The same number, as {@link MoatClient.approve}'s `request` takes it. */
  number: number;
  /** What it asks for: `net` (a host), `run` (a program), `tool` (a tool call), … */
  kind: ApprovalKind;
  /** `moat:KIND` for a grant (`moat:net`, `moat:run`), the tool's own for a tool call. */
  toolName: string;
  /** `moat-request-N` for a grant, the call's id for a tool call. */
  toolUseId: string;
  /** What it names: `{host, port}`, `{program}`, the tool call's arguments, … */
  input: JsonObject;
  /** Why it asks (`net access to http://127.0.0.1:8765: not granted`). */
  reason?: string;
  /** The `permission_request` event itself. */
  event: PermissionRequestEvent;
}

/** What a {@link PermissionHandler} gets besides the request. */
export interface PermissionContext {
  /**
   * Aborted once an answer from this handler is no longer wanted: someone
   * else answered the request first (another client, `moat approve`, the
   * approval timeout), the run ended, or the connection closed. A handler
   * that asks a person can take its question down then.
   */
  signal: AbortSignal;
}

/**
 * A handler's decision (the shape of `canUseTool`'s result): allow (with
 * `always`, also every later request of the run for the same host,
 * program, directory or tool), or deny (`message`: why, for the run and
 * its record).
 */
export type PermissionDecision = { behavior: 'allow'; always?: boolean } | { behavior: 'deny'; message?: string };

/**
 * Decides a run's request: sync or async. Its decision is sent as
 * `approve` / `deny`; `undefined` leaves the request open for someone
 * else to answer (another client, `moat approve`, the approval timeout).
 * A handler that throws denies the request (the error is reported as the
 * client's `permissionError` event).
 */
export type PermissionHandler = (
  runId: string,
  request: PermissionRequest,
  context: PermissionContext,
) => PermissionDecision | undefined | void | Promise<PermissionDecision | undefined | void>;

/** What the dispatcher needs of its client (a `MoatClient`). */
export interface PermissionsHost {
  approvals(runId: string): Promise<Approval[]>;
  approve(runId: string, options: { request: number; always?: boolean }): Promise<Approval>;
  deny(runId: string, options: { request: number; reason?: string }): Promise<Approval>;
  /** A failure of a handler or of its answer, nowhere else to go. */
  reportPermissionError(error: unknown, runId: string, request: PermissionRequest): void;
}

interface Asked {
  readonly runId: string;
  readonly controller: AbortController;
}

/**
 * Watches the events of a client's subscriptions for `permission_request`s
 * and answers each once with its run's handler (or the client's).
 * @internal
 */
export class Permissions {
  /** The client's handler, for every run it follows. */
  handler: PermissionHandler | null = null;
  readonly #host: PermissionsHost;
  /** Handlers of single runs (runAgent's, a parallel task's), before the client's. */
  readonly #byRun = new Map<string, PermissionHandler>();
  /** Requests seen (`run\0requestId`), until their run's `done`. */
  readonly #asked = new Map<string, Asked>();
  #closed = false;

  constructor(host: PermissionsHost) {
    this.#host = host;
  }

  /** Sets `handler` for the requests of one run; the returned function removes it. */
  forRun(runId: string, handler: PermissionHandler): () => void {
    this.#byRun.set(runId, handler);
    return () => {
      if (this.#byRun.get(runId) === handler) {
        this.#byRun.delete(runId);
      }
    };
  }

  /** An event of one of the client's subscriptions (called as it is read). */
  observe(message: RunEventMessage): void {
    const { run, data } = message;
    if (typeof data !== 'object' || data === null) {
      return;
    }
    if (data.type === 'permission_request') {
      this.#requested(run, data);
    } else if (data.type === 'moat:permission_answer') {
      const payload = data.payload as Partial<PermissionAnswerPayload> | null;
      const requestId = payload?.requestId;
      if (typeof requestId === 'string') {
        this.#asked.get(key(run, requestId))?.controller.abort();
      }
    } else if (data.type === 'done') {
      for (const [k, asked] of this.#asked) {
        if (asked.runId === run) {
          asked.controller.abort();
          this.#asked.delete(k);
        }
      }
    }
  }

  /** The connection is gone: no answer can be sent. */
  close(): void {
    this.#closed = true;
    for (const asked of this.#asked.values()) {
      asked.controller.abort();
    }
    this.#asked.clear();
    this.#byRun.clear();
  }

  #requested(runId: string, event: PermissionRequestEvent): void {
    const payload = event.payload as MoatPermissionRequestPayload;
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

  async #ask(
    runId: string,
    number: number,
    requestId: string,
    event: PermissionRequestEvent,
    handler: PermissionHandler,
    signal: AbortSignal,
  ): Promise<void> {
    const payload = event.payload as MoatPermissionRequestPayload;
    const request: PermissionRequest = {
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
      let decision: PermissionDecision | undefined | void;
      try {
        decision = await handler(runId, request, { signal });
        if (decision != null && decision.behavior !== 'allow' && decision.behavior !== 'deny') {
          throw new TypeError(`a permission handler decides {behavior: 'allow' | 'deny'}, not ${JSON.stringify(decision)}`);
        }
      } catch (error) {
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
      } else {
        await this.#host.deny(runId, { request: number, ...(decision.message === undefined ? {} : { reason: decision.message }) });
      }
    } catch (error) {
      if (!answeredOrGone(error)) {
        this.#host.reportPermissionError(error, runId, request);
      }
    }
  }
}

function key(runId: string, requestId: string): string {
  return `${runId}\u0000${requestId}`;
}

/** `moat:net` → `net`; a tool's own name → `tool`. */
function kindOf(toolName: string): ApprovalKind {
  const kind = toolName.startsWith('moat:') ? toolName.slice('moat:'.length) : 'tool';
  return kind as ApprovalKind;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * An answer that came too late, for nobody's fault: the request was
 * answered already or the run ended (`INVALID_REQUEST`), the run is gone
 * (`NOT_FOUND`), or the connection is (`CONNECTION_CLOSED`).
 */
function answeredOrGone(error: unknown): boolean {
  return error instanceof MoatError && (error.code === 'INVALID_REQUEST' || error.code === 'NOT_FOUND' || error.code === 'CONNECTION_CLOSED');
}
