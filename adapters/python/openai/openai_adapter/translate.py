"""From Chat Completions stream chunks to moat events.

Every value comes from the server and is untrusted: a chunk that is not the
JSON expected is reported as a recoverable `MALFORMED_EVENT` and skipped;
nothing here raises on input.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Optional

from moat_adapter import TURNS_METADATA_KEY, DoneStatus, Event, TokenReport, events

from .failures import Failure, cut

MALFORMED_EVENT = "MALFORMED_EVENT"
STREAM_CUT = "STREAM_CUT"
#: Most tool calls kept from one answer, and the longest arguments of one.
MAX_TOOL_CALLS = 128
MAX_ARGUMENTS = 1024 * 1024
#: Longest text repeated in the `text` event and the done's result (the
#: deltas carried it all anyway; the host refuses events past 1 MiB).
MAX_ASSEMBLED_TEXT = 512 * 1024


@dataclass
class _ToolCall:
    id: str = ""
    name: str = ""
    arguments: str = ""
    too_long: bool = False


class Translator:
    """The state of one streamed answer."""

    def __init__(self) -> None:
        self.session_id: Optional[str] = None
        self.model: Optional[str] = None
        self.finish_reason: Optional[str] = None
        self.ended = False
        self._text: list[str] = []
        self._text_size = 0
        self._text_too_long = False
        self._reasoning: list[str] = []
        self._tools: dict[int, _ToolCall] = {}
        self._usage: Optional[TokenReport] = None

    def tag(self, event: Event) -> Event:
        """`event` with the response's id as its session id, once known."""
        return events.with_session(event, self.session_id)

    def on_data(self, data: str) -> list[Event]:
        """The events of one SSE event's data."""
        if self.ended:
            return []
        data = data.strip()
        if data == "[DONE]":
            return self.finish()
        try:
            chunk = json.loads(data)
        except ValueError:
            chunk = None
        if not isinstance(chunk, dict):
            return [self.malformed("a chunk that is not a JSON object", data)]
        error = chunk.get("error")
        if error is not None:
            message = error.get("message") if isinstance(error, dict) else error
            message = message if isinstance(message, str) else "no message"
            return self.fail(Failure("SERVER_ERROR", f"the server failed mid-stream: {cut(message, 500)}", True))
        out: list[Event] = []
        if self.session_id is None and isinstance(chunk.get("id"), str) and chunk["id"]:
            self.session_id = cut(chunk["id"], 200)
        if self.model is None and isinstance(chunk.get("model"), str):
            self.model = cut(chunk["model"], 200)
        usage = chunk.get("usage")
        if usage is not None:
            report = token_report(usage)
            if report is None:
                out.append(self.malformed("a usage object without token counts", data))
            else:
                self._usage = report
        choices = chunk.get("choices")
        choice = None
        if isinstance(choices, list):
            # Only the first choice is followed (`n` is left at 1).
            choice = next((c for c in choices if isinstance(c, dict) and c.get("index", 0) == 0), None)
        if choice is not None:
            out += self._delta(choice.get("delta"), data)
            reason = choice.get("finish_reason")
            if isinstance(reason, str):
                self.finish_reason = cut(reason, 100)
        return out

    def _delta(self, delta: Any, data: str) -> list[Event]:
        if not isinstance(delta, dict):
            return []
        out: list[Event] = []
        for key in ("reasoning_content", "reasoning"):
            reasoning = delta.get(key)
            if isinstance(reasoning, str) and reasoning:
                self._reasoning.append(reasoning)
                break
        content = delta.get("content")
        calls = delta.get("tool_calls")
        if (isinstance(content, str) and content) or calls is not None:
            # The reasoning is over once the answer starts.
            out += self._take_thinking()
        if isinstance(content, str) and content:
            self._push_text(content)
            out.append(self.tag(events.text_delta(content)))
        if isinstance(calls, list):
            for position, call in enumerate(calls):
                if not self._tool_fragment(position, call):
                    out.append(self.malformed("a tool call fragment that is not an object", data))
        return out

    def _push_text(self, content: str) -> None:
        self._text_size += len(content)
        if self._text_size > MAX_ASSEMBLED_TEXT:
            self._text_too_long = True
            self._text = []
        if not self._text_too_long:
            self._text.append(content)

    def _take_thinking(self) -> list[Event]:
        if not self._reasoning:
            return []
        summary, self._reasoning = "".join(self._reasoning), []
        return [self.tag(events.thinking(summary))]

    def _tool_fragment(self, position: int, call: Any) -> bool:
        """Adds one fragment of a streamed tool call; False when it is not
        an object. `index` ties the fragments of one call together."""
        if not isinstance(call, dict):
            return False
        index = call.get("index", position)
        index = index if isinstance(index, int) else position
        if index not in self._tools and len(self._tools) >= MAX_TOOL_CALLS:
            return True
        entry = self._tools.setdefault(index, _ToolCall())
        if isinstance(call.get("id"), str) and call["id"]:
            entry.id = cut(call["id"], 200)
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        if isinstance(function.get("name"), str) and function["name"]:
            entry.name = cut(function["name"], 200)
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            if len(entry.arguments) + len(arguments) > MAX_ARGUMENTS:
                entry.too_long = True
            else:
                entry.arguments += arguments
        return True

    def finish(self) -> list[Event]:
        """The answer is complete: thinking, the text, the tool calls, done."""
        out = self._take_thinking()
        text = "".join(self._text)
        keep_text = bool(text) and not self._text_too_long
        if keep_text:
            out.append(self.tag(events.text(text)))
        tool_uses = 0
        for index in sorted(self._tools):
            call = self._tools[index]
            input, why = _arguments(call)
            if input is None:
                out.append(self.malformed_text(f"tool call `{call.name}` dropped: {why}: {cut(call.arguments, 200)}"))
                continue
            tool_uses += 1
            out.append(self.tag(events.tool_use(call.name, call.id or f"call_{index}", input)))
        metadata: dict[str, Any] = {TURNS_METADATA_KEY: 1}
        if self.finish_reason is not None:
            metadata["finishReason"] = self.finish_reason
        if self.model is not None:
            metadata["model"] = self.model
        self.ended = True
        out.append(
            self.tag(
                events.done(
                    DoneStatus.SUCCESS,
                    result=text if keep_text else None,
                    usage=events.usage(tool_uses, self._usage),
                    metadata=metadata,
                )
            )
        )
        return out

    def body_ended(self) -> list[Event]:
        """The body ended without `[DONE]`: a finish reason says the answer
        was complete all the same."""
        if self.ended:
            return []
        if self.finish_reason is not None:
            return self.finish()
        return self.fail(Failure(STREAM_CUT, "the response ended before the answer was complete (no finish_reason, no [DONE])", True))

    def fail(self, failure: Failure) -> list[Event]:
        """The error, then `done` error with no token report (a broken
        stream's usage is unknown, never zero)."""
        if self.ended:
            return []
        self.ended = True
        metadata = dict(failure.metadata)
        if self.finish_reason is not None:
            metadata["finishReason"] = self.finish_reason
        return [
            self.tag(events.error(failure.code, failure.message, failure.recoverable)),
            self.tag(events.done(DoneStatus.ERROR, metadata=metadata or None)),
        ]

    def malformed(self, what: str, raw: str) -> Event:
        """A recoverable MALFORMED_EVENT quoting the skipped data."""
        return self.malformed_text(f"the server sent {what}; skipped: {cut(raw, 200)}")

    def malformed_text(self, message: str) -> Event:
        return self.tag(events.error(MALFORMED_EVENT, message, True))


