import type { Approval, ApprovalKind, JsonObject, PermissionRequestEvent, RunEventMessage } from './types.js';
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
export type PermissionDecision = {
    behavior: 'allow';
    always?: boolean;
} | {
    behavior: 'deny';
    message?: string;
};
/**
 * Decides a run's request: sync or async. Its decision is sent as
 * `approve` / `deny`; `undefined` leaves the request open for someone
 * else to answer (another client, `moat approve`, the approval timeout).
 * A handler that throws denies the request (the error is reported as the
 * client's `permissionError` event).
 */
export type PermissionHandler = (runId: string, request: PermissionRequest, context: PermissionContext) => PermissionDecision | undefined | void | Promise<PermissionDecision | undefined | void>;
/** What the dispatcher needs of its client (a `MoatClient`). */
export interface PermissionsHost {
    approvals(runId: string): Promise<Approval[]>;
    approve(runId: string, options: {
        request: number;
        always?: boolean;
    }): Promise<Approval>;
    deny(runId: string, options: {
        request: number;
        reason?: string;
    }): Promise<Approval>;
    /** A failure of a handler or of its answer, nowhere else to go. */
    reportPermissionError(error: unknown, runId: string, request: PermissionRequest): void;
}
/**
 * Watches the events of a client's subscriptions for `permission_request`s
 * and answers each once with its run's handler (or the client's).
 * @internal
 */
export declare class Permissions {
    #private;
    /** The client's handler, for every run it follows. */
    handler: PermissionHandler | null;
    constructor(host: PermissionsHost);
    /** Sets `handler` for the requests of one run; the returned function removes it. */
    forRun(runId: string, handler: PermissionHandler): () => void;
    /** An event of one of the client's subscriptions (called as it is read). */
    observe(message: RunEventMessage): void;
    /** The connection is gone: no answer can be sent. */
    close(): void;
}
//# sourceMappingURL=permissions.d.ts.map