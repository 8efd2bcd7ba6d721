"""Defining an adapter: `run(prompt, options)` is a generator of events.

    def run(prompt: str, options: Options) -> Iterator[Event]:
        yield events.text(prompt)
        yield events.done(result=prompt)

    Adapter = define_adapter(adapter_info("mine", "0.1.0", "…"), run)

The module the component is built from must bind the result to the name
`Adapter` (componentize-py looks it up there). The SDK does the WIT
plumbing: the host's `run` starts the generator and the session resource's
`next_batch` pulls one event from it (one per call: whether a generator's
next event is at hand cannot be told without waiting for it, and waiting
could hold back the event already pulled).

- The start phase: the code before the first `yield` runs inside the host's
  `run` call. Raise `Refused` there to refuse the run before the backend
  starts; the caller gets the error as it is.
- Abort: before each pull the SDK reads the host's abort flag; once it is
  set it throws `Interrupted` into the generator at its `yield`. Not caught,
  the run ends with `done` interrupted; caught, the generator may yield its
  own `done` (with a resume token). A generator that never yields again is
  stopped by the host at the end of its drain period.
- Failures: an exception escaping the generator ends the run with an
  `error` (ADAPTER_ERROR, the exception's type and message) and `done`
  error; the traceback goes to the host's log.
- After `done`, or when the generator returns, the stream is over (`none`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Iterator
from typing import List, Optional, Union

from . import events, host
from ._bindings import Err, adapter_exports, types, world_exports
from .host import Interrupted
from .info import Refused

RunFunction = Callable[[str, types.Options], Iterator[types.Event]]

#: The code of an error raised by the adapter's own code.
ADAPTER_ERROR = "ADAPTER_ERROR"


def _describe(error: BaseException) -> str:
    text = str(error)
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


class _Session(adapter_exports.Session):
    """One run: the generator and what is left to do with it."""

    def __init__(self, stream: Iterator[types.Event], first: Optional[types.Event]) -> None:
        self._stream: Optional[Iterator[types.Event]] = stream
        # The event the start phase produced, returned by the first pull.
        self._first = first
        self._interrupt_sent = False

    def next_batch(self, max: int) -> List[types.Event]:
        event = self._next()
        return [] if event is None else [event]

    def _next(self) -> Optional[types.Event]:
        if self._stream is None:
            return None
        if self._first is not None:
            event: Optional[types.Event] = self._first
            self._first = None
        elif not self._interrupt_sent and host.interrupted():
            self._interrupt_sent = True
            event = self._advance(interrupt=True)
        else:
            event = self._advance(interrupt=False)
        if event is None or events.is_done(event):
            self._close()
        return event

    def _advance(self, interrupt: bool) -> Optional[types.Event]:
        """The generator's next event, or the event that ends the run."""
        stream = self._stream
        assert stream is not None
        try:
            if interrupt and hasattr(stream, "throw"):
                return stream.throw(Interrupted())  # type: ignore[attr-defined]
            return next(stream)
        except StopIteration:
            # Ended without `done` (the host reports MISSING_DONE), or after
            # an interruption it did not answer with its own `done`.
            return events.done(types.DoneStatus.INTERRUPTED) if self._interrupt_sent else None
        except Interrupted:
            return events.done(types.DoneStatus.INTERRUPTED)
        except Exception as error:  # noqa: BLE001  (an adapter's failure ends its run)
            host.error("the adapter failed:\n" + traceback.format_exc())
            self._close()
            # The error now, its `done` at the next pull.
            self._stream = iter([events.done(types.DoneStatus.ERROR)])
            return events.error(ADAPTER_ERROR, _describe(error), False)

    def _close(self) -> None:
        """Closes the generator (its `finally` blocks run) and ends the stream."""
        stream, self._stream = self._stream, None
        close = getattr(stream, "close", None)
        if close is not None:
            try:
                close()
            except Exception:  # noqa: BLE001  (nothing follows `done`)
                host.warn("the adapter failed while closing:\n" + traceback.format_exc())


def _start(run: RunFunction, prompt: str, options: types.Options) -> _Session:
    """Runs the start phase: up to the generator's first event."""
    try:
        stream = iter(run(prompt, options))
        first: Optional[types.Event] = next(stream, None)
    except Refused as refusal:
        raise Err(refusal.error_info()) from None
    except Exception as error:  # noqa: BLE001
        host.error("the adapter failed to start:\n" + traceback.format_exc())
        raise Err(events.error_info(ADAPTER_ERROR, f"the adapter failed to start: {_describe(error)}")) from None
    session = _Session(stream, first)
    if first is None:
        session._close()
    return session


def define_adapter(
    info: Union[types.AdapterInfo, Callable[[], types.AdapterInfo]],
    run: RunFunction,
) -> type:
    """The class componentize-py exports as `moat:adapter/adapter`.

    `info` is the adapter's description (or a function returning it, called
    each time the host asks: it must have no side effects); `run` is the
    generator function of one run. Bind the result to `Adapter` at the top
    of the module the component is built from.
    """
    describe = info if callable(info) else (lambda: info)

    class Adapter(world_exports.Adapter):
        """The component's export (generated by `define_adapter`)."""

        def info(self) -> types.AdapterInfo:
            return describe()

        def run(self, prompt: str, options: types.Options) -> adapter_exports.Session:
            return _start(run, prompt, options)

    return Adapter
