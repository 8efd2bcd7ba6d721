/**
 * Chat Completions stream chunks to moat events: text deltas, reasoning as
 * one `thinking`, tool calls accumulated by `index`, and at the end the
 * assembled text, the tool calls and `done` with the usage the server
 * reported (absent when it sent none: unknown, never zero).
 *
 * Every value from the server is untrusted: a chunk that is not the JSON
 * expected is reported (`MALFORMED_EVENT`, recoverable) and skipped.
 */

import {
  done,
  error,
  text,
  textDelta,
  thinking,
  toolUse,
  TURNS_METADATA_KEY,
  withSession,
  type Event,
  type JsonObject,
  type JsonValue,
  type Tokens,
} from "@moat/adapter";

/** A tool call being streamed. */
interface PendingCall {
  id: string;
  name: string;
  args: string;
}

function object(value: JsonValue | undefined): JsonObject | undefined {
  return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined;
}

function count(value: JsonValue | undefined): number | undefined {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined;
}

/** The server's words, cut to a bounded length. */
export function quote(message: string): string {
  return message.length > 500 ? `${message.slice(0, 500)}…` : message;
}

/** The usage chunk as a token report; `undefined` when it is not one. */
function tokens(usage: JsonObject): Tokens | undefined {
  const input = count(usage["prompt_tokens"]);
  const output = count(usage["completion_tokens"]);
  if (input === undefined || output === undefined) {
    return undefined;
  }
  // A detail larger than its total is left out, never trusted.
  const cached = count(object(usage["prompt_tokens_details"])?.["cached_tokens"]);
  const reasoning = count(object(usage["completion_tokens_details"])?.["reasoning_tokens"]);
  return {
    coverage: "complete",
    input: { total: input, cacheRead: cached !== undefined && cached <= input ? cached : undefined },
    output: { total: output, reasoning: reasoning !== undefined && reasoning <= output ? reasoning : undefined },
  };
}

/** The state of one streamed answer. */
export class Translator {
  #sessionId: string | undefined;
  #model: string | undefined;
  #text = "";
  #reasoning = "";
  #thought = false;
  readonly #calls = new Map<number, PendingCall>();
  #finishReason: string | undefined;
  #tokens: Tokens | undefined;

  /** Whether the answer is complete enough to end with success. */
  get finished(): boolean {
    return this.#finishReason !== undefined;
  }

  #tag(event: Event): Event {
    return this.#sessionId === undefined ? event : withSession(event, this.#sessionId);
  }

  /** The events of one SSE `data` payload (not `[DONE]`). */
  *chunk(data: string): Generator<Event, void, undefined> {
    let parsed: JsonValue;
    try {
      parsed = JSON.parse(data) as JsonValue;
    } catch {
      yield this.#tag(error("MALFORMED_EVENT", `a stream event is not JSON: ${quote(data)}`, true));
      return;
    }
    const chunk = object(parsed);
    if (chunk === undefined) {
      yield this.#tag(error("MALFORMED_EVENT", `a stream event is not a JSON object: ${quote(data)}`, true));
      return;
    }
    const failure = object(chunk["error"]);
    if (failure !== undefined) {
      const message = typeof failure["message"] === "string" ? failure["message"] : JSON.stringify(failure);
      throw new ServerError(`the server failed mid-stream: ${quote(message)}`);
    }
    if (typeof chunk["id"] === "string" && this.#sessionId === undefined) {
      this.#sessionId = chunk["id"];
    }
    if (typeof chunk["model"] === "string") {
      this.#model = chunk["model"];
    }
    const usage = object(chunk["usage"]);
    if (usage !== undefined) {
      this.#tokens = tokens(usage);
    }
    const choices = chunk["choices"];
    const choice = Array.isArray(choices) ? object(choices[0]) : undefined;
    if (choice === undefined) {
      return;
    }
    const delta = object(choice["delta"]);
    if (delta !== undefined) {
      yield* this.#delta(delta);
    }
    if (typeof choice["finish_reason"] === "string") {
      this.#finishReason = choice["finish_reason"];
    }
  }

  *#delta(delta: JsonObject): Generator<Event, void, undefined> {
    const reasoning = delta["reasoning_content"] ?? delta["reasoning"];
    if (typeof reasoning === "string") {
      this.#reasoning += reasoning;
    }
    const content = delta["content"];
    if (typeof content === "string" && content !== "") {
      yield* this.#thinking();
      this.#text += content;
      yield this.#tag(textDelta(content));
    }
    const calls = delta["tool_calls"];
    for (const call of Array.isArray(calls) ? calls : []) {
      const piece = object(call);
      const index = count(piece?.["index"]);
      if (piece === undefined || index === undefined) {
        continue;
      }
      const pending = this.#calls.get(index) ?? { id: "", name: "", args: "" };
      const fn = object(piece["function"]);
      if (typeof piece["id"] === "string") pending.id = piece["id"];
      if (typeof fn?.["name"] === "string") pending.name += fn["name"];
      if (typeof fn?.["arguments"] === "string") pending.args += fn["arguments"];
      this.#calls.set(index, pending);
    }
  }

  /** The reasoning so far as one `thinking`, once. */
  *#thinking(): Generator<Event, void, undefined> {
    if (!this.#thought && this.#reasoning !== "") {
      this.#thought = true;
      yield this.#tag(thinking(this.#reasoning));
    }
  }

  /** The end of the answer: text, tool calls, `done` success. */
  *finish(): Generator<Event, void, undefined> {
    yield* this.#thinking();
    if (this.#text !== "") {
      yield this.#tag(text(this.#text));
    }
    let toolUses = 0;
    for (const [, call] of [...this.#calls].sort(([a], [b]) => a - b)) {
      let input: JsonValue;
      try {
        input = call.args.trim() === "" ? {} : (JSON.parse(call.args) as JsonValue);
      } catch {
        yield this.#tag(error("MALFORMED_EVENT", `the arguments of tool call ${call.id} are not JSON: ${quote(call.args)}`, true));
        continue;
      }
      const args = object(input);
      if (args === undefined) {
        yield this.#tag(error("MALFORMED_EVENT", `the arguments of tool call ${call.id} are not a JSON object`, true));
        continue;
      }
      toolUses += 1;
      yield this.#tag(toolUse(call.name, call.id, args));
    }
    const metadata: JsonObject = { [TURNS_METADATA_KEY]: 1 };
    if (this.#finishReason !== undefined) metadata["finishReason"] = this.#finishReason;
    if (this.#model !== undefined) metadata["model"] = this.#model;
    yield this.#tag(
      done("success", {
        result: this.#text,
        toolUses,
        ...(this.#tokens === undefined ? {} : { tokens: this.#tokens }),
        metadata,
      }),
    );
  }

  /** An event of this answer's session. */
  tagged(event: Event): Event {
    return this.#tag(event);
  }
}

/** An error the server reported inside the stream. */
export class ServerError extends Error {}
