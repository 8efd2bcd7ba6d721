"""The protocol's shapes (protocol/moat-protocol.schema.json) as TypedDicts.

They describe the JSON objects the server sends and accepts; at run time
they are plain dicts. Keys keep the protocol's camelCase spelling.
"""

from __future__ import annotations

from typing import Any, Literal, TypedDict

__all__ = [
    "AdapterInfo",
    "AdapterNeeds",
    "AgentEvent",
    "EngineError",
    "EngineResult",
    "EventType",
    "Grants",
    "Limits",
    "ResultStatus",
    "RunOptions",
    "RunRecord",
    "RunStatus",
    "Trust",
    "Usage",
]

EventType = Literal[
    "init",
    "text",
    "text_delta",
    "thinking",
    "tool_use",
    "tool_result",
    "permission_request",
    "error",
    "done",
]
"""The kinds of event of the Unified Event Stream; an extension event's
`type` is its own `vendor:name` instead."""

ResultStatus = Literal["success", "error", "interrupted", "max_turns", "max_budget"]
"""How a run ended (an EngineResult's and a `done` payload's `status`)."""

RunStatus = Literal["pending", "running", "completed", "failed"]
"""A run record's status."""

Trust = Literal["sandbox", "controlled", "unrestricted"]
"""The backend's own switches for a run."""


class _AgentEventRequired(TypedDict):
    #: An :data:`EventType`, or an extension event's `vendor:name`.
    type: str
    agent: str
    timestamp: int
    payload: dict[str, Any]


class AgentEvent(_AgentEventRequired, total=False):
    """One event of a run, as `moat run --output ndjson` prints it (cligent's
    AgentEvent): `{type, agent, timestamp, sessionId, payload}`."""

    sessionId: str
    role: str


class Usage(TypedDict, total=False):
    """What a run used; each figure present only when known."""

    inputTokens: int
    outputTokens: int
    cacheReadTokens: int
    cacheWriteTokens: int
    costUsd: float
    costSource: str
    durationMs: int
    turns: int
    toolUses: int


class _EngineErrorRequired(TypedDict):
    message: str


class EngineError(_EngineErrorRequired, total=False):
    """Why a run failed, when it said so."""

    code: str


class _EngineResultRequired(TypedDict):
    status: ResultStatus
    usage: Usage


class EngineResult(_EngineResultRequired, total=False):
    """The engine contract's result of a run."""

    text: str
    sessionId: str
    resumeToken: str
    error: EngineError


class Grants(TypedDict, total=False):
    """What a run may reach, as the `--allow-*` flags take it (directories
    absolute). A request's grants may only narrow the server's allowance."""

    net: list[str]
    read: list[str]
    write: list[str]
    env: list[str]
    run: list[str]


class Limits(TypedDict, total=False):
    """A run's limits."""

    timeoutMs: int
    fuel: int
    maxMemoryBytes: int
    maxEventBytes: int


class RunOptions(TypedDict, total=False):
    """RunOptions (camelCase). Any other key the server knows may be passed
    in a plain dict too."""

    cwd: str
    model: str
    maxTurns: int
    maxBudgetUsd: float
    effort: str
    systemPrompt: str
    allowedTools: list[str]
    disallowedTools: list[str]
    resume: str
    extra: dict[str, Any]
    directories: list[str]
    mcpServers: dict[str, Any]
    agents: dict[str, Any]


class _RunRecordRequired(TypedDict):
    id: str
    adapter: str
    status: RunStatus
    prompt: str
    grants: Grants
    createdMs: int


class RunRecord(_RunRecordRequired, total=False):
    """A run's record (as `moat show --json`); `result` is None until it
    ended."""

    parent: str | None
    reason: str | None
    options: dict[str, Any]
    trust: Trust | None
    limits: dict[str, Any] | None
    worker: str | None
    startedMs: int | None
    endedMs: int | None
    timeoutMs: int | None
    ownerPid: int | None
    componentSha256: str | None
    done: dict[str, Any] | None
    result: EngineResult | None


class AdapterNeeds(TypedDict, total=False):
    """What an adapter declares it needs."""

    env: list[str]
    hosts: list[str]
    programs: list[str]


class _AdapterInfoRequired(TypedDict):
    name: str
    version: str
    description: str
    contract: str
    sha256: str
    needs: AdapterNeeds
    builtIn: bool


class AdapterInfo(_AdapterInfoRequired, total=False):
    """An adapter's description; `allowed` (from `inspect`) is the most a
    run of it may be granted by this server."""

    allowed: Grants
