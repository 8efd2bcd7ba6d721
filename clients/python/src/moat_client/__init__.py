"""A Python client of `moat serve` (docs/protocol.md): start runs of
sandboxed agent adapters, await their results, cancel them, read their
records, and stream their events, over JSON lines.

    async with await MoatClient.spawn() as client:
        async for event in client.run_agent("echo", "hello"):
            print(event["type"], event["payload"])
"""

from ._client import DEFAULT_MAX_BUFFERED, EventStream, MoatClient, RunAgentStream
from ._errors import MoatConnectionError, MoatError
from ._types import (
    AdapterInfo,
    AdapterNeeds,
    AgentEvent,
    EngineError,
    EngineResult,
    EventType,
    Grants,
    Limits,
    ResultStatus,
    RunOptions,
    RunRecord,
    RunStatus,
    Trust,
    Usage,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_BUFFERED",
    "AdapterInfo",
    "AdapterNeeds",
    "AgentEvent",
    "EngineError",
    "EngineResult",
    "EventStream",
    "EventType",
    "Grants",
    "Limits",
    "MoatClient",
    "MoatConnectionError",
    "MoatError",
    "ResultStatus",
    "RunAgentStream",
    "RunOptions",
    "RunRecord",
    "RunStatus",
    "Trust",
    "Usage",
]
