"""Child processes (`--allow-run`): how an adapter drives a coding-agent CLI.

The host starts only granted programs, gives each child only the run's
granted environment variables plus those set here, runs it inside the
run's granted directories, and kills it (with its process group) when the
run ends. A refused spawn raises `ProcessError` of kind "denied"; the user
sees a `CAPABILITY_DENIED` event too. When the run is aborted, a pending
`read_line` or `wait` raises `Interrupted` at once.

    child = spawn("claude", ["-p", prompt, "--output-format", "stream-json"])
    while (line := child.read_line()) is not None:
        ...
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Optional, TypeVar

from ._bindings import Err, moat_process
from .host import Interrupted

ExitStatus = moat_process.ExitStatus
Signal = moat_process.Signal
StdinMode = moat_process.StdinMode

T = TypeVar("T")


class ProcessError(Exception):
    """A process call failed. `kind` is "denied", "not-found",
    "limit-reached", "timed-out", "line-too-long", "stdin-closed" or "io"."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def _raise(error: Err) -> None:
    """The host's process error as `ProcessError`, or `Interrupted`."""
    value = error.value
    if isinstance(value, moat_process.ProcessError_Interrupted):
        raise Interrupted() from None
    kind = type(value).__name__.removeprefix("ProcessError_")
    # CamelCase variant name → the WIT's kebab-case.
    kind = "".join("-" + c.lower() if c.isupper() else c for c in kind).lstrip("-")
    detail = getattr(value, "value", None)
    raise ProcessError(kind, f"{kind}: {detail}" if detail is not None else kind) from None


class Child:
    """A started child. `close()` (or leaving a `with` block) kills it."""

    def __init__(self, child: moat_process.Child) -> None:
        self._child: Optional[moat_process.Child] = child

    def _handle(self) -> moat_process.Child:
        if self._child is None:
            raise ProcessError("io", "the child was closed")
        return self._child

    @property
    def id(self) -> int:
        """Its process id on the host."""
        return self._handle().id()

    def read_line(self, timeout_ms: Optional[int] = None) -> Optional[str]:
        """The next line of stdout without its ending; None once stdout is
        closed. Waits at most `timeout_ms` when given ("timed-out")."""
        try:
            return self._handle().read_line(timeout_ms)
        except Err as error:
            _raise(error)
            raise AssertionError("unreachable")

    def stderr_tail(self) -> str:
        """The last bytes (at most 64 KiB) the child wrote to stderr so far."""
        return self._handle().stderr_tail()

    def write_stdin(self, data: bytes) -> None:
        """Writes to the child's stdin (spawned with `stdin=StdinMode.PIPED`)."""
        try:
            self._handle().write_stdin(data)
        except Err as error:
            _raise(error)

    def close_stdin(self) -> None:
        """Closes stdin, so the child sees end of input."""
        self._handle().close_stdin()

    def send_signal(self, signal: Signal) -> None:
        """Signals the child's process group."""
        try:
            self._handle().send_signal(signal)
        except Err as error:
            _raise(error)

    def wait(self, timeout_ms: Optional[int] = None) -> ExitStatus:
        """Waits for the child to exit (at most `timeout_ms`; 0 only looks)."""
        try:
            return self._handle().wait(timeout_ms)
        except Err as error:
            _raise(error)
            raise AssertionError("unreachable")

    def close(self) -> None:
        """Drops the handle: the host kills the child if it still runs."""
        child, self._child = self._child, None
        if child is not None:
            child.__exit__(None, None, None)

    def __enter__(self) -> "Child":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def spawn(
    program: str,
    args: Iterable[str] = (),
    *,
    env: Mapping[str, str] | None = None,
    cwd: Optional[str] = None,
    stdin: StdinMode = StdinMode.CLOSED,
) -> Child:
    """Starts a granted program (by the name it was granted, or its absolute
    path). `cwd` must lie inside a granted directory; without it the child
    runs in an empty directory of the run's own."""
    request = moat_process.SpawnRequest(
        program=program,
        args=list(args),
        env=list((env or {}).items()),
        cwd=cwd,
        stdin=stdin,
    )
    try:
        return Child(moat_process.spawn(request))
    except Err as error:
        _raise(error)
        raise AssertionError("unreachable")
