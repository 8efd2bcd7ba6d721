"""The protocol's shapes (protocol/moat-protocol.schema.json) as TypedDicts.

They describe the JSON objects the server sends and accepts; at run time
they are plain dicts. Keys keep the protocol's camelCase spelling. At the
end, the permission handler's shapes (dataclasses), which `_permissions`
answers with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

__all__ = [
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
    "EventType",
    "Grants",
    "InitMetadata",
    "InitPayload",
    "InputTokenUsage",
    "Limits",
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
    "RunOptions",
    "RunRecord",
    "RunStatus",
    "RunTraffic",
    "TextDeltaPayload",
    "TextPayload",
    "ThinkingPayload",
    "TokenUsage",
    "TokenUsageReport",
    "ToolResultPayload",
    "ToolUsePayload",
    "TrafficOverflow",
    "TrafficRow",
    "TrafficUsage",
    "Trust",
    "Usage",
    "UsageCost",
    "UsageCostSource",
    "UsageCount",
    "UsageCoverage",
    "UsageRecord",
    "WorkflowState",
    "WorkflowStatus",
    "WorkflowStatusResult",
    "WorkflowTaskState",
    "WorkflowTaskStatus",
    "Workspace",
    "WorkspaceMode",
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

RunStatus = Literal["pending", "running", "waiting", "completed", "failed"]
"""A run record's status; `waiting`: running, with a request open for an
answer (docs/approvals.md)."""

ApprovalKind = Literal["tool", "net", "run", "read", "write", "secret"]
"""What a run may ask for."""

Trust = Literal["sandbox", "controlled", "unrestricted"]
"""The backend's own switches for a run."""

WorkflowStatus = Literal["running", "completed", "failed", "cancelled"]
"""How a workflow stands, in its state file (`running` also after a crash)."""

WorkflowTaskStatus = Literal["PENDING", "RUNNING", "COMPLETED", "FAILED"]
"""How one of a workflow's tasks stands, in its state file."""

WorkspaceMode = Literal["worktree", "copy"]
"""How a run's workspace is made: `worktree`, a git worktree of the project
(on a branch `moat/RUN`); `copy`, a copy of its directory (reflinked where
the filesystem can), for projects without git."""


class _AgentEventRequired(TypedDict):
    #: An :data:`EventType`, or an extension event's `vendor:name`.
    type: str
    #: The adapter's registered name.
    agent: str
    #: Milliseconds since the Unix epoch.
    timestamp: int
    sessionId: str
    #: The event's payload: its type's (:class:`InitPayload`,
    #: :class:`DonePayload`, …; `typing.cast` to read it typed), an
    #: extension event's its own object.
    payload: dict[str, Any]


class AgentEvent(_AgentEventRequired, total=False):
    """One event of a run, as `moat run --output ndjson` prints it: exactly
    cligent's `CligentEvent`, `{type, agent, timestamp, sessionId, role?,
    metadata?, payload}`.

    `role` is the task's in a parallel run (absent otherwise); `metadata`
    is cligent's `BaseEvent.metadata`: an `init`'s holds moat's additions
    (:class:`InitMetadata`), a `done`'s the adapter's details
    (:class:`DoneMetadata`)."""

    role: str
    metadata: dict[str, Any]


class _InitPayloadRequired(TypedDict):
    #: The model the backend uses; `"unknown"` when nobody knows.
    model: str
    #: The backend's working directory.
    cwd: str
    #: The tools the backend offers in this session.
    tools: list[str]


class InitPayload(_InitPayloadRequired, total=False):
    """An `init` event's payload (cligent's `InitPayload`)."""

    capabilities: dict[str, Any]


class InitMetadata(TypedDict, total=False):
    """moat's additions to an `init` event, in its `metadata` (never in its
    payload)."""

    #: The run's id in moat's run store (`r_…`), when the run is recorded.
    runId: str
    #: How the programs the run starts are contained (`namespaces`,
    #: `landlock+seccomp`, `off`, …); absent for a run that may start none.
    containment: str


class TextPayload(TypedDict):
    """A `text` event's payload: a complete piece of assistant text."""

    content: str


class TextDeltaPayload(TypedDict):
    """A `text_delta` event's payload: a streamed fragment."""

    delta: str


class ThinkingPayload(TypedDict):
    """A `thinking` event's payload."""

    summary: str


class _ToolUsePayloadRequired(TypedDict):
    toolName: str
    toolUseId: str
    input: dict[str, Any]


