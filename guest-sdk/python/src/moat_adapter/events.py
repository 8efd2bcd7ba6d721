"""Builders for the events an adapter yields, one per event kind.

Each returns the contract's `Event` (the record the host reads), so an
adapter never assembles the WIT records by hand. JSON fields (tool input and
output, capabilities, metadata, extension payloads) take Python values and
are encoded here, so they are always valid JSON; the host parses them again
and drops an event whose JSON does not parse.

    yield events.text_delta("Hel")
    yield events.done(DoneStatus.SUCCESS, result="Hello", usage=events.usage(0))
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Optional

from ._bindings import types

Event = types.Event
DoneStatus = types.DoneStatus
ToolStatus = types.ToolStatus
TokenCoverage = types.TokenCoverage
CostSource = types.CostSource
Usage = types.Usage
TokenReport = types.TokenReport
Cost = types.Cost

#: The error code for a resume the backend cannot honour because the session
#: is gone: the host then starts the run again as a fresh session.
SESSION_NOT_FOUND = "SESSION_NOT_FOUND"
#: The `done` metadata key for the run's turns (model round trips).
TURNS_METADATA_KEY = "turns"


def encode_json(value: Any) -> str:
    """`value` as compact JSON text; NaN and infinities are refused (they
    are not JSON, and the host would drop the event)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _event(kind: types.EventKind, session_id: Optional[str]) -> Event:
    return types.Event(session_id=session_id, kind=kind)


def init(
    model: Optional[str] = None,
    cwd: Optional[str] = None,
    tools: Iterable[str] = (),
    capabilities: Optional[Mapping[str, Any]] = None,
    *,
    session_id: Optional[str] = None,
) -> Event:
    """The session has started: the model, working directory and tools the
    backend uses, and its capabilities (a JSON object) when known."""
    record = types.InitEvent(
        model=model,
        cwd=cwd,
        tools=list(tools),
        capabilities=None if capabilities is None else encode_json(dict(capabilities)),
    )
    return _event(types.EventKind_Init(record), session_id)


def text(content: str, *, session_id: Optional[str] = None) -> Event:
    """A complete piece of assistant text."""
    return _event(types.EventKind_Text(content), session_id)


def text_delta(delta: str, *, session_id: Optional[str] = None) -> Event:
    """A streamed fragment of assistant text."""
    return _event(types.EventKind_TextDelta(delta), session_id)


def thinking(summary: str, *, session_id: Optional[str] = None) -> Event:
    """A summary of the agent's reasoning."""
    return _event(types.EventKind_Thinking(summary), session_id)


def tool_use(
    tool_name: str,
    tool_use_id: str,
    input: Mapping[str, Any],
    description: Optional[str] = None,
    *,
    session_id: Optional[str] = None,
) -> Event:
    """The agent calls `tool_name`; `input` is a JSON object."""
    record = types.ToolUseEvent(
        tool_name=tool_name,
        tool_use_id=tool_use_id,
        input=encode_json(dict(input)),
        description=description,
    )
    return _event(types.EventKind_ToolUse(record), session_id)


def tool_result(
    tool_use_id: str,
    tool_name: str,
    status: ToolStatus,
    output: Any,
    duration_ms: Optional[int] = None,
    *,
    session_id: Optional[str] = None,
) -> Event:
    """A tool call finished; `output` is any JSON value (a string for plain
    text)."""
    record = types.ToolResultEvent(
        tool_use_id=tool_use_id,
        tool_name=tool_name,
        status=status,
        output=encode_json(output),
        duration_ms=duration_ms,
    )
    return _event(types.EventKind_ToolResult(record), session_id)


def error_info(code: Optional[str], message: str, recoverable: bool = False) -> types.ErrorInfo:
    """The contract's error record (an `error` event's content, or a
    refusal's)."""
    return types.ErrorInfo(code=code, message=message, recoverable=recoverable)


def error(
    code: Optional[str],
    message: str,
    recoverable: bool = False,
    *,
    session_id: Optional[str] = None,
) -> Event:
    """An error: `code` machine-readable (e.g. "AUTH_FAILED") or None, the
    message saying what to do, and whether the run can go on."""
    return _event(types.EventKind_Error(error_info(code, message, recoverable)), session_id)


def permission_request(
    tool_name: str,
    tool_use_id: str,
    input: Mapping[str, Any],
    reason: Optional[str] = None,
    *,
    session_id: Optional[str] = None,
) -> Event:
    """The agent asks for permission to use a tool; `input` is a JSON
    object."""
    record = types.PermissionRequestEvent(
        tool_name=tool_name,
        tool_use_id=tool_use_id,
        input=encode_json(dict(input)),
        reason=reason,
    )
    return _event(types.EventKind_PermissionRequest(record), session_id)


def tokens(
    input_total: int,
    output_total: int,
    *,
    cache_read: Optional[int] = None,
    cache_write: Optional[int] = None,
    reasoning: Optional[int] = None,
    coverage: TokenCoverage = TokenCoverage.COMPLETE,
) -> TokenReport:
    """A token report, exactly as the backend gave it: totals include their
    details; a detail left out is unknown. Never estimate."""
    return types.TokenReport(
        coverage=coverage,
        input=types.InputTokens(total=input_total, cache_read=cache_read, cache_write=cache_write),
        output=types.OutputTokens(total=output_total, reasoning=reasoning),
    )


def usage(
    tool_uses: int = 0,
    tokens: Optional[TokenReport] = None,
    cost: Optional[Cost] = None,
) -> Usage:
    """A run's usage: distinct tool calls, and tokens and cost when known."""
    return types.Usage(tool_uses=tool_uses, tokens=tokens, cost=cost)


def cost(usd: float, source: CostSource) -> Cost:
    """A cost in US dollars, and who computed it."""
    return types.Cost(usd=usd, source=source)


def done(
    status: DoneStatus = DoneStatus.SUCCESS,
    *,
    result: Optional[str] = None,
    resume_token: Optional[str] = None,
    usage: Optional[Usage] = None,
    duration_ms: Optional[int] = None,
    metadata: Optional[Mapping[str, Any]] = None,
    session_id: Optional[str] = None,
) -> Event:
    """The run is over: exactly one per run, and nothing follows it. Usage
    defaults to no tool calls with tokens and cost unknown; the host fills
    in the duration when it is left out. Put the run's turns under
    `TURNS_METADATA_KEY` in `metadata` when the backend reports them."""
    record = types.DoneEvent(
        status=status,
        result=result,
        resume_token=resume_token,
        usage=usage if usage is not None else types.Usage(tool_uses=0, tokens=None, cost=None),
        duration_ms=duration_ms,
        metadata=None if metadata is None else encode_json(dict(metadata)),
    )
    return _event(types.EventKind_Done(record), session_id)


def extension(name: str, payload: Any, *, session_id: Optional[str] = None) -> Event:
    """A namespaced extension event ("vendor:name") with any JSON payload."""
    record = types.ExtensionEvent(name=name, payload=encode_json(payload))
    return _event(types.EventKind_Extension(record), session_id)


def with_session(event: Event, session_id: Optional[str]) -> Event:
    """`event` carrying the backend's session id (unchanged when None)."""
    if session_id is None:
        return event
    return types.Event(session_id=session_id, kind=event.kind)


def is_done(event: Event) -> bool:
    """Whether `event` is the terminal `done`."""
    return isinstance(event.kind, types.EventKind_Done)