def _arguments(call: _ToolCall) -> tuple[Optional[dict[str, Any]], str]:
    """The call's input as a JSON object (empty arguments: `{}`), or why not."""
    if not call.name:
        return None, "the server never named the tool"
    if call.too_long:
        return None, "its arguments are longer than 1 MiB"
    if not call.arguments.strip():
        return {}, ""
    try:
        value = json.loads(call.arguments)
    except ValueError:
        return None, "its arguments are not valid JSON"
    return (value, "") if isinstance(value, dict) else (None, "its arguments are not a JSON object")


def _count(value: Any) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def token_report(usage: Any) -> Optional[TokenReport]:
    """The vendor's numbers: `prompt_tokens` and `completion_tokens`
    required, their details taken when present and within their totals."""
    if not isinstance(usage, dict):
        return None
    input_total, output_total = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
    if input_total is None or output_total is None:
        return None
    details = usage.get("prompt_tokens_details")
    cached = _count(details.get("cached_tokens")) if isinstance(details, dict) else None
    details = usage.get("completion_tokens_details")
    reasoning = _count(details.get("reasoning_tokens")) if isinstance(details, dict) else None
    # A detail larger than its total is inconsistent: left out, not corrected.
    return events.tokens(
        input_total,
        output_total,
        cache_read=cached if cached is not None and cached <= input_total else None,
        reasoning=reasoning if reasoning is not None and reasoning <= output_total else None,
    )