class ToolUsePayload(_ToolUsePayloadRequired, total=False):
    """A `tool_use` (or `permission_request`, with `reason` instead of
    `description`) event's payload."""

    description: str


class PermissionRequestPayload(_ToolUsePayloadRequired, total=False):
    """A `permission_request` event's payload: cligent's (`toolName`,
    `toolUseId`, `input`, `reason`) with moat's `requestId` (the request's
    number in its run, as a string; absent for a request the adapter only
    reports, its backend having asked and answered itself) and `kind`.
    `toolName` is `moat:KIND` for a grant, the tool's own for a tool call."""

    reason: str
    requestId: str
    kind: ApprovalKind


class PermissionAnswerPayload(TypedDict):
    """A `moat:permission_answer` event's payload: a request of the run was
    answered."""

    requestId: str
    decision: Literal["approved", "approved always", "denied"]
    approved: bool
    always: bool
    by: str
    reason: str | None


class _ToolResultPayloadRequired(TypedDict):
    toolUseId: str
    toolName: str
    status: Literal["success", "error", "denied"]
    #: Any JSON value (a string for plain text).
    output: Any


class ToolResultPayload(_ToolResultPayloadRequired, total=False):
    """A `tool_result` event's payload."""

    durationMs: int


class _ErrorPayloadRequired(TypedDict):
    message: str
    #: Whether the run goes on after it.
    recoverable: bool


class ErrorPayload(_ErrorPayloadRequired, total=False):
    """An `error` event's payload."""

    code: str


UsageCoverage = Literal["complete", "partial"]
"""Whether a token report covers every model request of the run."""

UsageCostSource = Literal["provider-reported", "agent-estimate", "account-estimate"]
"""Where a cost comes from (cligent's words, DR-014): the vendor reported it,
the agent (or adapter) estimated it, or moat computed it from the prices the
user gave (`--price-table`)."""


class _InputTokenUsageRequired(TypedDict):
    #: All input tokens, every reported cache tier included.
    total: int


class InputTokenUsage(_InputTokenUsageRequired, total=False):
    """Input tokens: the inclusive total and the exact subsets reported (an
    absent detail is unreported, a present zero measured)."""

    uncached: int
    cacheRead: int
    cacheWrite: int


class _OutputTokenUsageRequired(TypedDict):
    #: All output, reasoning included.
    total: int


class OutputTokenUsage(_OutputTokenUsageRequired, total=False):
    """Output tokens: the inclusive total and the exact subsets reported."""

    visible: int
    reasoning: int


class TokenUsage(TypedDict):
    """Inclusive token totals (cligent's `TokenUsage`)."""

    input: InputTokenUsage
    output: OutputTokenUsage


class UsageCost(TypedDict):
    """What a run cost, as reported (cligent's `UsageCost`); never made up."""

    amount: float
    currency: Literal["USD"]
    source: UsageCostSource


class PricedUsageUnit(TypedDict):
    """A separately priced non-token unit."""

    name: str
    quantity: float


class _UsageRecordRequired(TypedDict):
    tokens: TokenUsage


class UsageRecord(_UsageRecordRequired, total=False):
    """One rate-card group of a run's work (cligent's `UsageRecord`)."""

    model: str
    provider: str
    requests: int
    cost: UsageCost
    pricedUnits: list[PricedUsageUnit]


class _TokenUsageReportRequired(TypedDict):
    coverage: UsageCoverage
    totals: TokenUsage


class TokenUsageReport(_TokenUsageReportRequired, total=False):
    """A run's tokens exactly as the backend reported them (cligent's
    `TokenUsageReport`)."""

    records: list[UsageRecord]


class _UsageRequired(TypedDict):
    #: Distinct tool calls observed in the run.
    toolUses: int


class Usage(_UsageRequired, total=False):
    """What a run used: cligent's `DoneUsage`, in a `done` payload and as an
    :class:`EngineResult`'s `usage` alike. `tokens` and `cost` are absent
    when the backend did not report them."""

    tokens: TokenUsageReport
    cost: UsageCost


DoneUsage = Usage
"""cligent's name for :class:`Usage`."""


class _DonePayloadRequired(TypedDict):
    status: ResultStatus
    usage: Usage
    durationMs: int


class DonePayload(_DonePayloadRequired, total=False):
    """A `done` event's payload (cligent's `DonePayload`); the adapter's
    details are the event's `metadata` (:class:`DoneMetadata`)."""

    #: The final answer.
    result: str
    resumeToken: str


class DoneMetadata(TypedDict, total=False):
    """The adapter's details about a run, in its `done` event's `metadata`
    (any other keys too)."""

    #: The turns the run took, when the adapter counted them.
    turns: int


