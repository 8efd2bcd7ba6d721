"""Services the host offers every adapter: the abort flag and logging.

Log messages go into the host's log (`moat -v`, `MOAT_LOG`), tagged with the
adapter, never onto the user's terminal. `print` works too (a component's
stdout and stderr are captured as logs) but without a level.
"""

from __future__ import annotations

from ._bindings import moat_host

LogLevel = moat_host.LogLevel


class Interrupted(Exception):
    """The user asked the run to stop.

    Raised by the SDK's waits (HTTP, processes) while the run is aborted,
    and thrown into an adapter's generator at its next `yield` once the
    host has set the abort flag. Let it propagate and the SDK ends the run
    with `done` interrupted; catch it to stop the backend and yield a `done`
    of your own (with a resume token, say) instead.
    """


def interrupted() -> bool:
    """Whether the user asked the run to stop (the cooperative abort flag)."""
    return moat_host.interrupted()


def log(level: LogLevel, message: str) -> None:
    """Writes `message` into the host's log at `level`."""
    moat_host.log(level, message)


def trace(message: str) -> None:
    """Logs at trace level."""
    log(LogLevel.TRACE, message)


def debug(message: str) -> None:
    """Logs at debug level."""
    log(LogLevel.DEBUG, message)


def info(message: str) -> None:
    """Logs at info level."""
    log(LogLevel.INFO, message)


def warn(message: str) -> None:
    """Logs at warn level."""
    log(LogLevel.WARN, message)


def error(message: str) -> None:
    """Logs at error level."""
    log(LogLevel.ERROR, message)
