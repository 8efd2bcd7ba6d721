/**
 * Asking the run's user before a tool call (`moat run --ask`,
 * docs/approvals.md): a thin layer over the contract's `approvals` import
 * (0.4.0). {@link requestApproval} blocks until the answer comes; the user
 * sees the request as a `permission_request` event. {@link askTools} names
 * the tools the run puts under `ask` (`--ask-tools`), whose every call an
 * adapter asks about first.
 *
 * An answer grants nothing: it only says whether to make the call. A run
 * started without `--ask` has nobody to ask and is answered `deny` at once.
 */

import * as wit from "moat:adapter/approvals@0.4.0";
import { env } from "./env.js";
import { encodeJson, isJsonObject } from "./json.js";
import type { JsonObject } from "./json.js";

/**
 * The variable naming, comma-separated, the tools to ask about before each
 * call (`--ask-tools`). The host sets it for a run that asks about tools; an
 * adapter need not declare it.
 */
export const ASK_TOOLS_VARIABLE = "MOAT_ASK_TOOLS";

/** What is asked about: a tool call, in the shape of its `tool_use` event. */
export interface ApprovalRequest {
  /** The tool's name, as the backend calls it. */
  toolName: string;
  /** The call's id (non-empty), as its `tool_use` event carries it. */
  toolUseId: string;
  /** The call's arguments: a JSON object. */
  input: JsonObject;
  /** Why it is asked, in the adapter's words. */
  reason?: string;
}

/**
 * The answer: `allow` (make the call), `deny` with who refused and why
 * (tell the backend the call was denied), or `interrupted` (the run was
 * aborted while waiting: end with `done` interrupted).
 */
export type Approval =
  | { behavior: "allow" }
  | { behavior: "deny"; message: string }
  | { behavior: "interrupted" };

/**
 * Asks the run's user whether to make the tool call, and waits for the
 * answer (no code of the adapter runs meanwhile; the run reads `waiting`).
 *
 * Throws a `TypeError` when the request is not one: an empty tool name or
 * call id, or an input that is not a JSON object (an array, `null`, a value
 * with no JSON form).
 */
export function requestApproval(request: ApprovalRequest): Approval {
  if (typeof request?.toolName !== "string" || request.toolName === "") {
    throw new TypeError("requestApproval: toolName must be a non-empty string");
  }
  if (typeof request.toolUseId !== "string" || request.toolUseId === "") {
    throw new TypeError("requestApproval: toolUseId must be a non-empty string");
  }
  if (!isJsonObject(request.input)) {
    throw new TypeError("requestApproval: input must be a JSON object");
  }
  if (request.reason !== undefined && typeof request.reason !== "string") {
    throw new TypeError("requestApproval: reason must be a string");
  }
  const input = encodeJson("requestApproval: input", request.input);
  const answer = wit.requestApproval({
    toolName: request.toolName,
    toolUseId: request.toolUseId,
    input,
    reason: request.reason,
  });
  switch (answer.tag) {
    case "allow":
      return { behavior: "allow" };
    case "deny":
      return { behavior: "deny", message: answer.val };
    case "interrupted":
      return { behavior: "interrupted" };
  }
}

/**
 * The tools the run asks about before each call (empty: none, or the run
 * does not ask). An adapter whose backend cannot ask should refuse a run
 * that names any, rather than let them run unasked.
 */
export function askTools(): string[] {
  return parseToolList(env(ASK_TOOLS_VARIABLE));
}

/** The tool names in the variable's value `text`, comma-separated. */
export function parseToolList(text: string | undefined): string[] {
  return (text ?? "")
    .split(",")
    .map((tool) => tool.trim())
    .filter((tool) => tool !== "");
}
