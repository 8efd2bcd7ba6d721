"""run_parallel (cligent's runParallel) against the real `moat serve`: one
merged stream of several runs, each event with its task's role; cancelling,
refusals, leaving early. And cligent's event guard."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Awaitable
from typing import Any, TypeVar

import pytest
from conftest import COOPERATIVE, PATIENCE

from moat_client import (
    AgentEvent,
    MoatClient,
    MoatConnectionError,
    MoatError,
    ParallelTask,
    is_agent_event,
)

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


def of_role(events: list[AgentEvent], role: str | None) -> list[AgentEvent]:
    return [e for e in events if e.get("role") == role]


async def collect(client: MoatClient, tasks: list[ParallelTask], **kwargs: Any) -> list[AgentEvent]:
    async def run() -> list[AgentEvent]:
        return [e async for e in client.run_parallel(tasks, **kwargs)]

    return await within(run())


async def test_run_parallel_merges_the_tasks_each_event_with_its_role(client: MoatClient) -> None:
    events = await collect(
        client,
        [
            {"adapter": "echo", "prompt": "one", "role": "first"},
            {"adapter": "echo", "prompt": "two", "role": "second", "options": {"model": "m2"}},
            {"adapter": "echo", "prompt": "three"},
        ],
    )
    assert len(events) == 12, [(e.get("role"), e["type"]) for e in events]
    for role, text in (("first", "one"), ("second", "two"), (None, "three")):
        mine = of_role(events, role)
        assert [e["type"] for e in mine] == ["init", "text_delta", "text", "done"], role
        assert mine[-1]["payload"]["result"] == text
        assert mine[-1]["payload"]["status"] == "success"
        assert all(e["agent"] == "echo" and e["sessionId"] == mine[0]["sessionId"] for e in mine)
    # A task without a role: its events have none.
    assert all("role" not in e for e in of_role(events, None))
    # The role sits where `moat parallel` prints it: before the payload.
    keys = list(of_role(events, "first")[0])
    assert keys.index("role") < keys.index("payload"), keys
    records = await client.list()
    assert sorted(r["prompt"] for r in records) == ["one", "three", "two"]
    assert next(r for r in records if r["prompt"] == "two")["options"]["model"] == "m2"
    # No tasks, no events.
    assert await collect(client, []) == []


async def test_run_parallel_cancel_event_cancels_every_run(client: MoatClient) -> None:
    cancel = asyncio.Event()
    stream = client.run_parallel(
        [
            {"adapter": COOPERATIVE, "prompt": "go", "role": "a"},
            {"adapter": COOPERATIVE, "prompt": "go", "role": "b"},
        ],
        cancel_event=cancel,
    )
    events: list[AgentEvent] = []

    async def read() -> None:
        async for event in stream:
            events.append(event)
            if of_role(events, "a") and of_role(events, "b"):
                cancel.set()

    await within(read())
    for role in ("a", "b"):
        mine = of_role(events, role)
        dones = [e for e in mine if e["type"] == "done"]
        assert len(dones) == 1, role
        assert mine[-1] is dones[0]
        assert dones[0]["payload"]["status"] == "interrupted"
    assert all(run is not None for run in stream.run_ids)
    for run in stream.run_ids:
        assert run is not None
        assert (await client.get(run))["reason"] == "cancelled"


async def test_a_task_cancel_event_set_before_the_start_starts_no_run(client: MoatClient) -> None:
    cancel = asyncio.Event()
    cancel.set()
    events = await collect(
        client,
        [
            {"adapter": "echo", "prompt": "x", "role": "a", "options": {"resume": "tok"}},
            {"adapter": "echo", "prompt": "y", "role": "b", "cancel_event": cancel},
        ],
    )
    assert [(e.get("role"), e["type"], e["payload"]["status"]) for e in events] == [
        ("a", "done", "interrupted"),
        ("b", "done", "interrupted"),
    ]
    assert events[0]["payload"]["resumeToken"] == "tok"
    assert events[0]["payload"]["usage"] == {"toolUses": 0}
    assert await client.list() == []


async def test_a_refused_task_fails_alone(client: MoatClient) -> None:
    events = await collect(
        client,
        [
            {"adapter": "no-such-adapter", "prompt": "x", "role": "unknown"},
            {"adapter": "echo", "prompt": "x", "role": "beyond", "grants": {"env": ["PATH"]}},
            {"adapter": "echo", "prompt": "fine", "role": "fine"},
        ],
    )
    for role, code in (("unknown", "NOT_FOUND"), ("beyond", "BOUNDARY_VIOLATION")):
        mine = of_role(events, role)
        assert [e["type"] for e in mine] == ["error", "done"], role
        assert mine[0]["payload"]["code"] == code
        assert mine[0]["payload"]["recoverable"] is False
        assert mine[0]["payload"]["message"]
        assert mine[1]["payload"]["status"] == "error"
        assert mine[0]["sessionId"] == mine[1]["sessionId"]
    assert of_role(events, "fine")[-1]["payload"]["result"] == "fine"


async def test_leaving_run_parallel_early_cancels_every_run(client: MoatClient) -> None:
    stream = client.run_parallel(
        [
            {"adapter": COOPERATIVE, "prompt": "go", "role": "a"},
            {"adapter": COOPERATIVE, "prompt": "go", "role": "b"},
        ]
    )
    async with stream:
        first = await within(stream.__anext__())
        assert first["type"] == "text_delta"
    # Both runs were started (the second perhaps after the loop was left).
    records: list[Any] = []
    for _ in range(500):
        records = await client.list()
        if len(records) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(records) == 2
    for record in records:
        with pytest.raises(MoatError) as failed:
            await within(client.await_run(record["id"]))
        assert failed.value.code == "RUN_FAILED"
        assert (await client.get(record["id"]))["reason"] == "cancelled"
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


async def test_run_parallel_raises_when_the_server_dies(client: MoatClient) -> None:
    stream = client.run_parallel([{"adapter": COOPERATIVE, "prompt": "go", "role": "a"}])
    await within(stream.__anext__())
    assert client.process is not None
    client.process.send_signal(signal.SIGKILL)

    async def rest() -> None:
        async for _ in stream:
            pass

    with pytest.raises(MoatConnectionError):
        await within(rest())


async def test_is_agent_event_is_cligents_guard(client: MoatClient) -> None:
    async for event in client.run_agent("echo", "hi"):
        assert is_agent_event(event), event
    shape: dict[str, Any] = {
        "type": "x:y",
        "agent": "a",
        "timestamp": 1,
        "sessionId": "s",
        "payload": None,
    }
    assert is_agent_event(shape)
    assert is_agent_event({**shape, "role": "r", "metadata": {}})
    values: list[object] = [None, "init", 1, [], {}]
    for value in values:
        assert not is_agent_event(value), value
    assert not is_agent_event({k: v for k, v in shape.items() if k != "payload"})
    assert not is_agent_event({**shape, "timestamp": "1"})
    assert not is_agent_event({**shape, "timestamp": True})
    assert not is_agent_event({**shape, "sessionId": None})
    assert not is_agent_event({**shape, "agent": 7})
