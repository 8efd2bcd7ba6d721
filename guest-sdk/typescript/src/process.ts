/**
 * Child processes (`--allow-run`): how an adapter drives a coding-agent
 * CLI. A thin layer over the contract's `process` import: the host starts
 * only granted programs, gives them only granted variables, contains them
 * to granted directories and kills them when the run ends. This module
 * only turns the import's error values into exceptions an adapter can
 * catch: {@link ProcessError}, and {@link InterruptedError} when the run
 * was aborted while waiting (left uncaught, the run ends with `done`
 * interrupted).
 */

import * as wit from "moat:adapter/process@0.4.0";
import { InterruptedError } from "./errors.js";

/** Why a process call failed (the contract's `process-error`). */
export class ProcessError extends Error {
  /** `denied`, `not-found`, `limit-reached`, `timed-out`, `line-too-long`, `stdin-closed` or `io`. */
  readonly kind: Exclude<wit.ProcessError["tag"], "interrupted">;

  constructor(error: Exclude<wit.ProcessError, { tag: "interrupted" }>) {
    const detail = "val" in error ? `: ${String(error.val)}` : "";
    super(`${error.tag}${detail}`);
    this.name = "ProcessError";
    this.kind = error.tag;
  }
}

/** Runs an import call, rethrowing its error value as an exception. */
function call<T>(body: () => T): T {
  try {
    return body();
  } catch (thrown) {
    // componentize-js throws an import's `err` value as `error.payload`.
    const payload = (thrown as { payload?: wit.ProcessError } | null)?.payload;
    if (payload === undefined || typeof payload !== "object" || !("tag" in payload)) {
      throw thrown;
    }
    if (payload.tag === "interrupted") {
      throw new InterruptedError();
    }
    throw new ProcessError(payload);
  }
}

/** What to start. */
export interface SpawnOptions {
  args?: string[];
  /** Variables on top of the run's granted ones. */
  env?: Record<string, string>;
  /** Inside a granted directory; default: a fresh empty one of the run's. */
  cwd?: string;
  /** `piped` to write to the child's stdin. */
  stdin?: wit.StdinMode;
}

/** A running (or finished) child process. Dropped with the run. */
export class Child {
  readonly #child: wit.Child;

  constructor(child: wit.Child) {
    this.#child = child;
  }

  /** Its process id on the host. */
  get pid(): number {
    return this.#child.id();
  }

  /** The next stdout line without its ending; `undefined` at the end. */
  readLine(timeoutMs?: number): string | undefined {
    return call(() => this.#child.readLine(timeoutMs));
  }

  /** The last bytes (at most 64 KiB) written to stderr, without waiting. */
  stderrTail(): string {
    return this.#child.stderrTail();
  }

  /** Writes to stdin (spawned with `stdin: "piped"`). */
  writeStdin(data: string | Uint8Array): void {
    const bytes = typeof data === "string" ? new TextEncoder().encode(data) : data;
    call(() => this.#child.writeStdin(bytes));
  }

  /** Closes stdin, so the child sees end of input. */
  closeStdin(): void {
    this.#child.closeStdin();
  }

  /** Sends a signal to the child's process group. */
  signal(signal: wit.Signal): void {
    call(() => this.#child.sendSignal(signal));
  }

  /** Waits for the exit, at most `timeoutMs` when given. */
  wait(timeoutMs?: number): wit.ExitStatus {
    return call(() => this.#child.wait(timeoutMs));
  }
}

/** Starts a granted program. */
export function spawn(program: string, options: SpawnOptions = {}): Child {
  const request: wit.SpawnRequest = {
    program,
    args: options.args ?? [],
    env: Object.entries(options.env ?? {}),
    cwd: options.cwd,
    stdin: options.stdin ?? "closed",
  };
  return new Child(call(() => wit.spawn(request)));
}
