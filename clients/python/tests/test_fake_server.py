"""The client against a scripted server on a Unix socket: the orders of
messages the real server may send but rarely does (responses out of order,
events before their `subscribe` response, a replayed event, `lagged`, an
unknown subscription), and a connection that drops mid-request."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from moat_client import MoatClient, MoatConnectionError, MoatError

Message = dict[str, Any]
Send = Callable[[Message], Awaitable[None]]
Script = Callable[[AsyncIterator[Message], Send], Awaitable[None]]


async def serve(tmp_path: Path, script: Script) -> tuple[asyncio.Server, Path]:
    """A server on a socket that runs `script` for its one client."""
    path = tmp_path / "fake.sock"

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        async def requests() -> AsyncIterator[Message]:
            while line := await reader.readline():
                yield json.loads(line)

        async def send(message: Message) -> None:
            writer.write(json.dumps(message).encode() + b"\n")
            await writer.drain()

        try:
            await script(requests(), send)
        finally:
            writer.close()

    server = await asyncio.start_unix_server(handle, str(path))
    return server, path


def event(sid: str, seq: int, kind: str = "text_delta") -> Message:
    payload: Message = {"status": "success"} if kind == "done" else {"delta": str(seq)}
    return {
        "event": "run_event",
        "subscriptionId": sid,
        "run": "r_1",
        "seq": seq,
        "data": {"type": kind, "agent": "fake", "timestamp": 1, "payload": payload},
    }


async def test_responses_out_of_order_and_events_around_their_subscribe(
    tmp_path: Path,
) -> None:
    subscribes: list[Message] = []

    async def script(requests: AsyncIterator[Message], send: Send) -> None:
        held: Message | None = None
        async for request in requests:
            if request["op"] == "get":
                if held is None:
                    held = request  # answered after the next one
                    continue
                await send({"id": request["id"], "result": {"id": request["run"]}})
                await send({"id": held["id"], "result": {"id": held["run"]}})
                await send({"id": 999, "result": {}})  # nobody's: dropped
            elif request["op"] == "subscribe":
                subscribes.append(request)
                if request["fromSeq"] == 0:
                    # Events first, then the response; a replayed one; an
                    # unknown subscription's; then lagged.
                    await send(event("s_1", 0, "init"))
                    await send(event("s_1", 1))
                    await send({"id": request["id"], "result": {"subscriptionId": "s_1"}})
                    await send(event("s_9", 7))
                    await send(event("s_1", 1))
                    await send(event("s_1", 2))
                    await send(
                        {
                            "event": "lagged",
                            "subscriptionIds": ["s_1"],
                            "run": "r_1",
                            "nextSeq": 3,
                        }
                    )
                else:
                    await send({"id": request["id"], "result": {"subscriptionId": "s_2"}})
                    await send(event("s_2", 2))  # already seen: skipped
                    await send(event("s_2", 3))
                    await send(event("s_2", 4, "done"))
            elif request["op"] == "cancel":
                await send(
                    {"id": request["id"], "error": {"code": "NOT_FOUND", "message": "no", "data": 1}}
                )

    server, path = await serve(tmp_path, script)
    async with server, await MoatClient.connect(path) as client:
        first, second = await asyncio.wait_for(
            asyncio.gather(client.get("r_a"), client.get("r_b")), 5
        )
        assert first["id"] == "r_a" and second["id"] == "r_b"

        stream = client.events("r_1")
        events = [e async for e in stream]
        assert [e["type"] for e in events] == ["init"] + ["text_delta"] * 3 + ["done"]
        assert [e["payload"].get("delta") for e in events[1:4]] == ["1", "2", "3"]
        assert stream.lags == 1
        assert [s["fromSeq"] for s in subscribes] == [0, 3]
        assert client._subscriptions == {} and client._orphans == {}

        with pytest.raises(MoatError) as error:
            await client.cancel("r_1")
        assert (error.value.code, error.value.message, error.value.data) == ("NOT_FOUND", "no", 1)


async def test_a_connection_that_drops_fails_what_waits(tmp_path: Path) -> None:
    async def script(requests: AsyncIterator[Message], send: Send) -> None:
        async for request in requests:
            if request["op"] == "subscribe":
                await send({"id": request["id"], "result": {"subscriptionId": "s_1"}})
                await send(event("s_1", 0, "init"))
            elif request["op"] == "await":
                return  # gone, never answering

    server, path = await serve(tmp_path, script)
    async with server, await MoatClient.connect(path) as client:
        stream = client.events("r_1")
        assert (await stream.__anext__())["type"] == "init"
        with pytest.raises(MoatConnectionError) as lost:
            await asyncio.wait_for(client.await_run("r_1"), 5)
        assert "closed the connection" in str(lost.value)
        with pytest.raises(MoatConnectionError):
            await asyncio.wait_for(stream.__anext__(), 5)
        with pytest.raises(StopAsyncIteration):
            await stream.__anext__()
        with pytest.raises(MoatConnectionError):
            await client.adapters()
        assert client.closed
        assert await client.wait() is None


async def test_a_request_too_long_for_the_server_is_refused_here(tmp_path: Path) -> None:
    async def script(requests: AsyncIterator[Message], send: Send) -> None:
        async for request in requests:
            await send({"id": request["id"], "result": {"run": "r_1"}})

    server, path = await serve(tmp_path, script)
    async with server, await MoatClient.connect(path) as client:
        with pytest.raises(MoatError) as refused:
            await client.run("echo", "x" * (5 << 20))
        assert refused.value.code == "INVALID_REQUEST"
        assert await client.run("echo", "x") == "r_1"
