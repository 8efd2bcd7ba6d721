"""A run's traffic against the real `moat serve`: the underreporter
component calls a loopback OpenAI stand-in, reports a tenth of what each
answer says it used, and `traffic` shows every call as moat metered it
beside what the adapter reported, and never a body."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Awaitable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypeVar

import pytest
from conftest import PATIENCE, UNDERREPORTER, Spawn

from moat_client import AgentEvent, MoatClient, MoatError

T = TypeVar("T")

#: What the stand-in answers every POST with.
ANSWER = json.dumps(
    {
        "id": "x",
        "model": "gpt-test",
        "choices": [{"message": {"role": "assistant", "content": "ok"}}],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100},
    }
).encode()


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


async def events_of(client: MoatClient, run: str) -> list[AgentEvent]:
    return [event async for event in client.events(run)]


@dataclass
class StandIn:
    """An OpenAI stand-in on 127.0.0.1; `bodies` are its requests' bodies."""

    port: int
    bodies: list[bytes] = field(default_factory=list)

    @property
    def destination(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def stand_in() -> Iterator[StandIn]:
    served = StandIn(port=0)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            served.bodies.append(self.rfile.read(length))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(ANSWER)))
            self.end_headers()
            self.wfile.write(ANSWER)

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


async def test_traffic_shows_each_model_call_as_metered_beside_the_report_without_a_body(
    spawn: Spawn, stand_in: StandIn
) -> None:
    destination = stand_in.destination
    client = await spawn([f"--allow-net={destination}"])
    prompt = json.dumps(
        {"url": f"http://{destination}/v1/chat/completions", "calls": 3, "share": 0.1}
    )
    run = await client.run(
        UNDERREPORTER,
        prompt,
        grants={"net": [destination], "meter": [f"{destination}=openai"]},
    )
    result = await within(client.await_run(run))
    assert result["status"] == "success", result
    assert len(stand_in.bodies) == 3, "the stand-in answered three calls"
    assert b'"content":"hi"' in stand_in.bodies[0], "the calls carried a body"

    traffic = await client.traffic(run)
    rows = traffic["rows"]
    assert len(rows) == 3, rows
    for row in rows:
        assert row["who"] == "component"
        assert row["kind"] == "request"
        assert row.get("method") == "POST"
        assert row.get("path") == "/v1/chat/completions"
        assert (row["host"], row["port"]) == ("127.0.0.1", stand_in.port)
        assert row.get("status") == 200
        assert row.get("vendor") == "openai"
        assert row.get("model") == "gpt-test"
        assert row.get("usage") == {"inputTokens": 1000, "outputTokens": 100}
        assert row["sent"] > 0 and row["received"] > 0, row
        assert "refused" not in row
    assert traffic["metered"] == {"calls": 3, "inputTokens": 3000, "outputTokens": 300}
    assert traffic["reported"]["inputTokens"] == 300
    assert traffic["reported"]["outputTokens"] == 30
    assert "overflow" not in traffic, "three rows are far under the cap"
    # Never a body, nor a header's value: not the request's, not the answer's.
    text = json.dumps(rows, separators=(",", ":"))
    for leak in ('"content"', '"messages"', '"hi"', "application/json", "choices"):
        assert leak not in text, f"a row holds {leak}: {text}"

    # The same rows are the run's moat:traffic events; its moat:usage
    # events say whose count they are.
    events = await within(events_of(client, run))
    assert [e["payload"] for e in events if e["type"] == "moat:traffic"] == rows
    usage = [e["payload"] for e in events if e["type"] == "moat:usage"]
    metered = [u for u in usage if u.get("source") == "metered"]
    assert len(metered) == 3
    for call in metered:
        assert call["vendor"] == "openai"
        assert call["destination"] == destination
        assert call["model"] == "gpt-test"
        assert (call["inputTokens"], call["outputTokens"]) == (1000, 100)
    assert [u["inputTokens"] for u in usage if u.get("source") == "reported"] == [100, 100, 100]

    # A prefix names the run; an unknown run is NOT_FOUND.
    assert await client.traffic(run[:12]) == traffic
    with pytest.raises(MoatError) as unknown:
        await client.traffic("r_00000000000000000000000000")
    assert unknown.value.code == "NOT_FOUND"


async def test_a_refused_request_is_a_row_with_why_and_the_grant_that_would_allow_it(
    spawn: Spawn, stand_in: StandIn
) -> None:
    granted = stand_in.destination
    client = await spawn([f"--allow-net={granted}"])
    # Port 1 is not granted: the component's call is refused before it leaves.
    prompt = json.dumps(
        {"url": "http://127.0.0.1:1/v1/chat/completions", "calls": 1, "share": 0.1}
    )
    run = await client.run(
        UNDERREPORTER, prompt, grants={"net": [granted], "meter": [f"{granted}=openai"]}
    )
    events = await within(events_of(client, run))
    assert events[-1]["type"] == "done"
    codes = [e["payload"].get("code") for e in events if e["type"] == "error"]
    assert "CAPABILITY_DENIED" in codes and "CALL_FAILED" in codes, codes

    traffic = await client.traffic(run)
    assert len(traffic["rows"]) == 1, traffic["rows"]
    row = traffic["rows"][0]
    assert row["who"] == "component"
    assert row.get("method") == "POST"
    assert row.get("path") == "/v1/chat/completions"
    assert (row["host"], row["port"]) == ("127.0.0.1", 1)
    assert row.get("refused"), row
    assert row.get("wouldAllow") == "127.0.0.1:1"
    assert "status" not in row, "it never left"
    assert "allowedBy" not in row
    assert traffic["metered"]["calls"] == 0
    assert stand_in.bodies == [], "nothing reached the stand-in"
