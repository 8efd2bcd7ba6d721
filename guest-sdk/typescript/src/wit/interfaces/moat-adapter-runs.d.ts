declare module 'moat:adapter/runs@0.4.0' {
  /**
   * Starts a child run of this run.
   */
  export function start(request: ChildRequest): ChildRun;
  /**
   * A child run to start.
   */
  export interface ChildRequest {
    /**
     * A built-in adapter's name, or a component's path.
     */
    adapter: string,
    prompt: string,
    /**
     * The child's options as a JSON object (the host's RunOptions:
     * `model`, `systemPrompt`, `maxTurns`, …); `none`: the defaults.
     */
    options?: string,
    /**
     * The grants it asks for as a JSON object (`net`, `read`,
     * `write`, `env`, `run`); `none`: all of the parent's.
     */
    grants?: string,
    /**
     * Its time limit; `none`: the host's default for the adapter.
     */
    timeoutMs?: bigint,
  }
  /**
   * Why a child could not be started or read.
   */
  export type RunError = RunErrorDenied | RunErrorNotFound | RunErrorLimitReached | RunErrorFailed | RunErrorInterrupted | RunErrorTimedOut;
  /**
   * It asked for more than its parent has, or this host runs no
   * nested runs; the message says which.
   */
  export interface RunErrorDenied {
    tag: 'denied',
    val: string,
  }
  /**
   * No such adapter.
   */
  export interface RunErrorNotFound {
    tag: 'not-found',
    val: string,
  }
  /**
   * Too deep, or too many children at once.
   */
  export interface RunErrorLimitReached {
    tag: 'limit-reached',
    val: string,
  }
  /**
   * It could not start (e.g. its component failed to load).
   */
  export interface RunErrorFailed {
    tag: 'failed',
    val: string,
  }
  /**
   * The parent run was aborted while waiting.
   */
  export interface RunErrorInterrupted {
    tag: 'interrupted',
  }
  /**
   * The wait's own timeout passed.
   */
  export interface RunErrorTimedOut {
    tag: 'timed-out',
  }
  
  export class ChildRun implements Disposable {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * The child's run id.
    */
    id(): string;
    /**
    * The child's next event as JSON (a Unified Event Stream event, as
    * `moat run --output ndjson` prints it); `none` after its `done`.
    * Waits at most `timeout-ms` (`none`: until one comes).
    */
    nextEvent(timeoutMs: number | undefined): string | undefined;
    /**
    * Waits until the child has ended: its result as JSON (the
    * engine contract's EngineResult). Waits at most `timeout-ms`.
    */
    wait(timeoutMs: number | undefined): string;
    /**
    * Stops the child (it ends with `done` interrupted); idempotent.
    */
    cancel(): void;
    [Symbol.dispose](): void;
  }
}
