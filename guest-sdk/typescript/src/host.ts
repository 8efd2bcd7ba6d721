/**
 * The host's services every adapter may use: the cooperative abort flag
 * and logging into the host's log.
 */

import * as host from "moat:adapter/host@0.4.0";

/**
 * Whether the user asked the run to stop. The SDK looks at it for you
 * between events and while `fetch` or an SSE read waits; an adapter that
 * loops on its own should look too, and end with `done` interrupted.
 */
export function interrupted(): boolean {
  return host.interrupted();
}

/**
 * Logging into the host's log (`moat -v`, `MOAT_LOG`), tagged with the
 * adapter. Never the user's terminal: `console.log` output is captured as
 * well, but without a level.
 */
export const log = {
  trace: (message: string): void => host.log("trace", message),
  debug: (message: string): void => host.log("debug", message),
  info: (message: string): void => host.log("info", message),
  warn: (message: string): void => host.log("warn", message),
  error: (message: string): void => host.log("error", message),
};
