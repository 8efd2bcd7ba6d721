"""A Python client of `moat serve` (docs/protocol.md): start runs of
sandboxed agent adapters, await their results, cancel them, read their
records, and stream their events, over JSON lines.

    async with await MoatClient.spawn() as client:
        async for event in client.run_agent("echo", "hello"):
            print(event["type"], event["payload"])
        tasks = [{"adapter": "echo", "prompt": "a", "role": "one"},
                 {"adapter": "echo", "prompt": "b", "role": "two"}]
        async for event in client.run_parallel(tasks):
            print(event.get("role"), event["type"])

        @client.on_permission_request        # runs started with ask=... that
        async def decide(run_id, request):   # reach past their grants ask here
            if request.kind == "net" and request.input["host"] == "api.example.com":
                return PermissionResultAllow()
            return PermissionResultDeny(message="not this host")
"""

from ._client import (
    DEFAULT_MAX_BUFFERED,
    EventStream,
    MoatClient,
    RunAgentStream,
    RunParallelStream,
    is_agent_event,
)
from ._errors import MoatConnectionError, MoatError
from ._types import (
    AdapterInfo,
    AdapterNeeds,
    AgentEvent,
    Approval,
    ApprovalAnswer,
    ApprovalKind,
    ApprovalRequest,
    Ask,
    DoneMetadata,
    DonePayload,
    DoneUsage,
    EngineError,
    EngineResult,
    ErrorPayload,
    EventType,
    Grants,
    InitMetadata,
    InitPayload,
    InputTokenUsage,
    Limits,
    OutputTokenUsage,
    ParallelTask,
    PermissionAnswerPayload,
    PermissionHandler,
    PermissionRequest,
    PermissionRequestPayload,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
    PricedUsageUnit,
    ResultStatus,
    RunOptions,
    RunRecord,
    RunStatus,
    TextDeltaPayload,
    TextPayload,
    ThinkingPayload,
    TokenUsage,
    TokenUsageReport,
    ToolResultPayload,
    ToolUsePayload,
    Trust,
    Usage,
    UsageCost,
    UsageCostSource,
    UsageCoverage,
    UsageRecord,
    Workspace,
    WorkspaceMode,
)

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_MAX_BUFFERED",
    "AdapterInfo",
    "AdapterNeeds",
    "AgentEvent",
    "Approval",
    "ApprovalAnswer",
    "ApprovalKind",
    "ApprovalRequest",
    "Ask",
    "DoneMetadata",
    "DonePayload",
    "DoneUsage",
    "EngineError",
    "EngineResult",
    "ErrorPayload",
    "EventStream",
    "EventType",
    "Grants",
    "InitMetadata",
    "InitPayload",
    "InputTokenUsage",
    "Limits",
    "MoatClient",
    "MoatConnectionError",
    "MoatError",
    "OutputTokenUsage",
    "ParallelTask",
    "PermissionAnswerPayload",
    "PermissionHandler",
    "PermissionRequest",
    "PermissionRequestPayload",
    "PermissionResult",
    "PermissionResultAllow",
    "PermissionResultDeny",
    "PricedUsageUnit",
    "ResultStatus",
    "RunAgentStream",
    "RunOptions",
    "RunParallelStream",
    "RunRecord",
    "RunStatus",
    "TextDeltaPayload",
    "TextPayload",
    "ThinkingPayload",
    "TokenUsage",
    "TokenUsageReport",
    "ToolResultPayload",
    "ToolUsePayload",
    "Trust",
    "Usage",
    "UsageCost",
    "UsageCostSource",
    "UsageCoverage",
    "UsageRecord",
    "Workspace",
    "WorkspaceMode",
    "is_agent_event",
]
