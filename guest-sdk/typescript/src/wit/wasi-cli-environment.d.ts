// Hand-written (jco guest-types emits the moat contract only): the one
// function of `wasi:cli/environment@0.2.12` (wit/deps/wasi-cli) the SDK calls.
declare module "wasi:cli/environment@0.2.12" {
  /** The variables the run was granted, as name and value pairs. */
  export function getEnvironment(): Array<[string, string]>;
}