class _EngineErrorRequired(TypedDict):
    message: str


class EngineError(_EngineErrorRequired, total=False):
    """Why a run failed, when it said so."""

    code: str


class _EngineResultRequired(TypedDict):
    status: ResultStatus
    #: Exactly the `usage` of the run's `done`.
    usage: Usage


class EngineResult(_EngineResultRequired, total=False):
    """The engine contract's result of a run: what `moat run -o json` prints
    and `await` answers."""

    #: The final answer.
    text: str
    sessionId: str
    resumeToken: str
    #: The run's id in moat's run store, when it is recorded.
    runId: str
    #: How long the run took, in milliseconds.
    durationMs: int
    #: The turns the run took, when the adapter counted them.
    turns: int
    error: EngineError


class Grants(TypedDict, total=False):
    """What a run may reach, as the `--allow-*` flags take it (directories
    absolute). A request's grants may only narrow the server's allowance."""

    net: list[str]
    read: list[str]
    write: list[str]
    env: list[str]
    run: list[str]
    #: `HOST[:PORT]=openai|anthropic|gemini`: requests there are model
    #: calls whose usage moat reads from their answers (besides the
    #: vendors' own hosts); a rule grants no destination.
    meter: list[str]
    #: Under a budget in tokens or dollars, the run's programs may still
    #: make model calls moat cannot read (a tunnel to a model API's host).
    unmetered: bool


class Limits(TypedDict, total=False):
    """A run's limits."""

    timeoutMs: int
    fuel: int
    maxMemoryBytes: int
    maxEventBytes: int
    #: The most tokens the run (with its children) may use; its budget in
    #: dollars is `options["maxBudgetUsd"]`.
    maxTokens: int


class Ask(TypedDict, total=False):
    """A run that asks for what its grants do not cover (a host, a program,
    a tool call) instead of being refused (docs/approvals.md): it emits a
    `permission_request` and waits (status `waiting`) until a client
    answers (:meth:`MoatClient.approve`, :meth:`MoatClient.deny`, a handler
    of :meth:`MoatClient.on_permission_request`), `moat approve|deny`, or
    the timeout denies it. `{}` asks with the default timeout (10 minutes)."""

    #: Denied after this long unanswered (default 10 minutes).
    timeoutMs: int
    #: Wait as long as the run lasts (no `timeoutMs` with it).
    noTimeout: bool
    #: Tools whose calls the run's agent asks about first (Claude Code's
    #: permission prompts).
    tools: list[str]


class _ApprovalRequestRequired(TypedDict):
    kind: ApprovalKind
    #: Why it asks, in the words of whoever raised it.
    reason: str


class ApprovalRequest(_ApprovalRequestRequired, total=False):
    """What a request asks for: its `kind`, with what it names."""

    #: `net`: the host, as the run named it, and the port.
    host: str
    port: int
    #: `run`: the program, as the run named it.
    program: str
    #: `read`, `write`: the directory.
    dir: str
    #: `tool`: the tool; `secret`: the secret.
    name: str
    #: `tool`: the call's id and arguments.
    toolUseId: str
    input: dict[str, Any]


class _ApprovalAnswerRequired(TypedDict):
    approved: bool
    #: Also every later request of the run for the same host, program,
    #: directory or tool.
    always: bool
    #: Who or what answered: `a client of moat serve (pid N)`, `moat
    #: approve (pid N, user)`, `the approval timeout (10m)`, …
    by: str
    #: When (ms since the Unix epoch).
    atMs: int


class ApprovalAnswer(_ApprovalAnswerRequired, total=False):
    """How a request was answered."""

    #: Why (a denial's reason), as the one who answered said it.
    reason: str


class Approval(TypedDict):
    """A run's request for approval (the protocol's `approval`), and its
    answer once it has one."""

    #: Its number in its run, from 1 (a `permission_request`'s `requestId`).
    number: int
    request: ApprovalRequest
    #: When it was asked (ms since the Unix epoch).
    askedMs: int
    #: None while it is open.
    answer: ApprovalAnswer | None


class TrafficUsage(TypedDict):
    """A model call's usage, as moat read it from its answer."""

    inputTokens: int
    outputTokens: int


