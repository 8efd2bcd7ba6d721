"""The client against the real `moat serve`, each test with a server (and a
store) of its own."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import time
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import TypeVar

import pytest
from conftest import COOPERATIVE, FLOOD, MOAT_BIN, PATIENCE, Spawn, server_env

from moat_client import AgentEvent, MoatClient, MoatConnectionError, MoatError

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


async def test_run_gets_an_id_at_once_and_await_its_result(client: MoatClient) -> None:
    run = await client.run("echo", "hello")
    assert run.startswith("r_"), run
    result = await within(client.await_run(run))
    assert result["status"] == "success"
    assert result["text"] == "hello"
    results = await client.await_runs([run])
    assert list(results) == [run]
    assert results[run]["text"] == "hello"

    # A long await holds up nothing else: responses come out of order.
    long = await client.run(COOPERATIVE, "go")
    waiting = asyncio.ensure_future(client.await_run(long))
    record = await within(client.get(long))
    assert record["status"] in ("pending", "running")
    assert record["result"] is None
    assert not waiting.done()
    await client.cancel(long)
    with pytest.raises(MoatError) as failed:
        await within(waiting)
    assert failed.value.code == "RUN_FAILED"


async def test_get_list_adapters_and_inspect(spawn: Spawn) -> None:
    client = await spawn(["--allow-env", "HOME"])
    first = await client.run("echo", "one")
    second = await client.run("echo", "two")
    await within(client.await_runs([first, second]))

    record = await client.get(first)
    assert record["id"] == first
    assert record["adapter"] == "echo"
    assert record["status"] == "completed"
    assert record["prompt"] == "one"
    assert record["grants"]["env"] == ["HOME"]
    assert record["result"] is not None and record["result"]["text"] == "one"
    # A unique prefix names it too.
    assert (await client.get(first[:-4]))["id"] == first

    runs = await client.list(status="completed", limit=5)
    assert [r["id"] for r in runs] == [second, first], "newest first"
    assert [r["id"] for r in await client.list(limit=1)] == [second]
    assert await client.list(status=["pending", "running"]) == []
    # Each record says what its run was admitted with.
    assert record["trust"] == "sandbox"
    limits = record["limits"]
    assert limits is not None and limits["maxMemoryBytes"] > 0

    names = [a["name"] for a in await client.adapters()]
    assert "echo" in names
    echo = await client.inspect("echo")
    assert echo["name"] == "echo" and echo["builtIn"] is True
    assert echo["allowed"]["env"] == ["HOME"]


async def test_a_components_children_are_listed_by_their_parent(client: MoatClient) -> None:
    agents = [{"adapter": "echo", "prompt": "one"}, {"adapter": "echo", "prompt": "two"}]
    fanout = await client.run("fanout", "x", options={"extra": {"agents": agents}})
    result = await within(client.await_run(fanout))
    assert result["status"] == "success", result
    children = await client.list(parent=fanout)
    assert sorted(r["prompt"] for r in children) == ["one", "two"]
    assert all(r["parent"] == fanout for r in children)
    assert [r["id"] for r in await client.list(adapter="fanout")] == [fanout]


async def test_errors_carry_the_protocol_codes(client: MoatClient) -> None:
    with pytest.raises(MoatError) as invalid:
        await client.request("get", run=7)
    assert invalid.value.code == "INVALID_REQUEST"
    assert "get" in invalid.value.message

    with pytest.raises(MoatError) as missing:
        await client.get("r_00000000000000000000000000")
    assert missing.value.code == "NOT_FOUND"
    with pytest.raises(MoatError) as missing:
        await client.inspect("no-such-adapter")
    assert missing.value.code == "NOT_FOUND"

    # The server has no --allow-env: a run may not ask for PATH.
    with pytest.raises(MoatError) as beyond:
        await client.run("echo", "x", grants={"env": ["PATH"]})
    assert beyond.value.code == "BOUNDARY_VIOLATION"
    assert "--allow-env=PATH" in beyond.value.message

    run = await client.run(COOPERATIVE, "go")
    await client.cancel(run)
    with pytest.raises(MoatError) as failed:
        await within(client.await_run(run))
    assert failed.value.code == "RUN_FAILED"
    assert failed.value.data["results"][run]["status"] == "interrupted"

    # Still usable after every error; the low-level request too.
    assert (await client.request("list", limit=1))["runs"][0]["id"] == run


async def test_cancel_is_idempotent(client: MoatClient) -> None:
    await client.cancel("r_nosuchrun")
    run = await client.run(COOPERATIVE, "go")
    cancelled = time.monotonic()
    await client.cancel(run)
    await client.cancel(run)
    with pytest.raises(MoatError) as failed:
        await within(client.await_run(run))
    assert time.monotonic() - cancelled < 5
    assert failed.value.code == "RUN_FAILED"
    record = await client.get(run)
    assert record["status"] == "failed"
    assert record["reason"] == "cancelled"
    await client.cancel(run)  # ended: still a success


def _check_flood(events: list[AgentEvent], count: int) -> None:
    deltas = [e for e in events if e["type"] == "text_delta"]
    assert len(deltas) == count
    assert all(e["agent"] == "flood" and e["payload"] == {"delta": "x"} for e in deltas)
    assert events[-1]["type"] == "done"
    assert events[-1]["payload"]["status"] == "success"
    assert [e["type"] for e in events].count("done") == 1
    assert all({"type", "agent", "timestamp", "payload"} <= e.keys() for e in events)


async def test_events_of_a_flood_are_all_there_in_order(client: MoatClient) -> None:
    run = await client.run(FLOOD, "20000")
    stream = client.events(run)
    events = [e async for e in stream]
    _check_flood(events, 20000)
    # Every seq from 0 once: the stream checks each against the next.
    assert stream.next_seq == len(events)
    assert stream.finished


async def test_events_survive_lagged_from_a_stalled_client(client: MoatClient) -> None:
    # More than the server queues for one client (8 MiB): however it
    # batches the events, the queue fills.
    run = await client.run(FLOOD, "100000")
    stream = client.events(run)
    events = [await within(stream.__anext__())]
    # Block the loop: nothing is read, the server's queue for this client
    # fills, and it ends the subscription with `lagged`.
    time.sleep(1.5)  # noqa: ASYNC251  (a stalled client, on purpose)
    events += [e async for e in stream]
    _check_flood(events, 100000)
    assert stream.next_seq == len(events)
    assert stream.lags >= 1, "the server should have lagged this client"


async def test_events_of_a_slow_reader_resubscribe_without_gap(client: MoatClient) -> None:
    run = await client.run(FLOOD, "20000")
    await within(client.await_run(run))
    # Read from the middle, more slowly than the events come, with a small
    # buffer: the client drops and resumes the subscription itself.
    stream = client.events(run, from_seq=5000, max_buffered=100)
    events = [await within(stream.__anext__())]
    # Read nothing until more than 100 events wait: the subscription drops.
    deadline = time.monotonic() + PATIENCE
    while not (stream._subscription and stream._subscription.ended):
        assert time.monotonic() < deadline, "the buffer never filled"
        await asyncio.sleep(0.01)
    async for event in stream:
        events.append(event)
        if len(events) % 2000 == 0:
            await asyncio.sleep(0.05)
    _check_flood(events, 15000)
    assert stream.next_seq == 20001
    assert stream.lags >= 1


async def test_events_of_an_unknown_run_is_not_found(client: MoatClient) -> None:
    with pytest.raises(MoatError) as missing:
        async for _ in client.events("r_nosuchrun"):
            pass
    assert missing.value.code == "NOT_FOUND"


async def test_leaving_events_early_unsubscribes(client: MoatClient) -> None:
    run = await client.run(COOPERATIVE, "go")
    seen = 0
    async for event in client.events(run):
        assert event["type"] in ("init", "text_delta")
        seen += 1
        if seen == 3:
            break
    await asyncio.sleep(0.2)
    assert client._subscriptions == {}, "no subscription left"
    # A second stream of the same run starts over from its first event.
    async with client.events(run) as again:
        first = await within(again.__anext__())
        assert first["agent"] == "cooperative"
    assert client._subscriptions == {}
    await client.cancel(run)


async def test_run_agent_streams_a_run_to_its_done(client: MoatClient) -> None:
    stream = client.run_agent("echo", "hello")
    events = [e async for e in stream]
    assert [e["type"] for e in events] == ["init", "text_delta", "text", "done"]
    assert events[-1]["payload"]["status"] == "success"
    assert events[-1]["payload"]["result"] == "hello"
    assert stream.run_id is not None
    assert (await within(client.await_run(stream.run_id)))["text"] == "hello"
    assert (await client.get(stream.run_id))["status"] == "completed"


async def test_run_agent_cancelled_after_its_first_event(client: MoatClient) -> None:
    cancel = asyncio.Event()
    stream = client.run_agent(COOPERATIVE, "go", cancel_event=cancel)
    events: list[AgentEvent] = []
    started = time.monotonic()
    async for event in stream:
        events.append(event)
        cancel.set()
    assert time.monotonic() - started < 10
    assert len(events) >= 2
    assert events[-1]["type"] == "done"
    assert events[-1]["payload"]["status"] == "interrupted"
    assert stream.run_id is not None
    # Its record is final once its await answers.
    with pytest.raises(MoatError) as failed:
        await within(client.await_run(stream.run_id))
    assert failed.value.code == "RUN_FAILED"
    assert (await client.get(stream.run_id))["reason"] == "cancelled"


async def test_leaving_run_agent_early_cancels_its_run(client: MoatClient) -> None:
    stream = client.run_agent(COOPERATIVE, "go")
    async for _ in stream:
        break
    await stream.aclose()
    assert stream.run_id is not None
    with pytest.raises(MoatError) as failed:
        await within(client.await_run(stream.run_id))
    assert failed.value.data["results"][stream.run_id]["status"] == "interrupted"


async def test_a_socket_server_serves_two_clients_at_once(tmp_path: Path) -> None:
    socket = tmp_path / "moat.sock"
    env = {**os.environ, **{k: v for k, v in server_env(tmp_path).items() if v is not None}}
    env.pop("MOAT_LOG", None)
    server = await asyncio.create_subprocess_exec(
        MOAT_BIN, "serve", "--socket", str(socket), env=env, stdin=asyncio.subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + PATIENCE
        while not socket.exists():
            assert time.monotonic() < deadline, "the server never listened"
            await asyncio.sleep(0.02)
        assert stat.S_IMODE(socket.stat().st_mode) == 0o600
        async with await MoatClient.connect(socket) as one, await MoatClient.connect(socket) as two:
            long = await one.run(COOPERATIVE, "go")
            waiting = asyncio.ensure_future(one.await_run(long))
            following = asyncio.ensure_future(_collect(one.events(long)))
            # The other client is served meanwhile, and sees the first's runs.
            short = await two.run("echo", "two")
            assert (await within(two.await_run(short)))["text"] == "two"
            assert (await two.get(long))["adapter"] == "cooperative"
            assert not waiting.done()
            await two.cancel(long)
            with pytest.raises(MoatError) as failed:
                await within(waiting)
            assert failed.value.code == "RUN_FAILED"
            events = await within(following)
            assert events[-1]["payload"]["status"] == "interrupted"
            await one.shutdown()
            assert await within(one.wait()) is None
        assert await within(server.wait()) == 0
        assert not socket.exists(), "the server removes its socket"
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()


async def _collect(stream: AsyncIterator[AgentEvent]) -> list[AgentEvent]:
    return [e async for e in stream]


async def test_shutdown_ends_live_runs_and_the_server(client: MoatClient) -> None:
    run = await client.run(COOPERATIVE, "go")
    stream = client.events(run)
    await within(stream.__anext__())
    await client.shutdown()
    rest = await within(_collect(stream))
    assert rest[-1]["type"] == "done"
    assert rest[-1]["payload"]["status"] == "interrupted"
    assert await within(client.wait()) == 0
    assert client.process is not None and client.process.returncode == 0
    with pytest.raises(MoatConnectionError):
        await client.get(run)


async def test_close_stops_the_server(client: MoatClient) -> None:
    await client.run(COOPERATIVE, "go")
    await within(client.close())
    assert client.process is not None and client.process.returncode == 0
    await client.close()  # idempotent
    with pytest.raises(MoatConnectionError):
        await client.run("echo", "x")


async def test_a_server_that_dies_fails_what_waits(client: MoatClient) -> None:
    run = await client.run(COOPERATIVE, "go")
    stream = client.events(run)
    await within(stream.__anext__())
    waiting = asyncio.ensure_future(client.await_run(run))
    following = asyncio.ensure_future(_collect(stream))
    await asyncio.sleep(0.1)
    assert client.process is not None
    client.process.send_signal(signal.SIGKILL)
    with pytest.raises(MoatConnectionError) as lost:
        await within(waiting)
    assert lost.value.code == "CONNECTION_CLOSED"
    assert isinstance(lost.value, ConnectionError)
    with pytest.raises(MoatConnectionError):
        await within(following)
    with pytest.raises(MoatConnectionError):
        await client.get(run)
    # A request nobody awaits any more fails quietly too (the fixture
    # checks that no exception went unretrieved).
    assert await within(client.wait()) == -signal.SIGKILL
