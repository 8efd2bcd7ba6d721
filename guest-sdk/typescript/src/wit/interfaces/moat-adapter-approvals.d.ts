declare module 'moat:adapter/approvals@0.4.0' {
  /**
   * Asks, and blocks until the answer comes. A run started without
   * `--ask` has nobody to ask: the answer is `deny` at once.
   */
  export function requestApproval(request: ApprovalRequest): Approval;
  /**
   * What is asked about: a tool call, in the shape of a
   * `permission_request` event.
   */
  export interface ApprovalRequest {
    /**
     * The tool's name, as the backend calls it.
     */
    toolName: string,
    /**
     * The call's id (non-empty), as its `tool-use` event carries it.
     */
    toolUseId: string,
    /**
     * The call's input as a JSON object.
     */
    input: string,
    /**
     * Why it is asked, in the adapter's words.
     */
    reason?: string,
  }
  /**
   * The answer.
   */
  export type Approval = ApprovalAllow | ApprovalDeny | ApprovalInterrupted;
  /**
   * Go ahead with this call.
   */
  export interface ApprovalAllow {
    tag: 'allow',
  }
  /**
   * Do not: the message says who refused and why (the user, the
   * approval timeout, or the host: a run that does not ask, a
   * malformed request). Tell the backend the call was denied.
   */
  export interface ApprovalDeny {
    tag: 'deny',
    val: string,
  }
  /**
   * The run was aborted while waiting: end with `done` interrupted.
   */
  export interface ApprovalInterrupted {
    tag: 'interrupted',
  }
}
