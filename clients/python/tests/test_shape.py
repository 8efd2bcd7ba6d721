"""The shapes the server sends are cligent's: every event type-checks as
cligent's CligentEvent (tests/fixtures/cligent/check-events.mjs, when node
and the TypeScript client's compiler are installed), moat's own additions
sit in `metadata`, and an EngineResult's usage is its done's."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar, cast

import pytest
from conftest import COOPERATIVE, PATIENCE

from moat_client import (
    AgentEvent,
    DonePayload,
    EventStream,
    InitMetadata,
    InitPayload,
    MoatClient,
)

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[3]
CHECK_EVENTS = REPO / "tests" / "fixtures" / "cligent" / "check-events.mjs"
TSC = REPO / "clients" / "typescript" / "node_modules" / "typescript" / "bin" / "tsc"

DONE_PAYLOAD_KEYS = {"status", "result", "resumeToken", "usage", "durationMs"}
USAGE_KEYS = {"toolUses", "tokens", "cost"}


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


async def events_of(client: MoatClient, run: str) -> list[AgentEvent]:
    async def read() -> list[AgentEvent]:
        return [e async for e in client.events(run)]

    return await within(read())


async def test_every_event_is_one_cligents_types_accept(client: MoatClient, tmp_path: Path) -> None:
    node = shutil.which("node")
    if node is None or not TSC.exists():
        pytest.skip(
            "node and clients/typescript's tsc are needed (npm ci --prefix clients/typescript)"
        )
    events = await events_of(client, await client.run("echo", "hello", options={"model": "m1"}))
    async for event in client.run_parallel(
        [
            {"adapter": "echo", "prompt": "a", "role": "writer"},
            {"adapter": "echo", "prompt": "b", "role": "reviewer"},
        ]
    ):
        events.append(event)
    long = await client.run(COOPERATIVE, "go")
    stream = client.events(long)
    events.append(await within(stream.__anext__()))
    await client.cancel(long)
    events.extend(await within(_rest(stream)))
    assert events[-1]["payload"]["status"] == "interrupted"

    file = tmp_path / "events.ndjson"
    file.write_text("".join(json.dumps(e) + "\n" for e in events))
    checker = await asyncio.create_subprocess_exec(
        node,
        str(CHECK_EVENTS),
        str(tmp_path / "check"),
        str(file),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await within(checker.communicate(), 120)
    assert checker.returncode == 0, f"cligent's types refuse moat's events:\n{output.decode()}"


async def _rest(stream: EventStream) -> list[AgentEvent]:
    return [e async for e in stream]


async def test_init_has_model_and_cwd_and_moats_additions_in_metadata(client: MoatClient) -> None:
    run = await client.run("echo", "hello")
    init = (await events_of(client, run))[0]
    assert init["type"] == "init"
    payload = cast(InitPayload, init["payload"])
    assert isinstance(payload["model"], str) and payload["model"]
    assert isinstance(payload["cwd"], str)
    assert isinstance(payload["tools"], list)
    metadata = cast(InitMetadata, init.get("metadata", {}))
    assert metadata.get("runId") == run, "the run is recorded: its id"
    assert isinstance(metadata.get("containment", ""), str)
    for key in ("runId", "containment"):
        assert key not in init["payload"], f"{key} is not in the payload"
        assert key not in init, f"{key} is not beside the payload"


async def test_done_usage_is_cligents_and_details_are_metadata(client: MoatClient) -> None:
    done = (await events_of(client, await client.run("echo", "hello")))[-1]
    assert done["type"] == "done"
    assert set(done["payload"]) <= DONE_PAYLOAD_KEYS, done["payload"]
    payload = cast(DonePayload, done["payload"])
    assert isinstance(payload["durationMs"], int)
    assert isinstance(payload["usage"]["toolUses"], int)
    assert set(payload["usage"]) <= USAGE_KEYS, payload["usage"]
    assert isinstance(done.get("metadata", {}), dict)


async def test_the_result_has_the_dones_usage_and_duration_turns_run_id_beside(
    client: MoatClient,
) -> None:
    run = await client.run("echo", "hello")
    done = (await events_of(client, run))[-1]
    payload = cast(DonePayload, done["payload"])
    result = await within(client.await_run(run))
    assert result["status"] == "success"
    assert result.get("text") == "hello"
    assert result.get("runId") == run
    assert result.get("sessionId") == done["sessionId"]
    assert result["usage"] == payload["usage"], "one usage shape everywhere"
    assert result.get("durationMs") == payload["durationMs"]
    assert result.get("turns") == done.get("metadata", {}).get("turns")
    gone = {"inputTokens", "outputTokens", "cacheReadTokens", "cacheWriteTokens", "costUsd"}
    assert not (gone | {"costSource", "durationMs", "turns"}) & set(result["usage"])
    record = await client.get(run)
    assert record.get("result") == result
    assert record.get("done") == payload
