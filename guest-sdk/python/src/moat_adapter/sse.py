"""An incremental parser of server-sent events (the streaming LLM APIs'
format), fed the body in chunks split anywhere.

It follows the HTML standard's rules: `event`, `data`, `id` and `retry`
fields; one space after the colon is stripped; `data` lines are joined with
"\\n"; comment lines (`:`) are skipped; CRLF, LF and a lone CR end lines; an
event without data is not dispatched; a leading byte order mark is skipped.
Memory is bounded: an event larger than `max_event_size` is skipped and
reported as one `SseEvent` with `too_large` set.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

#: The default bound of one event (its data and fields), in bytes.
MAX_EVENT_SIZE = 1024 * 1024


@dataclass
class SseEvent:
    """One dispatched event."""

    event: str = ""
    data: str = ""
    id: Optional[str] = None
    #: The event was larger than the parser's bound and was skipped.
    too_large: bool = False


class SseParser:
    """Feed it bytes; it returns the events each chunk completes."""

    def __init__(self, max_event_size: int = MAX_EVENT_SIZE) -> None:
        self._max = max_event_size
        self._line = bytearray()
        self._after_cr = False
        self._started = False
        self._event = ""
        self._data: list[str] = []
        self._size = 0
        self._oversize = False
        self._last_id: Optional[str] = None
        self.retry: Optional[int] = None

    def feed(self, chunk: bytes) -> list[SseEvent]:
        """The events completed by `chunk`."""
        out: list[SseEvent] = []
        i, n = 0, len(chunk)
        if not n:
            return out
        if self._after_cr and n and chunk[0] == 0x0A:
            i = 1  # the LF of a CRLF split between two chunks
        self._after_cr = False
        while i < n:
            ends = [j for j in (chunk.find(b"\r", i), chunk.find(b"\n", i)) if j >= 0]
            if not ends:
                self._append(chunk[i:])
                break
            j = min(ends)
            self._append(chunk[i:j])
            self._end_line(out)
            i = j + 1
            if chunk[j] == 0x0D:
                if i == n:
                    self._after_cr = True
                elif chunk[i] == 0x0A:
                    i += 1
        return out

    def finish(self) -> Optional[SseEvent]:
        """A last event the stream ended without a blank line."""
        out: list[SseEvent] = []
        if self._line:
            self._end_line(out)
        self._dispatch(out)
        return out[0] if out else None

    def _append(self, piece: bytes) -> None:
        if self._oversize:
            return
        self._line += piece
        if self._size + len(self._line) > self._max:
            self._oversize = True
            self._line.clear()

    def _end_line(self, out: list[SseEvent]) -> None:
        raw = bytes(self._line)
        self._line.clear()
        if not self._started:
            self._started = True
            if raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
        if not raw:
            self._dispatch(out)
            return
        if self._oversize:
            return
        line = raw.decode("utf-8", errors="replace")
        self._size += len(raw)
        if line.startswith(":"):
            return
        name, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._last_id = value
        elif name == "retry" and value.isdigit():
            self.retry = int(value)

    def _dispatch(self, out: list[SseEvent]) -> None:
        if self._oversize:
            out.append(SseEvent(event=self._event, id=self._last_id, too_large=True))
        elif self._data:
            out.append(SseEvent(event=self._event, data="\n".join(self._data), id=self._last_id))
        self._event = ""
        self._data = []
        self._size = 0
        self._oversize = False
