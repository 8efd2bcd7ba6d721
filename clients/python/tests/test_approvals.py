"""Approvals against the real `moat serve`: a run started with `ask` that
reaches for a host its grants do not cover waits for an answer, which a
permission handler, another client or the API gives."""

from __future__ import annotations

import asyncio
import logging
import os
import re
import signal
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, TypeVar, cast

import pytest
from conftest import ESCAPE, MOAT_BIN, PATIENCE, Spawn, server_env

from moat_client import (
    AgentEvent,
    MoatClient,
    MoatError,
    PermissionAnswerPayload,
    PermissionRequest,
    PermissionResultAllow,
    PermissionResultDeny,
)

T = TypeVar("T")

BODY = b"hello from loopback"


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


@dataclass
class Loopback:
    """An HTTP server on 127.0.0.1 answering every request with BODY."""

    port: int
    hits: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    @property
    def allow(self) -> str:
        """The server's ceiling that allows it."""
        return f"--allow-net=127.0.0.1:{self.port}"


@pytest.fixture
def loopback() -> Iterator[Loopback]:
    served = Loopback(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            served.hits += 1
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(BODY)))
            self.end_headers()
            self.wfile.write(BODY)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    served.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield served
    server.shutdown()
    server.server_close()
    thread.join()


@asynccontextmanager
async def socket_server(tmp_path: Path, *args: str) -> AsyncIterator[Path]:
    """A `moat serve --socket` of its own; yields the socket once it
    listens."""
    socket = tmp_path / "moat.sock"
    env = {**os.environ, **{k: v for k, v in server_env(tmp_path).items() if v is not None}}
    env.pop("MOAT_LOG", None)
    server = await asyncio.create_subprocess_exec(
        MOAT_BIN, "serve", "--socket", str(socket), *args, env=env, stdin=asyncio.subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + PATIENCE
        while not socket.exists():
            assert server.returncode is None, "moat serve --socket exited"
            assert time.monotonic() < deadline, "the server never listened"
            await asyncio.sleep(0.02)
        yield socket
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()


async def events_of(client: MoatClient, run: str, from_seq: int = 0) -> list[AgentEvent]:
    return [event async for event in client.events(run, from_seq)]


def answer_of(events: list[AgentEvent]) -> PermissionAnswerPayload:
    event = next(e for e in events if e["type"] == "moat:permission_answer")
    return cast(PermissionAnswerPayload, event["payload"])


async def test_a_permission_request_arrives_at_the_callback_the_client_approves(
    spawn: Spawn, loopback: Loopback
) -> None:
    client = await spawn([loopback.allow])
    asked: list[tuple[str, PermissionRequest]] = []

    @client.on_permission_request
    async def decide(run_id: str, request: PermissionRequest) -> PermissionResultAllow:
        asked.append((run_id, request))
        return PermissionResultAllow()

    run = await client.run(ESCAPE, f"http GET {loopback.url}", grants={"net": []}, ask={})
    events = await within(events_of(client, run))

    assert len(asked) == 1, "the handler is called once"
    run_id, request = asked[0]
    assert run_id == run
    assert request.request_id == "1"
    assert request.number == 1
    assert request.kind == "net"
    assert request.tool_name == "moat:net"
    assert request.input == {"host": "127.0.0.1", "port": loopback.port}
    assert request.reason is not None and "not granted" in request.reason
    assert request.event["type"] == "permission_request"

    types = [e["type"] for e in events]
    assert types.index("permission_request") < types.index("moat:permission_answer"), types
    answer = answer_of(events)
    assert answer["requestId"] == "1"
    assert answer["decision"] == "approved"
    assert answer["approved"] is True
    assert "a client of moat serve" in answer["by"]

    result = await within(client.await_run(run))
    assert result["status"] == "success"
    assert result.get("text") == "ok: 200 hello from loopback"
    assert loopback.hits == 1, "the loopback server got the request"
    record = await client.get(run)
    assert record["status"] == "completed"
    [approval] = record["requests"]
    assert approval["request"]["port"] == loopback.port
    assert approval["answer"] is not None and approval["answer"]["approved"] is True


#: Client A, in a process of its own: follows a run that asks, with a
#: handler that never answers; says so once asked.
_CLIENT_A = """
import asyncio, sys
from moat_client import MoatClient

async def main(socket, escape, url):
    async with await MoatClient.connect(socket) as client:
        @client.on_permission_request
        async def never(run_id, request):
            print("asked", run_id, request.kind, flush=True)
            await asyncio.Event().wait()

        run = await client.run(escape, f"http GET {url}", grants={"net": []}, ask={})
        async for _ in client.events(run):
            pass

asyncio.run(main(*sys.argv[1:]))
"""


async def test_kill_the_approving_client_while_waiting_another_client_answers(
    tmp_path: Path, loopback: Loopback
) -> None:
    async with socket_server(tmp_path, loopback.allow) as socket:
        env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1] / "src")}
        a = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CLIENT_A,
            str(socket),
            ESCAPE,
            loopback.url,
            stdout=asyncio.subprocess.PIPE,
            env=env,
        )
        try:
            assert a.stdout is not None
            line = (await within(a.stdout.readline())).decode()
            assert line.startswith("asked r_"), line
            _, run, kind = line.split()
            assert kind == "net"
        finally:
            a.send_signal(signal.SIGKILL)
            await a.wait()
        assert a.returncode == -signal.SIGKILL

        async with await MoatClient.connect(socket) as b:
            # The run goes on waiting in the server; B sees the open request and approves it.
            assert (await b.get(run))["status"] == "waiting"
            [open_request] = await b.approvals(run)
            assert open_request["number"] == 1
            assert open_request["request"]["kind"] == "net"
            assert open_request["request"].get("host") == "127.0.0.1"
            assert open_request["request"].get("port") == loopback.port
            assert open_request["answer"] is None
            approved = await b.approve(run)  # the run's only open request
            assert approved["number"] == 1
            assert approved["answer"] is not None
            assert approved["answer"]["approved"] is True
            assert approved["answer"]["always"] is False

            result = await within(b.await_run(run))
            assert result["status"] == "success"
            assert result.get("text") == "ok: 200 hello from loopback"
            assert loopback.hits == 1

            # Answered once: again is INVALID_REQUEST; an unknown run is NOT_FOUND.
            with pytest.raises(MoatError) as again:
                await b.approve(run, request=1)
            assert again.value.code == "INVALID_REQUEST"
            with pytest.raises(MoatError) as unknown:
                await b.deny("r_00000000000000000000000000")
            assert unknown.value.code == "NOT_FOUND"

        # A late follower's handler is never asked about a request answered already.
        async with await MoatClient.connect(socket) as late:
            calls: list[PermissionRequest] = []
            late.on_permission_request(lambda _run, request: calls.append(request))
            replayed = await within(events_of(late, run, 0))
            assert any(e["type"] == "permission_request" for e in replayed), "it replays"
            await asyncio.sleep(0.1)
            assert calls == []


