"""The `echo-py` adapter: streams the prompt back, written in Python.

The Python twin of adapters/echo (the built-in): `init`, the prompt word by
word as text deltas (each word keeping the whitespace after it, so the
deltas concatenate back to the prompt), the whole prompt as `text`, then
`done` success with the prompt as its result. It needs nothing from the
host and reports no tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from moat_adapter import DoneStatus, Event, Options, adapter_info, define_adapter, events

#: A word and the whitespace after it; leading whitespace is a piece of its
#: own, so nothing of the prompt is lost.
_WORD = re.compile(r"\s+|\S+\s*")


def words(text: str) -> list[str]:
    """Splits `text` into pieces that concatenate back to it."""
    return _WORD.findall(text)


def run(prompt: str, options: Options) -> Iterator[Event]:
    """One echo run. Abort needs no code here: the SDK throws `Interrupted`
    in at a `yield` and ends the run with `done` interrupted."""
    yield events.init(model="echo", cwd=options.cwd)
    for word in words(prompt):
        yield events.text_delta(word)
    yield events.text(prompt)
    # Honest usage: no tool calls, and no tokens to report.
    yield events.done(DoneStatus.SUCCESS, result=prompt, usage=events.usage(0))


Adapter = define_adapter(
    adapter_info("echo-py", "0.1.0", "Streams the prompt back (the Python SDK's example); needs nothing"),
    run,
)
