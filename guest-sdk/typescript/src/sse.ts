/**
 * Server-sent events, parsed incrementally: the streaming format of the
 * LLM APIs (OpenAI, Anthropic and every OpenAI-compatible server).
 *
 * Follows the HTML standard's rules, as the Rust SDK's parser does:
 * `event`, `data`, `id` and `retry` fields; one space after the colon is
 * stripped; `data` lines are joined with `\n`; `:` comment lines are
 * skipped; CRLF, LF and lone CR end lines; an event without `data` is not
 * dispatched; unknown fields are ignored; a leading byte order mark is
 * skipped. Chunks may be split anywhere, inside a UTF-8 character or
 * between `\r` and `\n`. Unlike a browser, {@link SseParser.finish}
 * returns a last event the stream ended without a blank line.
 *
 * Memory is bounded: an event larger than the limit (1 MiB by default)
 * is skipped without being buffered and reported in its place as an
 * {@link SseTooLarge} item, so the adapter can report it and go on.
 *
 * Host-independent: usable (and tested) outside a component.
 */

/** One dispatched event. */
export interface SseEvent {
  /** The `event` field; `"message"` when the server named none. */
  event: string;
  /** The `data` lines, joined with `\n`. */
  data: string;
  /** The last event ID seen so far in the stream. */
  id: string;
}

/** An event over the size limit, skipped. */
export interface SseTooLarge {
  tooLarge: number;
}

/** Default largest event, in bytes of its field values. */
export const DEFAULT_MAX_EVENT_SIZE = 1024 * 1024;

/** An incremental SSE parser: feed it chunks, take the events. */
export class SseParser {
  readonly #maxEventSize: number;
  readonly #decoder = new TextDecoder("utf-8");
  /** Text of the line being received. */
  #line = "";
  /** Whether the line being received is not blank (even if skipped). */
  #lineSeen = false;
  /** A `\r` ended the last chunk: a `\n` starting the next belongs to it. */
  #pendingCr = false;
  #started = false;
  #event = "";
  #data: string[] = [];
  #hasData = false;
  #size = 0;
  #oversize = false;
  #lastId = "";
  #retry: number | undefined;

  constructor(maxEventSize = DEFAULT_MAX_EVENT_SIZE) {
    this.#maxEventSize = maxEventSize;
  }

  /** The latest `retry` the server sent, in milliseconds. */
  get retry(): number | undefined {
    return this.#retry;
  }

  /** Parses `chunk`; returns the events it completed, in order. */
  feed(chunk: Uint8Array): Array<SseEvent | SseTooLarge> {
    return this.#text(this.#decoder.decode(chunk, { stream: true }));
  }

  /** Ends the stream; returns what it completed, and a last unterminated event. */
  finish(): Array<SseEvent | SseTooLarge> {
    const out = this.#text(this.#decoder.decode());
    if (this.#lineSeen) {
      this.#endLine(out);
    }
    this.#dispatch(out);
    return out;
  }

  #text(text: string): Array<SseEvent | SseTooLarge> {
    const out: Array<SseEvent | SseTooLarge> = [];
    let start = 0;
    if (!this.#started && text.length > 0) {
      this.#started = true;
      if (text.charCodeAt(0) === 0xfeff) {
        start = 1;
      }
    }
    if (this.#pendingCr && start < text.length) {
      this.#pendingCr = false;
      if (text[start] === "\n") {
        start += 1;
      }
    }
    for (let i = start; i < text.length; i++) {
      const c = text[i];
      if (c !== "\n" && c !== "\r") {
        continue;
      }
      this.#append(text.slice(start, i));
      this.#endLine(out);
      if (c === "\r") {
        if (i + 1 === text.length) {
          this.#pendingCr = true;
        } else if (text[i + 1] === "\n") {
          i += 1;
        }
      }
      start = i + 1;
    }
    this.#append(text.slice(start));
    return out;
  }

  /** Adds to the current line, unless the event is already too large. */
  #append(piece: string): void {
    if (piece === "") {
      return;
    }
    this.#lineSeen = true;
    if (this.#oversize) {
      return;
    }
    if (this.#size + this.#line.length + piece.length > this.#maxEventSize) {
      this.#oversize = true;
      this.#line = "";
      return;
    }
    this.#line += piece;
  }

  #endLine(out: Array<SseEvent | SseTooLarge>): void {
    const line = this.#line;
    const blank = !this.#lineSeen;
    this.#line = "";
    this.#lineSeen = false;
    if (blank) {
      this.#dispatch(out);
      return;
    }
    if (this.#oversize) {
      return;
    }
    if (line.startsWith(":")) {
      return;
    }
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) {
      value = value.slice(1);
    }
    this.#size += value.length;
    switch (field) {
      case "event":
        this.#event = value;
        break;
      case "data":
        this.#data.push(value);
        this.#hasData = true;
        break;
      case "id":
        if (!value.includes("\0")) {
          this.#lastId = value;
        }
        break;
      case "retry":
        if (/^[0-9]+$/.test(value)) {
          this.#retry = Number(value);
        }
        break;
      default:
        break;
    }
  }

  /** Dispatches the event gathered so far (if any) and starts a new one. */
  #dispatch(out: Array<SseEvent | SseTooLarge>): void {
    if (this.#oversize) {
      out.push({ tooLarge: this.#maxEventSize });
    } else if (this.#hasData) {
      out.push({ event: this.#event || "message", data: this.#data.join("\n"), id: this.#lastId });
    }
    this.#event = "";
    this.#data = [];
    this.#hasData = false;
    this.#size = 0;
    this.#oversize = false;
  }
}

/** Whether an item is an oversize event rather than an event. */
export function isTooLarge(item: SseEvent | SseTooLarge): item is SseTooLarge {
  return "tooLarge" in item;
}

/**
 * The events of a body given as chunks (e.g. `chunks(response)` from the
 * http module), read only as events are asked for.
 */
export async function* sseEvents(
  body: AsyncIterable<Uint8Array>,
  maxEventSize = DEFAULT_MAX_EVENT_SIZE,
): AsyncGenerator<SseEvent | SseTooLarge, void, undefined> {
  const parser = new SseParser(maxEventSize);
  for await (const chunk of body) {
    yield* parser.feed(chunk);
  }
  yield* parser.finish();
}