async def test_deny_with_a_reason_through_the_callback(spawn: Spawn, loopback: Loopback) -> None:
    client = await spawn([loopback.allow])

    def deny(_run: str, request: PermissionRequest) -> PermissionResultDeny:
        assert request.kind == "net"
        return PermissionResultDeny(message="not this host")

    # run_agent's own handler (a plain function): `ask` is implied.
    stream = client.run_agent(
        ESCAPE, f"http GET {loopback.url}", grants={"net": []}, on_permission_request=deny
    )
    events = [event async for event in stream]
    run = stream.run_id
    assert run is not None

    answer = answer_of(events)
    assert answer["decision"] == "denied"
    assert answer["reason"] == "not this host"
    # The adapter's request was refused, the error saying who denied it and why.
    error = next(e for e in events if e["type"] == "error")["payload"]
    assert error["code"] == "CAPABILITY_DENIED"
    assert re.search(r"denied by a client of moat serve .*: not this host", error["message"])
    text = next(e for e in events if e["type"] == "text")["payload"]["content"]
    assert text.startswith("denied: "), text
    assert loopback.hits == 0, "nothing reached the loopback server"

    record = await client.get(run)
    result = record.get("result")
    assert result is not None and result.get("text", "").startswith("denied: ")
    [approval] = record["requests"]
    assert approval["answer"] is not None
    assert approval["answer"]["approved"] is False
    assert approval["answer"].get("reason") == "not this host"


