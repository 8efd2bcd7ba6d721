/**
 * The run's options as an adapter reads them: the contract's `options`
 * with its JSON fields parsed.
 *
 * Host-independent: usable (and tested) outside a component.
 */

import { AdapterError } from "./errors.js";
import { INVALID_OPTIONS, parseJsonObject, type JsonObject } from "./json.js";
import type { Options } from "./types.js";

/**
 * Everything the caller asked for. `extra` is the adapter-specific JSON
 * object (empty when none was given); `mcpServers` and `agents` are parsed
 * too. The fields the adapter cannot honour must be refused in `run`.
 */
export interface RunOptions extends Omit<Options, "extra" | "mcpServers" | "agents"> {
  extra: JsonObject;
  mcpServers: JsonObject | undefined;
  agents: JsonObject | undefined;
}

function invalid(message: string): Error {
  return new AdapterError(INVALID_OPTIONS, message, false);
}

/**
 * The contract's options as {@link RunOptions}. A JSON field that is not a
 * JSON object throws an `INVALID_OPTIONS` {@link AdapterError}, which
 * refuses the run.
 */
export function runOptions(options: Options): RunOptions {
  return {
    ...options,
    extra: parseJsonObject("options.extra", options.extra, invalid) ?? {},
    mcpServers: parseJsonObject("options.mcp-servers", options.mcpServers, invalid),
    agents: parseJsonObject("options.agents", options.agents, invalid),
  };
}
