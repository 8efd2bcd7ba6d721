"""`ignores-abort-py`: a misbehaving Python adapter for the host's tests.

It streams one delta, then never yields again: with the prompt "spin" it
loops in Python forever, so only the host (epoch interruption at the end of
the abort drain, or the run's timeout) can stop it; with "yield" it keeps
yielding deltas and swallows the SDK's `Interrupted`, so the cooperative
path cannot stop it either.
"""

from __future__ import annotations

from collections.abc import Iterator

from moat_adapter import Event, Interrupted, Options, adapter_info, define_adapter, events


def run(prompt: str, options: Options) -> Iterator[Event]:
    """Never ends on its own."""
    yield events.text_delta("started")
    if prompt == "spin":
        while True:
            pass
    count = 0
    while True:
        try:
            count += 1
            yield events.text_delta(f" {count}")
        except Interrupted:
            continue


Adapter = define_adapter(adapter_info("ignores-abort-py", "0.1.0", "Ignores abort (a test adapter)"), run)
