/**
 * What one run sends: the endpoint, the key and the request body, decided
 * from the prompt, the run's options and its granted environment.
 * Refusals happen here, before anything is sent, with the same codes and
 * rules as the built-in `openai` adapter (docs/llm-adapters.md).
 */

import { AdapterError, INVALID_OPTIONS, type JsonObject, type JsonValue, type RunOptions } from "@moat/adapter";

/** The public API, used when neither `extra.base_url` nor the variable names another server. */
export const DEFAULT_BASE_URL = "https://api.openai.com/v1";
/** The host the default base URL needs (declared in `info`). */
export const DEFAULT_HOST = "api.openai.com:443";
/** The variable holding the API key (optional for local servers). */
export const KEY_VAR = "OPENAI_API_KEY";
/** The variable naming another OpenAI-compatible server. */
export const BASE_URL_VAR = "OPENAI_BASE_URL";

const UNSUPPORTED_OPTION = "UNSUPPORTED_OPTION";

/** Keys of the body the adapter sets itself, and what to use instead. */
const RESERVED: Record<string, string> = {
  model: "pass --model",
  messages: "the prompt and --system are the messages",
  stream: "the adapter always streams",
  stream_options: "the adapter always asks for usage",
};

/** One run's request. */
export interface Config {
  url: string;
  apiKey: string | undefined;
  model: string;
  body: JsonObject;
  /** The tools offered to the model (after the run's tool policy). */
  tools: string[];
}

function refuse(code: string, message: string): AdapterError {
  return new AdapterError(code, message, false);
}

/** The names of `extra.tools` the run allows, and the tools to send. */
function allowedTools(options: RunOptions, tools: JsonValue | undefined): { names: string[]; send: JsonValue[] } {
  if (tools === undefined) {
    return { names: [], send: [] };
  }
  if (!Array.isArray(tools)) {
    throw refuse(INVALID_OPTIONS, "options.extra.tools must be an array of Chat Completions tools");
  }
  const names: string[] = [];
  const send: JsonValue[] = [];
  for (const tool of tools) {
    const fn = typeof tool === "object" && tool !== null && !Array.isArray(tool) ? tool["function"] : undefined;
    const name = typeof fn === "object" && fn !== null && !Array.isArray(fn) ? fn["name"] : undefined;
    if (typeof name !== "string") {
      throw refuse(INVALID_OPTIONS, "each of options.extra.tools needs function.name (the Chat Completions tool schema)");
    }
    const allowed = options.allowedTools === undefined || options.allowedTools.includes(name);
    if (allowed && !options.disallowedTools.includes(name)) {
      names.push(name);
      send.push(tool);
    }
  }
  return { names, send };
}

/**
 * Decides the request; `env` reads a variable of the run's (granted)
 * environment. Throws the run's refusal.
 */
export function configure(prompt: string, options: RunOptions, env: (name: string) => string | undefined): Config {
  if (options.directories.length > 0) {
    throw refuse(UNSUPPORTED_OPTION, "the openai-ts adapter gives the model no files, so extra directories cannot be honoured");
  }
  if (options.agents !== undefined) {
    throw refuse(UNSUPPORTED_OPTION, "Chat Completions has no sub-agents");
  }
  if (options.mcpServers !== undefined) {
    throw refuse(UNSUPPORTED_OPTION, "the openai-ts adapter runs no MCP servers; use the built-in openai adapter");
  }
  if (options.resume !== undefined) {
    throw refuse(UNSUPPORTED_OPTION, "Chat Completions keeps no session on the server, so a resume token cannot be honoured");
  }
  if (options.maxBudgetUsd !== undefined) {
    throw refuse(UNSUPPORTED_OPTION, "the openai-ts adapter has no price table and cannot enforce a budget; leave max-budget-usd out");
  }
  const model = options.model?.trim();
  if (!model) {
    throw refuse(INVALID_OPTIONS, "the openai-ts adapter needs a model: pass --model (e.g. gpt-4o-mini, or llama3.2 for Ollama)");
  }
  const extra: JsonObject = { ...options.extra };
  const baseUrlOption = extra["base_url"];
  delete extra["base_url"];
  if (baseUrlOption !== undefined && typeof baseUrlOption !== "string") {
    throw refuse(INVALID_OPTIONS, "options.extra.base_url must be a string");
  }
  for (const [key, instead] of Object.entries(RESERVED)) {
    if (key in extra) {
      throw refuse(INVALID_OPTIONS, `options.extra.${key} is set by the adapter: ${instead}`);
    }
  }
  const baseUrl = (baseUrlOption ?? env(BASE_URL_VAR) ?? DEFAULT_BASE_URL).replace(/\/+$/, "");
  if (!/^https?:\/\/[^/]+/i.test(baseUrl)) {
    throw refuse(INVALID_OPTIONS, `the base URL ${JSON.stringify(baseUrl)} is not http(s)://host[:port][/path]`);
  }
  const tools = allowedTools(options, extra["tools"]);
  delete extra["tools"];
  if (tools.send.length > 0) {
    extra["tools"] = tools.send;
  } else {
    // Without tools, the options that steer them would be refused by the API.
    delete extra["tool_choice"];
    delete extra["parallel_tool_calls"];
  }
  if (options.effort !== undefined && !("reasoning_effort" in extra)) {
    extra["reasoning_effort"] = options.effort;
  }
  const messages: JsonValue[] = [];
  if (options.systemPrompt !== undefined) {
    messages.push({ role: "system", content: options.systemPrompt });
  }
  messages.push({ role: "user", content: prompt });
  const body: JsonObject = {
    ...extra,
    model,
    messages,
    stream: true,
    stream_options: { include_usage: true },
  };
  const apiKey = env(KEY_VAR)?.trim() || undefined;
  return { url: `${baseUrl}/chat/completions`, apiKey, model, body, tools: tools.names };
}

/** The HTTP request of `config`: the key, when there is one, as a bearer token. */
export function requestInit(config: Config): RequestInit {
  const headers: Record<string, string> = {
    "content-type": "application/json",
    accept: "text/event-stream",
  };
  if (config.apiKey !== undefined) {
    headers["authorization"] = `Bearer ${config.apiKey}`;
  }
  return { method: "POST", headers, body: JSON.stringify(config.body) };
}
