"""The errors of the client."""

from __future__ import annotations

from typing import Any

__all__ = ["MoatConnectionError", "MoatError"]


class MoatError(Exception):
    """An error the server answered with, or one of the connection.

    `code` is the protocol's (`INVALID_REQUEST`, `NOT_FOUND`,
    `BOUNDARY_VIOLATION`, `RUN_FAILED`, `CONFLICT`: an `apply` whose changes
    no longer apply), `CONNECTION_CLOSED` for a
    :class:`MoatConnectionError`, or `PROTOCOL_ERROR` when the server's
    events of a run skip a seq (a server bug). `data` is what else the server said, e.g.
    an await's `{"results": {...}}` on `RUN_FAILED`.
    """

    code: str
    message: str
    data: Any

    def __init__(self, code: str, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"


class MoatConnectionError(MoatError, ConnectionError):
    """The connection to the server is gone (it exited, closed the socket,
    or the client was closed): no answer will come."""

    def __init__(self, message: str) -> None:
        super().__init__("CONNECTION_CLOSED", message)
