"""Workflow files run by the server (docs/workflows.md): `workflow_run`
starts one — its own record, its tasks' runs its children, its state file in
its project — and `workflow_status` reads its state, against the real
`moat serve`."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from conftest import COOPERATIVE, PATIENCE

from moat_client import MoatClient, MoatError, RunRecord, WorkflowState

T = TypeVar("T")

#: Two echo tasks, `b` after `a`.
TWO = """name = "two"
[[task]]
id = "a"
adapter = "echo"
prompt = "first"
[[task]]
id = "b"
adapter = "echo"
prompt = "second"
depends_on = ["a"]
"""


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


async def until(check: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Polls `check` until it gives something; fails after PATIENCE."""

    async def poll() -> T:
        while True:
            value = await check()
            if value is not None:
                return value
            await asyncio.sleep(0.02)

    try:
        return await within(poll())
    except asyncio.TimeoutError:
        pytest.fail(f"timed out waiting for {what}")


def workflow_file(project: Path, text: str, name: str = "flow.toml") -> Path:
    project.mkdir(exist_ok=True)
    file = project / name
    file.write_text(text)
    return file


async def state_of(client: MoatClient, file: Path) -> WorkflowState:
    status = await client.workflow_status(file)
    assert status["state"] is not None, status
    return status["state"]


def roles(runs: list[RunRecord]) -> list[str | None]:
    return sorted((run.get("role") for run in runs), key=str)


async def test_a_workflow_runs_in_the_server_with_its_record_children_and_state(
    client: MoatClient, tmp_path: Path
) -> None:
    file = workflow_file(tmp_path / "project", TWO)
    assert await client.workflow_status(file) == {"workflow": "two", "state": None}

    run = await client.workflow_run(file, max_parallel=2)
    assert isinstance(run, str)
    results = await within(client.await_runs([run]))
    assert list(results) == [run]
    assert results[run]["status"] == "success"

    record = await client.get(run)
    assert record["status"] == "completed", record
    assert record["adapter"] == "workflow"
    assert record.get("options", {}).get("file") == str(file)
    children = await client.list(parent=run)
    assert roles(children) == ["a", "b"]
    for child in children:
        assert child["status"] == "completed", child
        assert child.get("parent") == run

    status = await client.workflow_status(str(file))
    assert status["workflow"] == "two"
    state = status["state"]
    assert state is not None
    assert state["status"] == "completed", state
    assert state["tasks"]["a"]["status"] == "COMPLETED"
    assert state["tasks"]["b"]["status"] == "COMPLETED"
    assert state["runs"] == [run]

    # Resumed: a new record of the workflow, every task skipped (completed).
    resumed = await client.workflow_run(file, resume=True)
    assert isinstance(resumed, str)
    assert resumed != run
    assert (await within(client.await_run(resumed)))["status"] == "success"
    again = await client.get(resumed)
    assert again["status"] == "completed"
    assert again["adapter"] == "workflow"
    assert await client.list(parent=resumed) == [], "no task ran again"
    after = await state_of(client, file)
    assert after["status"] == "completed"
    assert after["runs"] == [run, resumed]


async def test_a_workflow_that_cannot_start_says_why(client: MoatClient, tmp_path: Path) -> None:
    file = workflow_file(tmp_path / "project", TWO)

    with pytest.raises(MoatError) as relative:
        await client.workflow_run("flow.toml")
    assert relative.value.code == "INVALID_REQUEST"
    assert "absolute" in relative.value.message
    with pytest.raises(MoatError) as relative:
        await client.workflow_status("flow.toml")
    assert relative.value.code == "INVALID_REQUEST"

    with pytest.raises(MoatError) as nothing:
        await client.workflow_run(file, resume=True)
    assert nothing.value.code == "NOT_FOUND", nothing.value
    assert (await client.workflow_status(file))["state"] is None, "a refused resume leaves none"

    with pytest.raises(MoatError) as both:
        await client.workflow_run(file, resume=True, fresh=True)
    assert both.value.code == "INVALID_REQUEST"

    # The file's line, as `moat workflow validate` says it.
    broken = workflow_file(
        tmp_path / "project", '[[task]]\nid = "a"\nadapter = "echo"\npromt = "hi"\n', "broken.toml"
    )
    for refused in (client.workflow_run, client.workflow_status):
        with pytest.raises(MoatError) as mistake:
            await refused(broken)
        assert mistake.value.code == "INVALID_REQUEST"
        assert "broken.toml:4" in mistake.value.message, mistake.value

    # Not a number of tasks: refused before it is sent.
    for max_parallel in (0, -1):
        with pytest.raises(MoatError) as count:
            await client.workflow_run(file, max_parallel=max_parallel)
        assert count.value.code == "INVALID_REQUEST"
    assert (await client.workflow_status(file))["state"] is None, "nothing ran"


