declare module 'moat:adapter/process@0.4.0' {
  /**
   * Starts a granted program.
   */
  export function spawn(request: SpawnRequest): Child;
  /**
   * What the child reads on its standard input.
   * # Variants
   * 
   * ## `"closed"`
   * 
   * Nothing: stdin is `/dev/null`.
   * ## `"piped"`
   * 
   * A pipe the adapter writes with `write-stdin`.
   */
  export type StdinMode = 'closed' | 'piped';
  /**
   * What to start.
   */
  export interface SpawnRequest {
    /**
     * A granted program: the name it was granted by (looked up on the
     * host's PATH when the run started) or its absolute path.
     */
    program: string,
    args: Array<string>,
    /**
     * Variables to set for the child, on top of the run's granted
     * ones (which the child gets with the host's values).
     */
    env: Array<[string, string]>,
    /**
     * Working directory, inside a granted directory. `none`: a fresh
     * empty directory of the run's own, removed when the run ends.
     */
    cwd?: string,
    stdin: StdinMode,
  }
  /**
   * Signals an adapter may send its child (and the child's process
   * group).
   * # Variants
   * 
   * ## `"interrupt"`
   * 
   * ## `"terminate"`
   * 
   * ## `"kill"`
   */
  export type Signal = 'interrupt' | 'terminate' | 'kill';
  /**
   * How a child ended.
   */
  export interface ExitStatus {
    /**
     * The exit code, when it exited.
     */
    code?: number,
    /**
     * The signal that ended it, when one did.
     */
    signal?: number,
  }
  export type ProcessError = ProcessErrorDenied | ProcessErrorNotFound | ProcessErrorLimitReached | ProcessErrorInterrupted | ProcessErrorTimedOut | ProcessErrorLineTooLong | ProcessErrorStdinClosed | ProcessErrorIo;
  /**
   * The run was not granted this (the message says what was
   * refused and why). The user sees the refusal too, with how to
   * grant it.
   */
  export interface ProcessErrorDenied {
    tag: 'denied',
    val: string,
  }
  /**
   * The granted program is not installed.
   */
  export interface ProcessErrorNotFound {
    tag: 'not-found',
    val: string,
  }
  /**
   * A per-run limit (live children) was reached.
   */
  export interface ProcessErrorLimitReached {
    tag: 'limit-reached',
    val: string,
  }
  /**
   * The run was aborted: stop the child and end with `done`
   * interrupted.
   */
  export interface ProcessErrorInterrupted {
    tag: 'interrupted',
  }
  /**
   * The timeout given to the call passed.
   */
  export interface ProcessErrorTimedOut {
    tag: 'timed-out',
  }
  /**
   * A stdout line longer than the host's limit (its length in
   * bytes) was skipped.
   */
  export interface ProcessErrorLineTooLong {
    tag: 'line-too-long',
    val: bigint,
  }
  /**
   * Stdin is closed, or was never piped.
   */
  export interface ProcessErrorStdinClosed {
    tag: 'stdin-closed',
  }
  /**
   * Any other failure, described.
   */
  export interface ProcessErrorIo {
    tag: 'io',
    val: string,
  }
  
  export class Child implements Disposable {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * Its process id on the host.
    */
    id(): number;
    /**
    * The next line of standard output, without its line ending
    * (invalid UTF-8 replaced); `none` once stdout is closed. Waits at
    * most `timeout-ms` when given, and returns `interrupted` at once
    * when the run is aborted.
    */
    readLine(timeoutMs: number | undefined): string | undefined;
    /**
    * The last bytes (at most 64 KiB) the child wrote to standard
    * error so far, without waiting.
    */
    stderrTail(): string;
    /**
    * Writes to the child's stdin (which must be `piped`).
    */
    writeStdin(data: Uint8Array): void;
    /**
    * Closes the child's stdin, so it sees end of input.
    */
    closeStdin(): void;
    /**
    * Sends a signal to the child's process group.
    */
    sendSignal(signal: Signal): void;
    /**
    * Waits for the child to exit, at most `timeout-ms` when given
    * (`some(0)` only looks). Returns `interrupted` at once when the
    * run is aborted.
    */
    wait(timeoutMs: number | undefined): ExitStatus;
    [Symbol.dispose](): void;
  }
}
