/**
 * The `openai-ts` adapter: OpenAI Chat Completions, streamed over
 * `wasi:http`, for the public API and every OpenAI-compatible server
 * (Ollama, vLLM, llama.cpp server, LM Studio, OpenRouter).
 *
 * The TypeScript counterpart of the built-in `openai` (adapters/openai),
 * without its MCP agent loop. The base URL comes from
 * `options.extra.base_url`, else `OPENAI_BASE_URL`, else the public API;
 * the key from `OPENAI_API_KEY` (optional for local servers). Its declared
 * needs are the public API's host and those two variables; a user
 * pointing it at another server grants that host with `--allow-net`.
 *
 * - config.ts: the request, and the refusals before it is sent;
 * - translate.ts: stream chunks to events;
 * - failure.ts: HTTP error statuses to error events.
 */

import {
  chunks,
  defineAdapter,
  done,
  env,
  error,
  fetch,
  HttpError,
  init,
  InterruptedError,
  isTooLarge,
  sseEvents,
} from "@moat/adapter";
import { BASE_URL_VAR, configure, DEFAULT_HOST, KEY_VAR, requestInit } from "./config.js";
import { statusError } from "./failure.js";
import { ServerError, Translator } from "./translate.js";

/** Largest error body read, in bytes. */
const MAX_ERROR_BODY = 64 * 1024;

export const adapter = defineAdapter({
  info: {
    name: "openai-ts",
    version: "0.1.0",
    description: "OpenAI Chat Completions and OpenAI-compatible servers, streamed (TypeScript)",
    needs: { hosts: [DEFAULT_HOST], env: [KEY_VAR, BASE_URL_VAR] },
  },
  async *run(prompt, options) {
    // Refusals throw here, before the first event: the run never starts.
    const config = configure(prompt, options, env);
    yield init({ model: config.model, cwd: options.cwd, tools: config.tools });

    let response: Response;
    try {
      response = await fetch(config.url, requestInit(config));
    } catch (failure) {
      if (!(failure instanceof HttpError)) throw failure;
      yield error("CONNECTION_FAILED", failure.message, true);
      yield done("error");
      return;
    }
    if (!response.ok) {
      const body = (await response.text()).slice(0, MAX_ERROR_BODY);
      yield statusError(response.status, body, config.model, config.apiKey !== undefined);
      yield done("error", { metadata: { httpStatus: response.status } });
      return;
    }

    const answer = new Translator();
    try {
      for await (const item of sseEvents(chunks(response))) {
        if (isTooLarge(item)) {
          yield answer.tagged(error("MALFORMED_EVENT", `a stream event larger than ${item.tooLarge} bytes was skipped`, true));
          continue;
        }
        if (item.data === "[DONE]") {
          yield* answer.finish();
          return;
        }
        yield* answer.chunk(item.data);
      }
    } catch (failure) {
      if (failure instanceof ServerError) {
        yield answer.tagged(error("SERVER_ERROR", failure.message, true));
        yield answer.tagged(done("error"));
        return;
      }
      // An interruption ends the run (the SDK sends `done` interrupted).
      if (failure instanceof InterruptedError) throw failure;
      if (answer.finished) {
        // The answer was complete; only the end of the body was lost.
        yield* answer.finish();
        return;
      }
      yield answer.tagged(error("STREAM_CUT", `the answer broke off: ${String(failure)}`, true));
      yield answer.tagged(done("error"));
      return;
    }
    // The body ended without `[DONE]`: complete when a finish reason came.
    if (answer.finished) {
      yield* answer.finish();
      return;
    }
    yield answer.tagged(error("STREAM_CUT", "the answer ended before it was complete", true));
    yield answer.tagged(done("error"));
  },
});
