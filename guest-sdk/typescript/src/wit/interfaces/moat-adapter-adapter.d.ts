/// <reference path="./moat-adapter-types.d.ts" />
declare module 'moat:adapter/adapter@0.4.0' {
  /**
   * Describe the adapter. Must not have side effects.
   */
  export function info(): AdapterInfo;
  /**
   * Start a run. Refuse here, before starting the backend, anything the
   * adapter cannot honour.
   */
  export function run(prompt: string, options: Options): Session;
  export type AdapterInfo = import('moat:adapter/types@0.4.0').AdapterInfo;
  export type Options = import('moat:adapter/types@0.4.0').Options;
  export type Event = import('moat:adapter/types@0.4.0').Event;
  export type ErrorInfo = import('moat:adapter/types@0.4.0').ErrorInfo;
  
  export class Session {
    /**
     * This type does not have a public constructor.
     */
    private constructor();
    /**
    * The next events, at most `max` (at least 1): at least one unless
    * the stream is over, and an empty list once it is. Return the
    * events already at hand without waiting for more: wait for the
    * backend only when there is nothing to return, so each event
    * reaches the user as soon as it exists. Events after a `done` in
    * the same list are ignored; more than `max` fails the run.
    */
    nextBatch(max: number): Array<Event>;
  }
}