async def test_a_second_answer_is_dropped_quietly_and_a_failing_handler_denies(
    tmp_path: Path, loopback: Loopback, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="moat_client")
    async with (
        socket_server(tmp_path, loopback.allow) as socket,
        await MoatClient.connect(socket) as slow,
        await MoatClient.connect(socket) as fast,
    ):
        # Both follow the run; the fast one answers first, and the slow
        # one's handler is cancelled: its answer is no longer wanted.
        slow_started = asyncio.Event()
        slow_cancelled = asyncio.Event()

        @slow.on_permission_request
        async def wait_forever(_run: str, _request: PermissionRequest) -> None:
            slow_started.set()
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                slow_cancelled.set()
                raise

        @fast.on_permission_request
        async def allow(_run: str, _request: PermissionRequest) -> PermissionResultAllow:
            await slow_started.wait()
            return PermissionResultAllow(always=True)

        run = await slow.run(ESCAPE, f"http GET {loopback.url}", grants={"net": []}, ask={})
        slow_events, fast_events = await within(
            asyncio.gather(events_of(slow, run), events_of(fast, run))
        )
        assert slow_cancelled.is_set()
        for events in (slow_events, fast_events):
            assert answer_of(events)["decision"] == "approved always"
        result = await within(fast.await_run(run))
        assert result.get("text") == "ok: 200 hello from loopback"

        # A handler that raises: the request is denied, the error logged.
        @fast.on_permission_request
        def broken(_run: str, _request: PermissionRequest) -> None:
            raise RuntimeError("no UI here")

        second = await fast.run(ESCAPE, f"http GET {loopback.url}", grants={"net": []}, ask={})
        events = await within(events_of(fast, second))
        reason = answer_of(events)["reason"]
        assert reason is not None and "handler failed: no UI here" in reason
        failures = [r for r in caplog.records if r.levelno >= logging.WARNING]
        assert len(failures) == 1, [r.getMessage() for r in failures]
        assert "permission handler failed" in failures[0].getMessage()
        assert failures[0].exc_info is not None
        assert "no UI here" in str(failures[0].exc_info[1])


async def test_run_parallel_tasks_answer_their_own_requests(
    spawn: Spawn, loopback: Loopback
) -> None:
    client = await spawn([loopback.allow])
    probe = f"http GET {loopback.url}"
    allowed: list[str] = []

    def allow(run_id: str, _request: PermissionRequest) -> PermissionResultAllow:
        allowed.append(run_id)
        return PermissionResultAllow()

    async def deny(_run_id: str, _request: PermissionRequest) -> PermissionResultDeny:
        return PermissionResultDeny(message="not for the reviewer")

    stream = client.run_parallel(
        [
            {
                "adapter": ESCAPE,
                "prompt": probe,
                "role": "writer",
                "grants": {"net": []},
                "on_permission_request": allow,
            },
            {
                "adapter": ESCAPE,
                "prompt": probe,
                "role": "reviewer",
                "grants": {"net": []},
                "on_permission_request": deny,
            },
        ]
    )
    texts = {
        event.get("role"): event["payload"]["content"]
        async for event in stream
        if event["type"] == "text"
    }
    assert texts["writer"] == "ok: 200 hello from loopback"
    assert texts["reviewer"].startswith("denied: "), texts
    assert allowed == [stream.run_ids[0]]
    assert loopback.hits == 1
