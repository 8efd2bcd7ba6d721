"""Describing an adapter (`AdapterInfo`) and reading a run's `Options`.

An adapter refuses in its start phase (before its first `yield`) what it
cannot honour, by raising `Refused`; the caller gets the error as is and
nothing has run.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Optional

from ._bindings import types

AdapterInfo = types.AdapterInfo
Needs = types.Needs
Options = types.Options
TrustLevel = types.TrustLevel

#: The code of a refusal of malformed options.
INVALID_OPTIONS = "INVALID_OPTIONS"
#: The code of a refusal of an option the backend cannot honour.
UNSUPPORTED_OPTION = "UNSUPPORTED_OPTION"


class Refused(Exception):
    """Refuses the run: raise it before the first `yield` of `run`."""

    def __init__(self, code: Optional[str], message: str, recoverable: bool = False) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.recoverable = recoverable

    def error_info(self) -> types.ErrorInfo:
        """The contract's record of this refusal."""
        return types.ErrorInfo(code=self.code, message=self.message, recoverable=self.recoverable)


def adapter_info(
    name: str,
    version: str,
    description: str,
    *,
    hosts: Iterable[str] = (),
    env: Iterable[str] = (),
    programs: Iterable[str] = (),
    tool_patterns: bool = False,
) -> AdapterInfo:
    """What `moat inspect` shows: a short lowercase name, a version, a
    description, and what the adapter needs from the host (network hosts as
    "host:port", environment variable names, programs)."""
    return types.AdapterInfo(
        name=name,
        version=version,
        description=description,
        needs=types.Needs(hosts=list(hosts), env=list(env), programs=list(programs)),
        tool_patterns=tool_patterns,
    )


def extra_object(options: Options) -> dict[str, Any]:
    """`options.extra` as a dict (empty when absent); anything but a JSON
    object is refused with `INVALID_OPTIONS`."""
    if options.extra is None:
        return {}
    try:
        value = json.loads(options.extra)
    except ValueError as error:
        raise Refused(INVALID_OPTIONS, f"options.extra is not valid JSON: {error}") from None
    if not isinstance(value, dict):
        raise Refused(INVALID_OPTIONS, "options.extra must be a JSON object")
    return value


def permits(options: Options, tool: str) -> bool:
    """Whether the run's tool policy lets the backend have `tool`: on the
    allowed list when there is one, and not on the disallowed list."""
    allowed = options.allowed_tools
    return (allowed is None or tool in allowed) and tool not in options.disallowed_tools
