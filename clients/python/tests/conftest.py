"""Fixtures: a `moat serve` of the test's own, with a store of its own.

The binary and the test components come from MOAT_BIN,
MOAT_TEST_COOPERATIVE, MOAT_TEST_FLOOD, MOAT_TEST_ESCAPE and
MOAT_TEST_UNDERREPORTER, which
tests/all/clients.rs sets (run the suite with scripts/test, or `cargo test
-p moat --test all clients::`).
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from moat_client import MoatClient

def _required(name: str) -> str:
    value = os.environ.get(name)
    if not value:
        raise RuntimeError(
            f"{name} is not set: run this suite through scripts/test "
            "(or cargo test -p moat --test all clients::), which sets it"
        )
    return value


MOAT_BIN = _required("MOAT_BIN")
COOPERATIVE = _required("MOAT_TEST_COOPERATIVE")
FLOOD = _required("MOAT_TEST_FLOOD")
ESCAPE = _required("MOAT_TEST_ESCAPE")
UNDERREPORTER = _required("MOAT_TEST_UNDERREPORTER")

#: How long a test waits for any one thing before failing.
PATIENCE = 20.0


def server_env(tmp_path: Path) -> dict[str, str | None]:
    """A fresh store for the server; the compile cache passed through."""
    env: dict[str, str | None] = {
        "MOAT_STORE": str(tmp_path / "state" / "moat.db"),
        "MOAT_LOG": None,
    }
    if os.environ.get("MOAT_CACHE_DIR"):
        env["MOAT_CACHE_DIR"] = os.environ["MOAT_CACHE_DIR"]
    return env


Spawn = Callable[..., Awaitable[MoatClient]]


@pytest.fixture(autouse=True)
async def no_unhandled_errors() -> AsyncIterator[None]:
    """Fails a test whose loop reported an error nobody handled (e.g.
    "Task exception was never retrieved")."""
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    previous = loop.get_exception_handler()
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    yield
    gc.collect()
    await asyncio.sleep(0)
    loop.set_exception_handler(previous)
    assert not reported, [c.get("message") for c in reported]


@pytest.fixture
async def spawn(tmp_path: Path) -> AsyncIterator[Spawn]:
    """Starts `moat serve` (stdio) with flags, closed after the test."""
    clients: list[MoatClient] = []

    async def start(args: Sequence[str] = ()) -> MoatClient:
        client = await MoatClient.spawn(MOAT_BIN, args, server_env(tmp_path))
        clients.append(client)
        return client

    yield start
    for client in clients:
        await client.close()


@pytest.fixture
async def client(spawn: Spawn) -> MoatClient:
    """A client of a server of the test's own, without grants."""
    return await spawn()
