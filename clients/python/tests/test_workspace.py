"""Runs on workspaces of a project (docs/workspaces.md): `run` with
`workspace`, then `diff` and `apply`, against the real `moat serve` and a
real git repository."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Awaitable
from pathlib import Path
from typing import TypeVar

import pytest
from conftest import PATIENCE, Spawn

from moat_client import MoatClient, MoatError, ParallelTask

T = TypeVar("T")


async def within(awaitable: Awaitable[T], seconds: float = PATIENCE) -> T:
    return await asyncio.wait_for(awaitable, seconds)


def git_repo(tmp_path: Path) -> Path:
    """A git repository with one committed file, `notes.txt`."""
    repo = tmp_path / "project"
    repo.mkdir()

    def git(*args: str) -> None:
        subprocess.run(
            [
                "git",
                "-c",
                "user.name=moat",
                "-c",
                "user.email=moat@example.com",
                "-c",
                "commit.gpgsign=false",
                *args,
            ],
            cwd=repo,
            check=True,
            capture_output=True,
        )

    git("init", "-q")
    (repo / "notes.txt").write_text("one\n")
    git("add", "notes.txt")
    git("commit", "-q", "-m", "init")
    return repo


async def workspace_server(spawn: Spawn, tmp_path: Path, repo: Path) -> tuple[MoatClient, Path]:
    """A server that may write `repo`, making workspaces in a directory of
    the test's."""
    workspaces = tmp_path / "workspaces"
    workspaces.mkdir()
    client = await spawn([f"--allow-write={repo}", f"--workspace-dir={workspaces}"])
    return client, workspaces


async def ended_echo_in_a_worktree(client: MoatClient, repo: Path) -> tuple[str, Path]:
    """An echo run granted `repo`, in a worktree of it, ended well: its id
    and its workspace (where the test then does what an agent would)."""
    run = await client.run(
        "echo",
        "hello",
        options={"cwd": str(repo)},
        grants={"write": [str(repo)]},
        workspace={"mode": "worktree"},
    )
    assert (await within(client.await_run(run)))["status"] == "success"
    return run, Path((await client.get(run))["options"]["cwd"])


async def test_a_run_on_a_worktree_diff_and_apply_once(spawn: Spawn, tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    client, workspaces = await workspace_server(spawn, tmp_path, repo)
    run, workspace = await ended_echo_in_a_worktree(client, repo)

    # The run worked in its workspace, and may write only it.
    record = await client.get(run)
    assert workspace != repo
    assert workspace.is_relative_to(workspaces), workspace
    assert record["grants"]["write"] == [str(workspace)]
    assert await client.diff(run) == "", "echo changed nothing"

    # What an agent would do there.
    (workspace / "notes.txt").write_text("one\ntwo\n")
    diff = await client.diff(run)
    assert "diff --git a/notes.txt b/notes.txt\n" in diff
    assert "\n+two\n" in diff
    stat = await client.diff(run, stat=True)
    assert "1 file changed" in stat
    assert "+two" not in stat
    assert (repo / "notes.txt").read_text() == "one\n", "untouched until apply"

    assert await client.apply(run) is True
    assert (repo / "notes.txt").read_text() == "one\ntwo\n"

    # Applied already: its changes no longer apply, and nothing changes.
    with pytest.raises(MoatError) as conflict:
        await client.apply(run)
    assert conflict.value.code == "CONFLICT"
    assert "nothing was changed" in conflict.value.message
    assert (repo / "notes.txt").read_text() == "one\ntwo\n"

    # A run without a workspace has nothing to diff or apply.
    plain = await client.run("echo", "no workspace")
    await within(client.await_run(plain))
    with pytest.raises(MoatError) as missing:
        await client.diff(plain)
    assert missing.value.code == "NOT_FOUND"
    with pytest.raises(MoatError) as missing:
        await client.diff(plain, stat=True)
    assert missing.value.code == "NOT_FOUND"
    with pytest.raises(MoatError) as missing:
        await client.apply(plain)
    assert missing.value.code == "NOT_FOUND"


async def test_the_commits_of_a_run_in_a_worktree_land_with_apply_commits(
    spawn: Spawn, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    client, _ = await workspace_server(spawn, tmp_path, repo)
    run, workspace = await ended_echo_in_a_worktree(client, repo)
    # What an agent would do there: commit, in the run's own repository.
    (workspace / "notes.txt").write_text("one\ntwo\n")
    subprocess.run(
        ["git", "-c", "user.name=Agent", "-c", "user.email=agent@example.com",
         "commit", "-q", "-am", "Add two"],
        cwd=workspace,
        check=True,
    )
    head = ["git", "log", "-1", "--format=%an|%s"]
    assert subprocess.run(head, cwd=repo, capture_output=True, text=True).stdout != "Agent|Add two\n"

    assert await client.apply(run, commits=True) is True
    assert subprocess.run(head, cwd=repo, capture_output=True, text=True).stdout == "Agent|Add two\n"
    assert (repo / "notes.txt").read_text() == "one\ntwo\n"


async def test_run_agent_and_run_parallel_pass_workspace(spawn: Spawn, tmp_path: Path) -> None:
    repo = git_repo(tmp_path)
    client, workspaces = await workspace_server(spawn, tmp_path, repo)

    agent_run: str | None = None
    async for event in client.run_agent(
        "echo",
        "hi",
        options={"cwd": str(repo)},
        grants={"write": [str(repo)]},
        workspace={"mode": "copy"},
    ):
        if event["type"] == "init":
            agent_run = event["metadata"]["runId"]
    assert agent_run is not None
    record = await client.get(agent_run)
    assert Path(record["options"]["cwd"]).is_relative_to(workspaces), record["options"]
    assert await client.diff(agent_run) == ""

    # Each task a workspace of its own.
    tasks: list[ParallelTask] = [
        {
            "adapter": "echo",
            "prompt": role,
            "role": role,
            "options": {"cwd": str(repo)},
            "grants": {"write": [str(repo)]},
            "workspace": {"mode": "worktree", "base": "HEAD"},
        }
        for role in ("a", "b")
    ]
    runs: set[str] = set()
    async for event in client.run_parallel(tasks):
        assert event["type"] != "error", event
        if event["type"] == "init":
            runs.add(event["metadata"]["runId"])
    assert len(runs) == 2
    cwds: set[str] = set()
    for run in runs:
        options = (await client.get(run))["options"]
        assert Path(options["cwd"]).is_relative_to(workspaces), options
        cwds.add(options["cwd"])
        assert await client.diff(run) == ""
    assert len(cwds) == 2, "a workspace per task"


async def test_a_link_out_of_the_project_is_applied_only_when_included(
    spawn: Spawn, tmp_path: Path
) -> None:
    repo = git_repo(tmp_path)
    client, _ = await workspace_server(spawn, tmp_path, repo)
    run, workspace = await ended_echo_in_a_worktree(client, repo)
    # What a planted link would be: the next tool writing there writes /etc.
    (workspace / "out").symlink_to("/etc")
    (workspace / "notes.txt").write_text("one\ntwo\n")

    with pytest.raises(MoatError) as refused:
        await client.apply(run)
    assert refused.value.code == "BOUNDARY_VIOLATION"
    assert "out (a link to /etc, outside the project)" in refused.value.message
    assert not (repo / "out").is_symlink()
    assert (repo / "notes.txt").read_text() == "one\n"

    assert await client.apply(run, include_protected=True) is True
    assert (repo / "out").readlink() == Path("/etc")
