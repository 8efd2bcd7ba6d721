declare module 'moat:adapter/host@0.4.0' {
  /**
   * Write a message into the host's log.
   */
  export function log(level: LogLevel, message: string): void;
  /**
   * Whether the user asked the run to stop. An adapter that sees `true`
   * should stop its backend and end with a `done` of status
   * `interrupted`, carrying a resume token when it has one.
   */
  export function interrupted(): boolean;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type LogLevel = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
