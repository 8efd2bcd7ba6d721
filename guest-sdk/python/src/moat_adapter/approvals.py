"""Asking the run's user before a tool call (`moat run --ask`, docs/approvals.md).

A thin layer over the contract's `approvals` import (0.4.0):
`request_approval` blocks until the answer comes, and the user sees the
request as a `permission_request` event. `ask_tools()` names the tools the
run puts under `ask` (`--ask-tools`), whose every call an adapter asks about
first. An answer grants nothing: it only says whether to make the call. A
run started without `--ask` has nobody to ask and is answered "deny" at once.

    if call.name in ask_tools():
        answer = request_approval(call.name, call.id, call.arguments, reason="the model asks")
        if answer.behavior is ApprovalBehavior.INTERRUPTED:
            yield events.done(DoneStatus.INTERRUPTED)
            return
        if not answer.allowed:
            ...  # tell the model: answer.message
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from typing import Any, Optional

from ._bindings import moat_approvals

#: The variable naming, comma-separated, the tools to ask about before each
#: call (`--ask-tools`). The host sets it; an adapter need not declare it.
ASK_TOOLS_VARIABLE = "MOAT_ASK_TOOLS"


class ApprovalBehavior(Enum):
    """What the answer says to do."""

    #: Make the call.
    ALLOW = "allow"
    #: Do not make it; tell the backend the call was denied (`message` says why).
    DENY = "deny"
    #: The run was aborted while waiting: end with `done` interrupted.
    INTERRUPTED = "interrupted"


@dataclass(frozen=True)
class Approval:
    """The answer to a `request_approval`."""

    behavior: ApprovalBehavior
    #: Who refused and why, when denied; None otherwise.
    message: Optional[str] = None

    @property
    def allowed(self) -> bool:
        """Whether to make the call."""
        return self.behavior is ApprovalBehavior.ALLOW


def request_approval(
    tool_name: str,
    tool_use_id: str,
    input: Mapping[str, Any],
    reason: Optional[str] = None,
) -> Approval:
    """Asks the run's user whether to make the call `tool_use_id` of
    `tool_name` with `input` (its arguments, a JSON object), and waits for
    the answer (no code of the adapter runs meanwhile; the run reads
    `waiting`).

    Raises `TypeError` or `ValueError` when the request is not one: a tool
    name or call id that is not a non-empty string, an input that is not a
    mapping with string keys or has no JSON form."""
    for name, value in (("tool_name", tool_name), ("tool_use_id", tool_use_id)):
        if not isinstance(value, str):
            raise TypeError(f"{name} must be a string, not {type(value).__name__}")
        if not value:
            raise ValueError(f"{name} must not be empty")
    if not isinstance(input, Mapping):
        raise TypeError(f"input must be a JSON object (a mapping), not {type(input).__name__}")
    for key in input:
        if not isinstance(key, str):
            raise TypeError(f"input's keys must be strings, not {type(key).__name__}")
    if reason is not None and not isinstance(reason, str):
        raise TypeError(f"reason must be a string, not {type(reason).__name__}")
    try:
        # Strict JSON: no NaN or infinities, which the host would refuse.
        text = json.dumps(dict(input), allow_nan=False, ensure_ascii=False)
    except (TypeError, ValueError) as error:
        raise ValueError(f"input is not JSON: {error}") from None
    answer = moat_approvals.request_approval(
        moat_approvals.ApprovalRequest(tool_name=tool_name, tool_use_id=tool_use_id, input=text, reason=reason)
    )
    if isinstance(answer, moat_approvals.Approval_Allow):
        return Approval(ApprovalBehavior.ALLOW)
    if isinstance(answer, moat_approvals.Approval_Deny):
        return Approval(ApprovalBehavior.DENY, answer.value)
    return Approval(ApprovalBehavior.INTERRUPTED)


def ask_tools() -> list[str]:
    """The tools the run asks about before each call (empty: none, or the
    run does not ask). An adapter whose backend cannot ask should refuse a
    run that names any (`Refused`), rather than let them run unasked."""
    return parse_tool_list(os.environ.get(ASK_TOOLS_VARIABLE))


def parse_tool_list(text: Optional[str]) -> list[str]:
    """The tool names in the variable's value `text`, comma-separated."""
    return [tool.strip() for tool in (text or "").split(",") if tool.strip()]
