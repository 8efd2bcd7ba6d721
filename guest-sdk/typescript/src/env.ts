/**
 * The run's environment variables: only those the run was granted
 * (`--allow-env`, or a built-in's declared needs); any other is absent.
 * Declare the ones an adapter reads in its `info.needs.env`.
 */

/// <reference path="./wit/wasi-cli-environment.d.ts" />

import { getEnvironment } from "wasi:cli/environment@0.2.12";

/** The value of variable `name`, or `undefined` when it is not granted or not set. */
export function env(name: string): string | undefined {
  for (const [key, value] of getEnvironment()) {
    if (key === name) {
      return value;
    }
  }
  return undefined;
}