async def test_cancel_stops_a_workflow_and_a_restart_needs_resume_or_fresh(
    client: MoatClient, tmp_path: Path
) -> None:
    project = tmp_path / "project"
    file = workflow_file(
        project,
        TWO.replace(
            'adapter = "echo"\nprompt = "second"', 'adapter = "cooperative.wasm"\nprompt = "go"'
        ),
    )
    # A task's component is a path inside the project.
    shutil.copy(COOPERATIVE, project / "cooperative.wasm")

    async def b_running() -> bool | None:
        state = (await client.workflow_status(file))["state"]
        return True if state and state["tasks"]["b"]["status"] == "RUNNING" else None

    run = await client.workflow_run(file)
    assert run is not None
    await until(b_running, "task b running")
    await client.cancel(run)
    with pytest.raises(MoatError) as failed:
        await within(client.await_run(run))
    assert failed.value.code == "RUN_FAILED"
    assert failed.value.data["results"][run]["status"] == "interrupted"
    record = await client.get(run)
    assert record["status"] == "failed"
    assert record.get("reason") == "cancelled"
    cancelled = await state_of(client, file)
    assert cancelled["status"] == "cancelled"
    assert cancelled["tasks"]["a"]["status"] == "COMPLETED"
    assert cancelled["tasks"]["b"]["status"] != "COMPLETED"

    # It did not finish: a plain start is refused, pointing at resume.
    with pytest.raises(MoatError) as unfinished:
        await client.workflow_run(file)
    assert unfinished.value.code == "CONFLICT"
    assert '"resume": true' in unfinished.value.message

    # The file changed since: a resume needs force.
    with file.open("a") as changing:
        changing.write("\n# changed\n")
    with pytest.raises(MoatError) as changed:
        await client.workflow_run(file, resume=True)
    assert changed.value.code == "CONFLICT"
    assert '"force": true' in changed.value.message

    # Forced: a stays completed, b runs again, as the new record's only child.
    resumed = await client.workflow_run(file, resume=True, force=True)
    assert resumed is not None and resumed != run

    async def children_of(parent: str, count: int) -> list[RunRecord] | None:
        children = await client.list(parent=parent)
        return children if len(children) >= count else None

    assert roles(await until(lambda: children_of(resumed, 1), "a task of the resume")) == ["b"]
    going = await state_of(client, file)
    assert going["status"] == "running"
    assert going["runs"] == [run, resumed]
    assert going["tasks"]["a"]["status"] == "COMPLETED"
    await client.cancel(resumed)
    with pytest.raises(MoatError) as stopped:
        await within(client.await_run(resumed))
    assert stopped.value.code == "RUN_FAILED"

    # Fresh: started over, every task again.
    fresh = await client.workflow_run(file, fresh=True)
    assert fresh is not None
    children = await until(lambda: children_of(fresh, 2), "both tasks of the fresh run")
    assert roles(children) == ["a", "b"]
    assert (await state_of(client, file))["runs"] == [fresh], "a fresh state"
    await client.cancel(fresh)
    with pytest.raises(MoatError) as stopped:
        await within(client.await_run(fresh))
    assert stopped.value.code == "RUN_FAILED"