class _TrafficRowRequired(TypedDict):
    #: When it started (ms since the Unix epoch).
    at: int
    #: `component`: its `wasi:http` requests; `program`: a program's,
    #: through the run's proxy.
    who: Literal["component", "program"]
    #: `tunnel`: a program's `CONNECT`, opaque to moat; `secret_route`: a
    #: request on a secret's route.
    kind: Literal["request", "tunnel", "secret_route"]
    scheme: Literal["http", "https"]
    host: str
    port: int
    #: Bytes of the request's body (a tunnel's: everything).
    sent: int
    #: Bytes of the answer's body (a tunnel's: everything).
    received: int
    #: How long it took, in milliseconds.
    ms: int


class TrafficRow(_TrafficRowRequired, total=False):
    """One request or connection a run made through moat (a
    `moat:traffic` event's payload); a key is absent when it does not
    apply. Never a body, a header's value or a URL's query."""

    #: A program's process id as the host sees it, and its name, when
    #: moat made its connection (the run's own network).
    pid: int
    program: str
    #: `secret_route`: the secret whose route it took.
    secret: str
    #: The request's method and its path without the query (not for a
    #: tunnel).
    method: str
    path: str
    #: The grant that allowed it, `approved`, or `own loopback`.
    allowedBy: str
    #: Why it was refused.
    refused: str
    #: `host:port`: the `net` grant that would allow it.
    wouldAllow: str
    #: True: `grants.unmetered` would allow it.
    unmetered: bool
    #: The answer's status.
    status: int
    #: Why it failed after it was allowed.
    error: str
    #: A model call: whose API, the model its answer named, and what it
    #: used.
    vendor: Literal["openai", "anthropic", "gemini"]
    model: str
    usage: TrafficUsage


class _UsageCountRequired(TypedDict):
    calls: int
    inputTokens: int
    outputTokens: int


class UsageCount(_UsageCountRequired, total=False):
    """What one source says a run's model calls used."""

    #: Calls whose usage could not be read (a tunnel, an answer without
    #: usage); absent when none.
    usageUnknown: int


class TrafficOverflow(TypedDict):
    """What a run did past the rows kept, at one destination."""

    allowed: int
    refused: int
    sent: int
    received: int


class _RunTrafficRequired(TypedDict):
    #: Its rows, oldest first: at most 1,000.
    rows: list[TrafficRow]
    #: Its model calls as moat read them from the answers it carried.
    metered: UsageCount
    #: As its adapter reported them (`moat:usage` events, or its `done`'s
    #: totals).
    reported: UsageCount


class RunTraffic(_RunTrafficRequired, total=False):
    """A run's traffic through moat (:meth:`MoatClient.traffic`)."""

    #: Past the 1,000 rows kept, what more it did per `host:port`; absent
    #: unless it did.
    overflow: dict[str, TrafficOverflow]


class _WorkspaceRequired(TypedDict):
    mode: WorkspaceMode


class Workspace(_WorkspaceRequired, total=False):
    """A workspace of the run's own (docs/workspaces.md), of the project at
    `options["cwd"]` (absolute, and granted to the run): the run works there
    and may write only it. :meth:`MoatClient.diff` shows what it changed
    against its base, :meth:`MoatClient.apply` applies that to the
    project."""

    #: What a worktree starts from (a git ref; `HEAD` when absent).
    base: str
    #: Carry the project's uncommitted changes into a worktree (else a
    #: dirty project is refused).
    includeDirty: bool


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
    #: The part it plays among its siblings: a workflow task's run has its
    #: task's id.
    role: str | None
    options: dict[str, Any]
    trust: Trust | None
    limits: dict[str, Any] | None
    worker: str | None
    startedMs: int | None
    endedMs: int | None
    timeoutMs: int | None
    ownerPid: int | None
    componentSha256: str | None
    #: The payload of the run's `done`, once it ended.
    done: DonePayload | None
    result: EngineResult | None
    #: Its requests for approval, oldest first, with their answers (`get`
    #: only).
    requests: list[Approval]


class _WorkflowTaskStateRequired(TypedDict):
    status: WorkflowTaskStatus
    #: When its first attempt started (RFC 3339).
    started_at: str | None
    #: When it completed or failed (RFC 3339).
    completed_at: str | None
    #: The files it produced.
    outputs: list[str]
    #: Loop iterations done (1 for a task without a loop, once done).
    iterations: int
    #: The current attempt of its current iteration.
    attempts: int
    #: The run records of its attempts, oldest first, each listed once its
    #: attempt ended.
    runs: list[str]
    #: Tokens and cost of all its attempts.
    usage: Usage
    #: Wall time of all its attempts, in milliseconds.
    duration_ms: int


