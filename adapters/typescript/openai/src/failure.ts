/**
 * A failed request as the user should read it: the error code the
 * built-in adapters use for the same HTTP status, what to do, and the
 * server's own message, quoted and bounded (docs/llm-adapters.md, Errors).
 */

import { error, type Event } from "@moat/adapter";
import { KEY_VAR } from "./config.js";
import { quote } from "./translate.js";

/** The server's message out of an error body (JSON `error.message`, else the text). */
function serverMessage(body: string): string {
  try {
    const parsed: unknown = JSON.parse(body);
    const message = (parsed as { error?: { message?: unknown } } | null)?.error?.message;
    if (typeof message === "string") {
      return quote(message);
    }
  } catch {
    // Not JSON: quote the text itself.
  }
  return quote(body.trim());
}

/** The error event for HTTP `status` with `body`. */
export function statusError(status: number, body: string, model: string, keyGiven: boolean): Event {
  const said = serverMessage(body);
  if (status === 401 || status === 403) {
    const key = keyGiven ? `${KEY_VAR} was sent but refused` : `${KEY_VAR} is not set or not granted (--allow-env=${KEY_VAR})`;
    return error("AUTH_FAILED", `the server refused the credentials (HTTP ${status}): ${key}. The server said: ${said}`, false);
  }
  if (status === 404) {
    return error("MODEL_NOT_FOUND", `HTTP 404 for model ${model}: check --model and that the base URL is the API root. The server said: ${said}`, false);
  }
  if (status === 429) {
    return error("RATE_LIMITED", `rate limited (HTTP 429): try again later. The server said: ${said}`, true);
  }
  if (status === 503 || status === 529) {
    return error("OVERLOADED", `the server is overloaded (HTTP ${status}). The server said: ${said}`, true);
  }
  if (status >= 500) {
    return error("SERVER_ERROR", `the server failed (HTTP ${status}). The server said: ${said}`, true);
  }
  return error("REQUEST_REJECTED", `the server rejected the request (HTTP ${status}). The server said: ${said}`, false);
}
