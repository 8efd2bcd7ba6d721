"""`ask-py`: a test adapter that asks the run's user before made-up tool
calls, through the SDK's `request_approval` (the contract's
`request-approval`, 0.4.0), and says what it was answered
(tests/all/sdk_python.rs). Each line of the prompt is one probe:

- `TOOL INPUT`: asks about a call `call-N` (N: the line's number, from 1)
  of TOOL with INPUT, parsed as JSON, reported as `ok: allowed`,
  `denied: <message>` or `invalid: <why the SDK refused the request>`;
  answered "interrupted", the run ends with `done` interrupted;
- `ask-tools`: the tools the run puts under `ask`, as `ask-tools: A,B`
  (`ask_tools()`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from moat_adapter import (
    ApprovalBehavior,
    DoneStatus,
    Event,
    Options,
    adapter_info,
    ask_tools,
    define_adapter,
    events,
    request_approval,
)


def run(prompt: str, options: Options) -> Iterator[Event]:
    """One probe per line of the prompt."""
    yield events.init(model="ask", cwd=options.cwd)
    lines = [line for line in prompt.split("\n") if line.strip()]
    for number, line in enumerate(lines, start=1):
        if line.strip() == "ask-tools":
            yield events.text("ask-tools: " + ",".join(ask_tools()))
            continue
        tool, _, text = line.partition(" ")
        try:
            answer = request_approval(
                tool, f"call-{number}", json.loads(text or "{}"), reason="the ask-py test adapter asks"
            )
        except (TypeError, ValueError) as error:
            yield events.text(f"invalid: {error}")
            continue
        if answer.behavior is ApprovalBehavior.INTERRUPTED:
            yield events.done(DoneStatus.INTERRUPTED)
            return
        yield events.text("ok: allowed" if answer.allowed else f"denied: {answer.message}")
    yield events.done()


Adapter = define_adapter(
    adapter_info("ask-py", "0.1.0", "Test adapter: asks before made-up tool calls and says what it was answered"),
    run,
)