class WorkflowTaskState(_WorkflowTaskStateRequired, total=False):
    """One task's state in a workflow's state file (its keys as the file
    writes them, snake_case)."""

    #: What it hands over to the tasks after it.
    handover: dict[str, Any]
    #: Why it failed, or why it runs again.
    error: str
    #: The task whose failure keeps it from running.
    blocked_by: str
    #: The run of its attempt in flight.
    run: str


class WorkflowState(TypedDict):
    """A workflow's state file (`.moat/workflows/NAME/state.json` in its
    project), as `moat workflow status -o json` prints it: its keys as the
    file writes them, snake_case."""

    #: The state file's format.
    version: str
    #: The workflow's name.
    workflow: str
    #: Its project directory (the workflow file's).
    project: str
    status: WorkflowStatus
    #: Each task's state, by task id.
    tasks: dict[str, WorkflowTaskState]
    #: The workflow's own run records, oldest first (each start or resume
    #: adds one).
    runs: list[str]
    #: When it was first started (RFC 3339).
    started_at: str
    #: When its latest run ended (RFC 3339).
    ended_at: str | None
    #: SHA-256 of the workflow file it was started with.
    file_sha256: str


class WorkflowStatusResult(TypedDict):
    """What :meth:`MoatClient.workflow_status` answers: the workflow's name
    (its file's `name`) and its state here, None when it has not run
    here."""

    workflow: str
    state: WorkflowState | None


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


class _ParallelTaskRequired(TypedDict):
    #: The adapter: a built-in's name, an installed adapter's, or a
    #: component's path.
    adapter: str
    prompt: str


class ParallelTask(_ParallelTaskRequired, total=False):
    """One task of :meth:`MoatClient.run_parallel` (cligent's
    `ParallelTask`, with the adapter by name): `options`, `trust`,
    `grants`, `limits`, `parent`, `workspace` and `ask` are
    :meth:`MoatClient.run`'s; `on_permission_request` answers the task's
    permission requests (as :meth:`MoatClient.run_agent`'s)."""

    #: Set as `role` on every event of this task; absent: no role.
    role: str
    options: RunOptions | Mapping[str, Any]
    trust: Trust
    grants: Grants
    limits: Limits
    parent: str
    workspace: Workspace
    ask: Ask
    #: Answers this task's permission requests, before the client's own
    #: handler; implies `ask` `{}` when the task has no `ask`.
    on_permission_request: PermissionHandler
    #: Setting it cancels every task (as run_parallel's own `cancel_event`).
    cancel_event: asyncio.Event


@dataclass(frozen=True)
class PermissionRequest:
    """A run's open request for approval, as a :data:`PermissionHandler`
    gets it."""

    #: The request's number in its run, as the event gives it (`"1"`):
    #: `moat approve RUN 1`.
    request_id: str
    #: The same number, as :meth:`MoatClient.approve`'s `request` takes it.
    number: int
    #: What it asks for: `net` (a host), `run` (a program), `tool` (a tool
    #: call), …
    kind: ApprovalKind
    #: `moat:KIND` for a grant (`moat:net`), the tool's own for a tool call.
    tool_name: str
    #: `moat-request-N` for a grant, the call's id for a tool call.
    tool_use_id: str
    #: What it names: `{"host", "port"}`, `{"program"}`, the tool call's
    #: arguments, …
    input: dict[str, Any]
    #: Why it asks (`net access to http://127.0.0.1:8765: not granted`).
    reason: str | None
    #: The `permission_request` event itself.
    event: AgentEvent = field(repr=False)


@dataclass(frozen=True)
class PermissionResultAllow:
    """Allow the request; with `always`, also every later request of the
    run for the same host, program, directory or tool."""

    always: bool = False
    behavior: Literal["allow"] = "allow"


@dataclass(frozen=True)
class PermissionResultDeny:
    """Deny the request; `message` says why (the run's `CAPABILITY_DENIED`
    error and its record give it)."""

    message: str | None = None
    behavior: Literal["deny"] = "deny"


PermissionResult = PermissionResultAllow | PermissionResultDeny
"""A handler's decision (the shape of `can_use_tool`'s result)."""

PermissionHandler = Callable[
    [str, PermissionRequest],
    PermissionResult | None | Awaitable[PermissionResult | None],
]
"""Decides a run's request, given the run's id and the request: a plain
function or a coroutine function. Its decision is sent as `approve` /
`deny`; None leaves the request open for someone else (another client,
`moat approve`, the approval timeout). One that raises denies the request
(logged on the `moat_client` logger). A coroutine is cancelled once its
answer is no longer wanted: someone else answered first, the run ended, or
the connection closed."""
