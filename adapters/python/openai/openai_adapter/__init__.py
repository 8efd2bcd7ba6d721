"""The `openai-py` adapter: OpenAI Chat Completions, streamed over
`wasi:http`, written in Python (the Python SDK's example of a real backend).

It follows the built-in openai adapter (docs/llm-adapters.md): the base URL
from `options.extra.base_url`, else `OPENAI_BASE_URL`, else the public API;
the key from `OPENAI_API_KEY`; text deltas, the assembled text, tool calls,
and `done` with the vendor's usage, `finishReason`, `model` and `turns`. It
runs no MCP servers (the built-in does): a run given some is refused.

- `config`: the request, and the refusals before it is sent;
- `failures`: HTTP statuses and transport failures as error codes;
- `translate`: stream chunks to events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from moat_adapter import Event, Options, adapter_info, define_adapter, events
from moat_adapter.http import HttpError, Response, send
from moat_adapter.sse import SseParser

from .config import BASE_URL_VAR, DEFAULT_HOST, KEY_VAR, configure
from .failures import Failure, status_failure, transport_failure
from .translate import MALFORMED_EVENT, STREAM_CUT, Translator

#: Most bytes of an error response read to quote its message, and of a
#: whole (non-streamed) answer.
MAX_ERROR_BODY = 64 * 1024
MAX_WHOLE_BODY = 16 * 1024 * 1024


def run(prompt: str, options: Options) -> Iterator[Event]:
    """One run: refusals (before the first `yield`), `init`, the request,
    the streamed answer."""
    config = configure(prompt, options)
    yield events.init(model=config.model, cwd=options.cwd, tools=config.tools)
    translator = Translator()
    try:
        response = send(config.request())
    except HttpError as error:
        yield from translator.fail(transport_failure(config, error))
        return
    with response:
        if response.status != 200:
            body = _read_quietly(response, MAX_ERROR_BODY)
            yield from translator.fail(status_failure(config, response.status, response.header("retry-after"), body))
        elif (response.header("content-type") or "").lower().startswith("application/json"):
            yield from _whole_answer(translator, response)
        else:
            yield from _stream(translator, response)


def _read_quietly(response: Response, limit: int) -> bytes:
    """The body, only to quote the server's message: a failure leaves it out."""
    try:
        return response.read_to_end(limit)
    except HttpError:
        return b""


def _stream(translator: Translator, response: Response) -> Iterator[Event]:
    parser = SseParser()
    while not translator.ended:
        try:
            chunk = response.read_chunk()
        except HttpError as error:
            yield from translator.fail(_cut_off(error))
            return
        if chunk is None:
            last = parser.finish()
            if last is not None:
                yield from translator.on_data(last.data)
            yield from translator.body_ended()
            return
        for sse in parser.feed(chunk):
            if sse.too_large:
                yield translator.tag(events.error(MALFORMED_EVENT, "the server sent an event larger than 1 MiB; skipped", True))
            else:
                yield from translator.on_data(sse.data)


def _whole_answer(translator: Translator, response: Response) -> Iterator[Event]:
    """A server that ignored `stream: true` and sent one `chat.completion`:
    read as one chunk carrying the whole message."""
    try:
        completion = json.loads(response.read_to_end(MAX_WHOLE_BODY))
    except (HttpError, ValueError) as error:
        yield from translator.fail(_cut_off(error) if isinstance(error, HttpError) else _not_json())
        return
    if isinstance(completion, dict) and isinstance(completion.get("choices"), list):
        completion["choices"] = [
            {"index": c.get("index", 0), "delta": c.get("message"), "finish_reason": c.get("finish_reason")}
            for c in completion["choices"]
            if isinstance(c, dict)
        ]
    yield from translator.on_data(json.dumps(completion))
    yield from translator.body_ended()


def _cut_off(error: HttpError) -> Failure:
    return Failure(STREAM_CUT, f"the response broke off mid-stream: {error}", True)


def _not_json() -> Failure:
    return Failure(MALFORMED_EVENT, "the server's JSON answer does not parse", True)


Adapter = define_adapter(
    adapter_info(
        "openai-py",
        "0.1.0",
        "OpenAI Chat Completions and OpenAI-compatible servers, streamed (the Python SDK's example)",
        hosts=[DEFAULT_HOST],
        env=[KEY_VAR, BASE_URL_VAR],
    ),
    run,
)
