"""The client of `moat serve` (docs/protocol.md): JSON lines over a child's
stdin/stdout or a Unix socket, requests matched to their responses by id,
events routed to their subscriptions."""

from __future__ import annotations

import asyncio
import builtins
import collections
import json
import logging
import os
import shutil
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, TypeGuard, TypeVar, cast, overload

from ._errors import MoatConnectionError, MoatError
from ._permissions import _Permissions
from ._types import (
    AdapterInfo,
    AgentEvent,
    Approval,
    Ask,
    EngineResult,
    Grants,
    Limits,
    ParallelTask,
    PermissionHandler,
    RunOptions,
    RunRecord,
    RunStatus,
    RunTraffic,
    Trust,
    WorkflowStatusResult,
    Workspace,
)

__all__ = ["EventStream", "MoatClient", "RunAgentStream", "RunParallelStream", "is_agent_event"]

log = logging.getLogger("moat_client")

_Self = TypeVar("_Self", bound="MoatClient")
_Handler = TypeVar("_Handler", bound=PermissionHandler)

Json = dict[str, Any]

#: The longest request line the server reads (4 MiB); a longer one would be
#: answered without its id, so it is refused here.
MAX_REQUEST_BYTES = 4 << 20

#: How many of a subscription's events wait for a slow reader of
#: :meth:`MoatClient.events` before the client drops the subscription and,
#: once the reader catches up, resubscribes from where it stopped (the same
#: way the server's `lagged` is handled): memory stays bounded.
DEFAULT_MAX_BUFFERED = 16384

#: How much of the server's output is read at once.
_READ_CHUNK = 1 << 18

#: How long close() waits for a spawned server to stop on its own (it
#: gives its live runs up to 5 s) before terminating it.
_EXIT_PATIENCE = 10.0


@dataclass
class _Pending:
    """A request waiting for its response."""

    op: str
    future: asyncio.Future[Json] | None
    #: Called with the result before the future is resolved (in the reader,
    #: so nothing the server sends next can come first).
    on_result: Callable[[Json], None] | None = None


class _Subscription:
    """What the server sends for one subscription to one run: its
    `run_event`s and a `lagged`, queued for one reader."""

    def __init__(self, client: MoatClient, max_buffered: int) -> None:
        self.client = client
        self.id: str | None = None
        self.max_buffered = max(1, max_buffered)
        self.queue: collections.deque[Json] = collections.deque()
        self.error: BaseException | None = None
        self.ended = False
        self._waiter: asyncio.Future[None] | None = None

    def push(self, message: Json) -> None:
        if self.ended:
            return
        if message.get("event") == "run_event" and len(self.queue) >= self.max_buffered:
            # The reader is too slow: stop the flow and say where to resume,
            # as the server does for a client that reads too slowly.
            message = {
                "event": "lagged",
                "subscriptionIds": [self.id],
                "run": message.get("run"),
                "nextSeq": message.get("seq"),
            }
            self.client._drop_subscription(self, unsubscribe=True)
        elif message.get("event") == "lagged" or _is_done(message):
            # The server ends the subscription after either.
            self.client._drop_subscription(self, unsubscribe=False)
        self.queue.append(message)
        self._wake()

    def fail(self, error: BaseException) -> None:
        if self.error is None:
            self.error = error
        self.ended = True
        self._wake()

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def get(self) -> Json:
        """The next message; the connection's error once none is left."""
        while not self.queue:
            if self.error is not None:
                raise self.error
            if self.ended:
                raise MoatConnectionError("the subscription ended without its run's done")
            self._waiter = asyncio.get_running_loop().create_future()
            try:
                await self._waiter
            finally:
                self._waiter = None
        return self.queue.popleft()


def _is_done(message: Json) -> bool:
    data = message.get("data")
    return isinstance(data, dict) and data.get("type") == "done"


class MoatClient:
    """One connection to `moat serve`.

    Make one with :meth:`spawn` (a `moat serve` child on stdio) or
    :meth:`connect` (a server's Unix socket); use it as an async context
    manager, or call :meth:`close`. Requests may be issued concurrently
    from any number of tasks.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        process: asyncio.subprocess.Process | None = None,
    ) -> None:
        """Speaks over an open connection; prefer :meth:`spawn` or
        :meth:`connect`. Must be called inside a running event loop."""
        self._reader = reader
        self._writer = writer
        self._process = process
        self._next_id = 1
        self._pending: dict[int, _Pending] = {}
        self._pending_subscribes = 0
        self._subscriptions: dict[str, _Subscription] = {}
        # Events of subscriptions whose `subscribe` response has not been
        # read yet (the server may send them first).
        self._orphans: dict[str, builtins.list[Json]] = {}
        # Why the connection is gone, once it is.
        self._lost: str | None = None
        self._closing: str | None = None
        self._close_task: asyncio.Future[None] | None = None
        self._drain_lock = asyncio.Lock()
        self._permissions = _Permissions(self)
        self._reading = asyncio.get_running_loop().create_task(self._read_all())

    # ---- making one ------------------------------------------------------

    @classmethod
    async def spawn(
        cls: type[_Self],
        bin: str | os.PathLike[str] | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str | None] | None = None,
        *,
        cwd: str | os.PathLike[str] | None = None,
        stderr: int | None = None,
    ) -> _Self:
        """Starts `moat serve` (stdio) as a child and speaks to it.

        `bin` is the `moat` binary (default: `$MOAT_BIN`, else `moat` on
        PATH); `args` are more flags for `moat serve` (e.g.
        `["--allow-env", "HOME"]`); `env` is laid over this process's
        environment (a value of None removes that variable). The child's
        stderr is this process's unless `stderr` says otherwise (e.g.
        `asyncio.subprocess.DEVNULL`).
        """
        program = os.fspath(bin) if bin is not None else _default_bin()
        environment = dict(os.environ)
        for key, value in (env or {}).items():
            if value is None:
                environment.pop(key, None)
            else:
                environment[key] = value
        process = await asyncio.create_subprocess_exec(
            program,
            "serve",
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env=environment,
            cwd=cwd,
        )
        assert process.stdin is not None and process.stdout is not None
        return cls(process.stdout, process.stdin, process)

    @classmethod
    async def connect(cls: type[_Self], socket_path: str | os.PathLike[str]) -> _Self:
        """Connects to a `moat serve --socket PATH`."""
        reader, writer = await asyncio.open_unix_connection(os.fspath(socket_path))
        return cls(reader, writer)

    async def __aenter__(self: _Self) -> _Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.close()

    # ---- the operations --------------------------------------------------

    async def run(
        self,
        adapter: str,
        prompt: str,
        *,
        options: RunOptions | Mapping[str, Any] | None = None,
        trust: Trust | None = None,
        grants: Grants | None = None,
        limits: Limits | None = None,
        parent: str | None = None,
        workspace: Workspace | None = None,
        ask: Ask | None = None,
    ) -> str:
        """Starts a run of `adapter` (a built-in's name or a component's
        path); its id, as soon as it is recorded (it goes on in the
        server). With `workspace`, the run works on a workspace of the
        project at `options["cwd"]` (absolute, granted) and may write only
        it: see :meth:`diff` and :meth:`apply`. With `ask` (`{}`,
        `{"timeoutMs": N}`, `{"noTimeout": True}`), what its grants do not
        cover is asked for instead of refused: the run waits for an answer
        (:meth:`approve`, :meth:`deny`, :meth:`on_permission_request`)."""
        fields: Json = {"adapter": adapter, "prompt": prompt}
        if options is not None:
            fields["options"] = dict(options)
        if trust is not None:
            fields["trust"] = trust
        if grants is not None:
            fields["grants"] = dict(grants)
        if limits is not None:
            fields["limits"] = dict(limits)
        if parent is not None:
            fields["parent"] = parent
        if workspace is not None:
            fields["workspace"] = dict(workspace)
        if ask is not None:
            fields["ask"] = dict(ask)
        result = await self._call("run", fields)
        return cast(str, result["run"])

    async def await_runs(self, ids: Iterable[str]) -> dict[str, EngineResult]:
        """The results of the runs, by id, once every one has ended.

        Raises :class:`MoatError` `RUN_FAILED` when one did not complete;
        its `.data["results"]` holds every result all the same.
        """
        result = await self._call("await", {"runs": builtins.list(ids)})
        return cast(dict[str, EngineResult], result["results"])

    async def await_run(self, id: str) -> EngineResult:
        """The result of one run once it has ended (see :meth:`await_runs`)."""
        results = await self.await_runs([id])
        if id in results:
            return results[id]
        # Named by a prefix: the one result there is.
        return next(iter(results.values()))

    async def cancel(self, run: str) -> None:
        """Cancels a run; a live one ends with `done` interrupted. An
        unknown, ended or already cancelled run is a success."""
        await self._call("cancel", {"run": run})

    async def get(self, run: str) -> RunRecord:
        """A run's record (`result` is None while it runs)."""
        return cast(RunRecord, await self._call("get", {"run": run}))

    async def list(
        self,
        status: RunStatus | Sequence[RunStatus] | None = None,
        limit: int | None = None,
        adapter: str | None = None,
        parent: str | None = None,
    ) -> builtins.list[RunRecord]:
        """Run records, newest first; `status` keeps only those in it (one
        status or several), `adapter` only that adapter's, `parent` only
        that run's children, `limit` at most that many."""
        fields: Json = {}
        if status is not None:
            fields["status"] = [status] if isinstance(status, str) else builtins.list(status)
        if adapter is not None:
            fields["adapter"] = adapter
        if parent is not None:
            fields["parent"] = parent
        if limit is not None:
            fields["limit"] = limit
        result = await self._call("list", fields)
        return cast(builtins.list[RunRecord], result["runs"])

    async def adapters(self) -> builtins.list[AdapterInfo]:
        """The adapters the server knows (built-ins and installed)."""
        result = await self._call("adapters", {})
        return cast(builtins.list[AdapterInfo], result["adapters"])

    async def inspect(self, adapter: str) -> AdapterInfo:
        """An adapter's description with `allowed`: the most a run of it may
        be granted by this server."""
        return cast(AdapterInfo, await self._call("inspect", {"adapter": adapter}))

    async def diff(self, run: str, *, stat: bool = False) -> str:
        """What a run with a workspace changed there, against its base: a
        unified diff ("" for nothing), or with `stat` git's `--stat`
        summary. `NOT_FOUND` for a run without a workspace."""
        fields: Json = {"run": run}
        if stat:
            fields["stat"] = True
        result = await self._call("diff", fields)
        return cast(str, result["diff"])

    async def apply(
        self, run: str, *, commits: bool = False, include_protected: bool = False
    ) -> bool:
        """Applies a run's changes to its project's working tree, all or
        nothing: True once they are in, False when it changed nothing.
        `CONFLICT` when they do not apply to the project as it is now
        (nothing was changed); `INVALID_REQUEST` while the run is live.
        With `commits`, the commits the run made in its workspace's
        repository land on the project's branch instead (fast-forward or
        cherry-picked, all or none). Links the run made that point outside
        the project and changes to files that run code later are refused
        (`BOUNDARY_VIOLATION`, nothing changed) unless `include_protected`."""
        params: dict[str, Any] = {"run": run}
        if commits:
            params["commits"] = True
        if include_protected:
            params["includeProtected"] = True
        result = await self._call("apply", params)
        return cast(bool, result["applied"])

    async def approve(
        self, run: str, *, request: int | str | None = None, always: bool = False
    ) -> Approval:
        """Approves a run's request for approval (`request`: its number, or
        a `permission_request`'s `requestId`; None: the run's only open
        one); with `always`, also every later request of the run for the
        same host, program, directory or tool. The request, answered.
        `INVALID_REQUEST` when it was answered already (by anyone: the
        first answer wins) or the run has ended; `NOT_FOUND` for an unknown
        run."""
        fields: Json = {"run": run}
        if request is not None:
            fields["request"] = _request_number(request)
        if always:
            fields["always"] = True
        result = await self._call("approve", fields)
        return cast(Approval, result["request"])

    async def deny(
        self, run: str, *, request: int | str | None = None, reason: str | None = None
    ) -> Approval:
        """Denies a run's request for approval, as :meth:`approve` approves
        one; `reason` is the run's (its `CAPABILITY_DENIED` error says it)
        and the record's."""
        fields: Json = {"run": run}
        if request is not None:
            fields["request"] = _request_number(request)
        if reason is not None:
            fields["reason"] = reason
        result = await self._call("deny", fields)
        return cast(Approval, result["request"])

    async def approvals(self, run: str) -> builtins.list[Approval]:
        """A run's requests for approval, oldest first, each with its
        `answer` (None while open)."""
        result = await self._call("approvals", {"run": run})
        return cast(builtins.list[Approval], result["requests"])

    async def traffic(self, run: str) -> RunTraffic:
        """A run's traffic through moat (docs/protocol.md, "Traffic"):
        every request and connection it made, oldest first (the first
        1,000; past them, counts per destination in `overflow`), and its
        model calls' usage as moat read it from their answers (`metered`)
        beside what its adapter reported (`reported`). A row never holds a
        body, a header's value or a query. `NOT_FOUND` for an unknown run."""
        result = await self._call("traffic", {"run": run})
        return cast(RunTraffic, result)

    async def workflow_run(
        self,
        file: str | os.PathLike[str],
        *,
        fresh: bool = False,
        resume: bool = False,
        force: bool = False,
        max_parallel: int | None = None,
    ) -> str | None:
        """Starts the workflow file `file` (a path on the server's machine,
        absolute) in the server, as `moat workflow run` would
        (docs/workflows.md): its own run record (adapter `workflow`), whose
        children are its tasks' runs (each with its task's id as `role`:
        see :meth:`list`'s `parent`), its state file in its project.
        Returns as soon as its state is taken, with its record's id, which
        :meth:`await_run`, :meth:`get` and :meth:`cancel` take as any
        run's; None on a server whose runs go to a cluster (the record
        stays with a store of that machine).

        `fresh` starts over though an earlier run did not finish (`moat
        workflow run --fresh`); `resume` goes on where its state says,
        completed tasks skipped (`moat workflow resume`), and with `force`
        though the file changed since; `max_parallel` (at least 1) is how
        many tasks run at once (else as the file says, else 4).

        :class:`MoatError` `INVALID_REQUEST`: a relative path, a file with
        a mistake (its message names the file and line), `resume` with
        `fresh`; `CONFLICT`: an earlier run did not finish (give `resume`
        or `fresh`), the file changed since (`resume` with `force`), or it
        is running already (another run holds its lock); `NOT_FOUND`:
        `resume` of a workflow that has not run here; `RUN_FAILED`: its
        state or record could not be written."""
        fields: Json = {"file": os.fspath(file)}
        if fresh:
            fields["fresh"] = True
        if resume:
            fields["resume"] = True
        if force:
            fields["force"] = True
        if max_parallel is not None:
            whole = isinstance(max_parallel, int) and not isinstance(max_parallel, bool)
            if not whole or max_parallel < 1:
                raise MoatError(
                    "INVALID_REQUEST",
                    f"max_parallel is a number of tasks (1, 2, ...), not {max_parallel!r}",
                )
            fields["maxParallel"] = max_parallel
        result = await self._call("workflow_run", fields)
        return cast("str | None", result["run"])

    async def workflow_status(self, file: str | os.PathLike[str]) -> WorkflowStatusResult:
        """The workflow file `file`'s state here (a path on the server's
        machine, absolute): `workflow`, its name, and `state`, its state
        file as `moat workflow status -o json` prints it (`status`, each
        task's `status`, the `runs` of the workflow's records, ...), None
        when it has not run here. `INVALID_REQUEST` for a relative path or
        a file with a mistake."""
        result = await self._call("workflow_status", {"file": os.fspath(file)})
        return cast(WorkflowStatusResult, result)

    @overload
    def on_permission_request(self, handler: _Handler) -> _Handler: ...

    @overload
    def on_permission_request(self, handler: None) -> None: ...

    def on_permission_request(self, handler: _Handler | None) -> _Handler | None:
        """Sets the handler of the permission requests of every run this
        client follows (:meth:`events`, :meth:`run_agent`,
        :meth:`run_parallel`), as the Claude Agent SDK's `can_use_tool`;
        returns it, so that it may be used as a decorator. None removes it.

        When a `permission_request` of such a run arrives (a run started
        with `ask`), the handler is called with the run's id and a
        :class:`PermissionRequest` (`request_id`, `kind`, `tool_name`,
        `input`, `reason`, …); its decision, returned or awaited —
        :class:`PermissionResultAllow` (`always`) or
        :class:`PermissionResultDeny` (`message`) — is sent as
        :meth:`approve` / :meth:`deny`; None leaves the request open. Each
        request is put to it once per client, and only while it is open.
        Someone else may answer first (another client, `moat approve`, the
        timeout): a coroutine handler is then cancelled, and a late answer
        is dropped without an error. A handler that raises denies the
        request (logged on the `moat_client` logger). A run's own handler
        (:meth:`run_agent`'s `on_permission_request`) comes before this
        one."""
        self._permissions.handler = handler
        return handler

    async def shutdown(self) -> None:
        """Asks the server to stop: it starts no new run, ends its live runs
        (each with `done` interrupted), then exits. :meth:`wait` waits for
        that."""
        try:
            await self._call("shutdown", {})
        except MoatConnectionError:
            # Gone before its answer was read: stopped all the same.
            if self._closing is not None:
                raise

    async def request(self, op: str, **fields: Any) -> Json:
        """Sends any request (`op` and its fields, as the protocol names
        them) and returns its `result`; raises :class:`MoatError` for its
        `error`. Events of a `subscribe` sent this way are not delivered:
        use :meth:`events`."""
        return await self._call(op, fields)

    # ---- events ----------------------------------------------------------

    def events(
        self, run_id: str, from_seq: int = 0, *, max_buffered: int = DEFAULT_MAX_BUFFERED
    ) -> EventStream:
        """The run's events from `from_seq`: stored ones, then live ones,
        each once and in order, ending after its `done`. See
        :class:`EventStream`."""
        return EventStream(self, run_id, from_seq, max_buffered=max_buffered)

    def run_agent(
        self,
        adapter: str,
        prompt: str,
        *,
        cancel_event: asyncio.Event | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        on_permission_request: PermissionHandler | None = None,
        **run_kwargs: Any,
    ) -> RunAgentStream:
        """Starts a run and yields its every event until its `done`
        (cligent's `runAgent`). Setting `cancel_event` cancels the run: the
        stream then ends with its `done` interrupted. `run_kwargs` are
        :meth:`run`'s (`options`, `trust`, `grants`, `limits`, `parent`,
        `workspace`, `ask`). `on_permission_request` answers this run's
        permission requests (before the client's own handler, see
        :meth:`on_permission_request`), as `can_use_tool` does one query's;
        it implies `ask={}` when `ask` is not given."""
        return RunAgentStream(
            self,
            adapter,
            prompt,
            cancel_event=cancel_event,
            run_kwargs=run_kwargs,
            max_buffered=max_buffered,
            on_permission_request=on_permission_request,
        )

    def run_parallel(
        self,
        tasks: Iterable[ParallelTask],
        *,
        cancel_event: asyncio.Event | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> RunParallelStream:
        """cligent's `runParallel`: starts a run per task at once and yields
        the events of them all as they come, one merged stream, each event
        with its task's `role` (when it has one), until every run's `done`.
        Each run's events keep their order; each run ends with one `done`.

        Setting `cancel_event` (or any task's own `cancel_event`) cancels
        every run: each then ends with its `done` interrupted; one set
        before the start starts no run, and each task yields one `done`
        interrupted. A task the server refuses to start (an unknown adapter,
        grants beyond the server's, …) yields an `error` (the protocol's
        code, not recoverable) and a `done` error; the others go on.
        Leaving the loop early (`aclose`, `async with`, or dropping the
        stream) cancels every run still going; a lost connection raises
        :class:`MoatConnectionError`. See :class:`ParallelTask`."""
        return RunParallelStream(self, tasks, cancel_event=cancel_event, max_buffered=max_buffered)

    # ---- the connection --------------------------------------------------

    @property
    def process(self) -> asyncio.subprocess.Process | None:
        """The spawned `moat serve`, if this client started one."""
        return self._process

    @property
    def closed(self) -> bool:
        """Whether the connection is gone (or closing)."""
        return self._lost is not None or self._closing is not None

    async def wait(self) -> int | None:
        """Waits until the server has ended the connection (e.g. after
        :meth:`shutdown`) and, for a spawned one, until its process exited;
        that exit code (None for a socket)."""
        await asyncio.wait([self._reading])
        if self._process is not None:
            return await self._process.wait()
        return None

    async def close(self) -> None:
        """Closes the connection: requests still waiting fail with
        :class:`MoatConnectionError`, event streams end with it. A spawned
        server sees its stdin close, stops its runs and exits; it is
        terminated if it has not within 10 s. Idempotent."""
        if self._close_task is None:
            self._close_task = asyncio.ensure_future(self._close())
        await asyncio.shield(self._close_task)

    async def _close(self) -> None:
        if self._closing is None:
            self._closing = "the client was closed"
        writer = self._writer
        try:
            writer.close()
            await writer.wait_closed()
        except (ConnectionError, OSError):
            pass
        process = self._process
        if process is not None:
            try:
                await asyncio.wait_for(process.wait(), _EXIT_PATIENCE)
            except asyncio.TimeoutError:
                log.warning("moat serve (pid %d) did not stop; terminating it", process.pid)
                _signal(process, "terminate")
                try:
                    await asyncio.wait_for(process.wait(), 3.0)
                except asyncio.TimeoutError:
                    _signal(process, "kill")
                    await process.wait()
        # The reader ends at the end of the output; a socket's may linger.
        await asyncio.wait([self._reading], timeout=2.0)
        if not self._reading.done():
            self._reading.cancel()
            await asyncio.wait([self._reading])
        self._connection_lost(self._closing)

    # ---- sending and receiving -------------------------------------------

    def _encode(self, op: str, fields: Mapping[str, Any]) -> tuple[int, bytes]:
        id = self._next_id
        self._next_id += 1
        message = {"id": id, "op": op, **{k: v for k, v in fields.items() if k not in ("id", "op")}}
        line = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        if len(line) > MAX_REQUEST_BYTES:
            raise MoatError(
                "INVALID_REQUEST",
                f"{op}: a request line is at most {MAX_REQUEST_BYTES} bytes (this one is {len(line)})",
            )
        return id, line

    def _raise_if_closed(self) -> None:
        reason = self._lost or self._closing
        if reason is not None:
            raise MoatConnectionError(reason)

    async def _call(
        self,
        op: str,
        fields: Mapping[str, Any],
        on_result: Callable[[Json], None] | None = None,
    ) -> Json:
        self._raise_if_closed()
        id, line = self._encode(op, fields)
        future: asyncio.Future[Json] = asyncio.get_running_loop().create_future()
        pending = _Pending(op, future, on_result)
        self._pending[id] = pending
        if op == "subscribe":
            self._pending_subscribes += 1
        try:
            try:
                self._writer.write(line)
                async with self._drain_lock:
                    await self._writer.drain()
            except (ConnectionError, OSError, RuntimeError) as error:
                lost = MoatConnectionError(f"cannot send to moat serve: {error}")
                self._forget_pending(id)
                raise lost from error
            return await future
        except asyncio.CancelledError:
            self._abandon(id, pending)
            raise

    def _abandon(self, id: int, pending: _Pending) -> None:
        """The caller stopped waiting for request `id`."""
        if self._pending.get(id) is not pending:
            return
        if pending.op == "subscribe":
            # Its response will still come: end what it started.
            pending.future = None
            pending.on_result = lambda result: self._unsubscribe_nowait(
                result.get("subscriptionId")
            )
        else:
            del self._pending[id]

    def _forget_pending(self, id: int) -> None:
        pending = self._pending.pop(id, None)
        if pending is not None and pending.op == "subscribe":
            self._subscribe_answered()

    def _send_nowait(self, op: str, fields: Mapping[str, Any]) -> None:
        """Sends a request whose answer nobody waits for (its response is
        dropped). Synchronous: usable from finalizers and callbacks."""
        if self.closed:
            return
        try:
            _, line = self._encode(op, fields)
            self._writer.write(line)
        except Exception:  # noqa: BLE001, S110  (the connection is going: nothing to stop)
            pass

    def _unsubscribe_nowait(self, subscription_id: Any) -> None:
        if isinstance(subscription_id, str):
            self._send_nowait("unsubscribe", {"subscriptionId": subscription_id})

    async def _subscribe(self, run: str, from_seq: int, max_buffered: int) -> _Subscription:
        subscription = _Subscription(self, max_buffered)

        def claim(result: Json) -> None:
            id = result["subscriptionId"]
            subscription.id = id
            self._subscriptions[id] = subscription
            for message in self._orphans.pop(id, ()):
                subscription.push(message)

        await self._call("subscribe", {"runs": [run], "fromSeq": from_seq}, on_result=claim)
        if self._lost is not None and subscription.error is None:
            subscription.fail(MoatConnectionError(self._lost))
        return subscription

    def _drop_subscription(self, subscription: _Subscription, *, unsubscribe: bool) -> None:
        """Stops routing to `subscription` (and, if asked, tells the
        server)."""
        subscription.ended = True
        id = subscription.id
        if id is not None and self._subscriptions.get(id) is subscription:
            del self._subscriptions[id]
            if unsubscribe:
                self._unsubscribe_nowait(id)

    def _subscribe_answered(self) -> None:
        self._pending_subscribes -= 1
        if self._pending_subscribes <= 0:
            self._pending_subscribes = 0
            self._orphans.clear()

    async def _read_all(self) -> None:
        """Reads every line the server sends until the end, routing each."""
        reason = "moat serve closed the connection"
        buffer = bytearray()
        try:
            while True:
                chunk = await self._reader.read(_READ_CHUNK)
                if not chunk:
                    if buffer.strip():
                        self._dispatch(bytes(buffer))
                    break
                buffer += chunk
                start = 0
                while True:
                    end = buffer.find(b"\n", start)
                    if end < 0:
                        break
                    line = bytes(buffer[start:end])
                    start = end + 1
                    if line.strip():
                        self._dispatch(line)
                del buffer[:start]
        except asyncio.CancelledError:
            reason = self._closing or "the client stopped reading"
            raise
            if self._process is not None and self._closing is None:
                # Say how it ended, if it did.
                try:
                    code = await asyncio.wait_for(self._process.wait(), 0.5)
                    reason += f" (it exited with {code})"
                except asyncio.TimeoutError:
                    pass
        except Exception as error:  # noqa: BLE001  (a broken connection: reported below)
            reason = f"reading from moat serve failed: {error!r}"
        finally:
            self._connection_lost(self._closing or reason)

    def _dispatch(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            log.warning("moat serve sent a line that is not JSON: %.200r", line)
            return
        if not isinstance(message, dict):
            log.warning("moat serve sent a line that is not an object: %.200r", line)
            return
        try:
            if "event" in message:
                self._dispatch_event(message)
            else:
                self._dispatch_response(message)
        except Exception:  # never let one bad message end the connection
            log.exception("moat serve sent a message the client cannot handle: %.200r", line)

    def _dispatch_response(self, message: Json) -> None:
        id = message.get("id")
        pending = self._pending.pop(id, None) if isinstance(id, int) else None
        if pending is None:
            if id is None and "error" in message:
                log.warning("moat serve could not read a request: %s", message["error"])
            return
        try:
            error = message.get("error")
            future = pending.future
            if error is not None:
                if future is not None and not future.done():
                    future.set_exception(
                        MoatError(
                            str(error.get("code", "")),
                            str(error.get("message", "")),
                            error.get("data"),
                        )
                    )
                return
            result = message.get("result")
            if not isinstance(result, dict):
                result = {}
            if pending.on_result is not None:
                pending.on_result(result)
            if future is not None and not future.done():
                future.set_result(result)
        finally:
            if pending.op == "subscribe":
                self._subscribe_answered()

    def _dispatch_event(self, message: Json) -> None:
        kind = message.get("event")
        if kind == "run_event":
            try:
                self._permissions.observe(message)
            except Exception:  # never let a permission request stop the events
                log.exception("a permission request could not be handled")
            ids = [message.get("subscriptionId")]
        elif kind == "lagged":
            ids = message.get("subscriptionIds") or []
        else:
            log.debug("moat serve sent an unknown event: %r", kind)
            return
        for id in ids:
            if not isinstance(id, str):
                continue
            subscription = self._subscriptions.get(id)
            if subscription is not None:
                subscription.push(message)
            elif self._pending_subscribes > 0:
                self._orphans.setdefault(id, []).append(message)

    def _connection_lost(self, reason: str) -> None:
        """Fails whatever still waits for the server (each with an error of
        its own)."""
        if self._lost is None:
            self._lost = reason
        reason = self._lost
        self._permissions.close()
        pending, self._pending = self._pending, {}
        for request in pending.values():
            if request.future is not None and not request.future.done():
                request.future.set_exception(MoatConnectionError(reason))
        self._pending_subscribes = 0
        self._orphans.clear()
        subscriptions, self._subscriptions = self._subscriptions, {}
        for subscription in subscriptions.values():
            subscription.fail(MoatConnectionError(reason))


class EventStream(AsyncIterator[AgentEvent]):
    """An async iterator over one run's events (each the `data` of a
    `run_event`), ending after its `done`.

    A `lagged` (the server's, or the client's own when the loop reads more
    slowly than `max_buffered` events arrive) is handled transparently: the
    stream resubscribes from the next seq it needs, and checks every seq, so
    nothing is missed or repeated. Leaving the loop early unsubscribes (at
    once when the stream is dropped, or with :meth:`aclose` / `async
    with`). Raises :class:`MoatError` (e.g. `NOT_FOUND` for an unknown run)
    and :class:`MoatConnectionError` when the connection is lost first.
    """

    def __init__(
        self,
        client: MoatClient,
        run_id: str,
        from_seq: int = 0,
        *,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        self._client = client
        self.run_id = run_id
        #: The seq of the next event to yield.
        self.next_seq = from_seq
        #: How many times the stream resubscribed after a `lagged`.
        self.lags = 0
        self._max_buffered = max_buffered
        self._subscription: _Subscription | None = None
        self._finished = False
        self._gaps = 0

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._finished:
            raise StopAsyncIteration
        try:
            return await self._next()
        except asyncio.CancelledError:
            raise  # the caller stopped waiting; the stream can go on
        except BaseException:
            self._stop()
            raise

    async def _next(self) -> AgentEvent:
        while True:
            if self._subscription is None:
                self._subscription = await self._client._subscribe(
                    self.run_id, self.next_seq, self._max_buffered
                )
            message = await self._subscription.get()
            if message.get("event") == "lagged":
                # That subscription has ended; the rest comes from the store.
                self._subscription = None
                self.lags += 1
                continue
            seq = message.get("seq")
            if not isinstance(seq, int) or seq < self.next_seq:
                continue  # seen already
            if seq > self.next_seq:
                # A gap (never from a correct server): ask again from the
                # one missing.
                self._gaps += 1
                if self._gaps > 3:
                    raise MoatError(
                        "PROTOCOL_ERROR",
                        f"the events of {self.run_id} skip from seq {self.next_seq} to {seq}",
                    )
                self._stop_subscription()
                continue
            self._gaps = 0
            self.next_seq += 1
            data = cast(AgentEvent, message.get("data"))
            if isinstance(data, dict) and data.get("type") == "done":
                self._subscription = None  # the server ended it
                self._finished = True
            return data

    def _stop_subscription(self) -> None:
        subscription, self._subscription = self._subscription, None
        if subscription is not None and not subscription.ended:
            self._client._drop_subscription(subscription, unsubscribe=True)

    def _stop(self) -> None:
        self._finished = True
        self._stop_subscription()

    @property
    def finished(self) -> bool:
        """Whether the stream has ended (its `done`, an error, or closed)."""
        return self._finished

    async def aclose(self) -> None:
        """Stops the stream early: unsubscribes. Idempotent."""
        self._stop()

    async def __aenter__(self) -> EventStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._stop()

    def __del__(self) -> None:
        try:
            if not self._finished:
                self._stop()
        except Exception:  # noqa: BLE001, S110  (a finalizer must not raise)
            pass


class RunAgentStream(AsyncIterator[AgentEvent]):
    """cligent's `runAgent` loop over moat: starts a run on the first
    iteration, then yields its every event until its `done`.

    Setting the `cancel_event` (or calling :meth:`cancel`) cancels the run;
    the stream goes on until its `done` (interrupted). Leaving the loop
    before the `done` cancels the run too. `run_id` is the run's id once it
    started.
    """

    def __init__(
        self,
        client: MoatClient,
        adapter: str,
        prompt: str,
        *,
        cancel_event: asyncio.Event | None = None,
        run_kwargs: Mapping[str, Any] | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
        on_permission_request: PermissionHandler | None = None,
    ) -> None:
        self._client = client
        self._adapter = adapter
        self._prompt = prompt
        self._cancel_event = cancel_event
        self._run_kwargs = _asking(dict(run_kwargs or {}), on_permission_request)
        self._max_buffered = max_buffered
        self._on_permission_request = on_permission_request
        self._forget: Callable[[], None] | None = None
        self.run_id: str | None = None
        self._events: EventStream | None = None
        self._watch: asyncio.Future[Any] | None = None
        self._finished = False
        self._cancelled = False

    def __aiter__(self) -> RunAgentStream:
        return self

    async def __anext__(self) -> AgentEvent:
        if self._finished:
            raise StopAsyncIteration
        if self._events is None:
            try:
                self.run_id = await self._client.run(
                    self._adapter, self._prompt, **self._run_kwargs
                )
            except BaseException:
                self._finished = True
                raise
            if self._on_permission_request is not None:
                self._forget = self._client._permissions.for_run(
                    self.run_id, self._on_permission_request
                )
            self._events = EventStream(
                self._client, self.run_id, 0, max_buffered=self._max_buffered
            )
            if self._cancelled:
                self._send_cancel()
            elif self._cancel_event is not None:
                # Weakly: a stream left early is dropped (and so cancels its
                # run) even while the event is still unset.
                me = weakref.ref(self)

                def on_cancel_event(watch: asyncio.Future[Any]) -> None:
                    stream = me()
                    if stream is not None and not watch.cancelled():
                        stream.cancel()

                self._watch = asyncio.ensure_future(self._cancel_event.wait())
                self._watch.add_done_callback(on_cancel_event)
        try:
            event = await self._events.__anext__()
        except asyncio.CancelledError:
            raise
        except BaseException:
            self._finish()
            raise
        if self._events.finished:
            self._finish()
        return event

    def cancel(self) -> None:
        """Cancels the run (once it started; at its start otherwise). The
        stream then ends with the run's `done` interrupted."""
        if self._cancelled or self._finished:
            return
        self._cancelled = True
        if self.run_id is not None:
            self._send_cancel()

    def _send_cancel(self) -> None:
        assert self.run_id is not None
        self._client._send_nowait("cancel", {"run": self.run_id})

    def _finish(self) -> None:
        self._finished = True
        watch, self._watch = self._watch, None
        if watch is not None and not watch.done():
            watch.cancel()
        forget, self._forget = self._forget, None
        if forget is not None:
            forget()

    @property
    def finished(self) -> bool:
        """Whether the stream has ended."""
        return self._finished

    async def aclose(self) -> None:
        """Leaves early: cancels the run and stops its events. Idempotent."""
        self._leave()

    def _leave(self) -> None:
        if self._finished:
            return
        if self.run_id is not None:
            self.cancel()
        if self._events is not None:
            self._events._stop()
        self._finish()

    async def __aenter__(self) -> RunAgentStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._leave()

    def __del__(self) -> None:
        try:
            self._leave()
        except Exception:  # noqa: BLE001, S110  (a finalizer must not raise)
            pass


#: The server's refusals of a request: a parallel task it refuses fails alone.
_REFUSALS = frozenset(
    {"INVALID_REQUEST", "NOT_FOUND", "BOUNDARY_VIOLATION", "RUN_FAILED", "CONFLICT"}
)

#: A parallel task's keys that are :meth:`MoatClient.run`'s.
_RUN_KEYS = ("options", "trust", "grants", "limits", "parent", "workspace", "ask")


def _asking(run_kwargs: dict[str, Any], handler: PermissionHandler | None) -> dict[str, Any]:
    """A run with a permission handler of its own asks: the handler is there
    to answer."""
    if handler is not None and run_kwargs.get("ask") is None:
        run_kwargs["ask"] = {}
    return run_kwargs


def _request_number(request: int | str) -> int:
    """A request's number as the protocol takes it (`"1"` → 1)."""
    try:
        number = int(request)
    except ValueError:
        number = 0
    if isinstance(request, bool) or number < 1:
        raise MoatError(
            "INVALID_REQUEST", f"a request is named by its number (1, 2, …), not {request!r}"
        )
    return number


def is_agent_event(value: object) -> TypeGuard[AgentEvent]:
    """Whether `value` has an event's shape: a `type`, `agent`,
    `timestamp`, `sessionId` and a `payload` (cligent's `isAgentEvent`, the
    same test; the payload is not checked against the type)."""
    return (
        isinstance(value, dict)
        and isinstance(value.get("type"), str)
        and isinstance(value.get("agent"), str)
        and isinstance(value.get("timestamp"), (int, float))
        and not isinstance(value.get("timestamp"), bool)
        and isinstance(value.get("sessionId"), str)
        and "payload" in value
    )


def _with_role(event: AgentEvent, role: str | None) -> AgentEvent:
    """`event` with `role` set where `moat parallel` prints it (before
    `metadata` and `payload`)."""
    if role is None:
        return event
    out: dict[str, Any] = {}
    for key, value in event.items():
        if key == "role":
            continue
        if key in ("metadata", "payload") and "role" not in out:
            out["role"] = role
        out[key] = value
    out.setdefault("role", role)
    return cast(AgentEvent, out)


def _synthetic(agent: str, type: str, payload: Json, session_id: str) -> AgentEvent:
    return {
        "type": type,
        "agent": agent,
        "timestamp": int(time.time() * 1000),
        "sessionId": session_id,
        "payload": payload,
    }


def _interrupted_done(agent: str, resume: Any) -> AgentEvent:
    """The `done` of a task that never started (cligent's, for a signal
    aborted before the start)."""
    payload: Json = {"status": "interrupted"}
    if isinstance(resume, str) and resume:
        payload["resumeToken"] = resume
    payload.update(usage={"toolUses": 0}, durationMs=0)
    return _synthetic(agent, "done", payload, str(uuid.uuid4()))


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Marks an abandoned future's outcome as seen (no "never retrieved")."""
    if not future.cancelled():
        future.exception()


class _Task:
    """One task of a :class:`RunParallelStream`."""

    def __init__(self, index: int, task: ParallelTask) -> None:
        if not isinstance(task.get("adapter"), str) or not isinstance(task.get("prompt"), str):
            raise TypeError(
                f"parallel task {index} needs an adapter and a prompt (strings): {task!r}"
            )
        self.index = index
        self.adapter: str = task["adapter"]
        self.prompt: str = task["prompt"]
        self.role: str | None = task.get("role")
        self.on_permission_request: PermissionHandler | None = task.get("on_permission_request")
        self.run_kwargs: dict[str, Any] = _asking(
            {k: v for k, v in task.items() if k in _RUN_KEYS}, self.on_permission_request
        )
        self.cancel_event: asyncio.Event | None = task.get("cancel_event")
        #: Removes its permission handler.
        self.forget: Callable[[], None] | None = None
        self.start: asyncio.Future[str] | None = None
        self.run_id: str | None = None
        self.events: EventStream | None = None
        #: Its `done` was yielded (or queued), or it was refused.
        self.done = False
        self.cancelled = False

    @property
    def resume(self) -> Any:
        options = self.run_kwargs.get("options")
        return options.get("resume") if isinstance(options, Mapping) else None


class RunParallelStream(AsyncIterator[AgentEvent]):
    """cligent's `runParallel` over moat (:meth:`MoatClient.run_parallel`):
    starts a run per task on the first iteration, then yields the events of
    them all as they come, each with its task's `role`, until every run's
    `done`. `run_ids` are the runs' ids, by task, once started."""

    def __init__(
        self,
        client: MoatClient,
        tasks: Iterable[ParallelTask],
        *,
        cancel_event: asyncio.Event | None = None,
        max_buffered: int = DEFAULT_MAX_BUFFERED,
    ) -> None:
        self._client = client
        self._tasks = [_Task(index, task) for index, task in enumerate(tasks)]
        self._cancel_events = [
            event
            for event in [cancel_event, *(task.cancel_event for task in self._tasks)]
            if event is not None
        ]
        self._max_buffered = max_buffered
        self._ready: collections.deque[AgentEvent] = collections.deque()
        #: What is awaited: a task's start (`client.run`) or its next event.
        self._pending: dict[asyncio.Future[Any], tuple[str, _Task]] = {}
        self._watches: builtins.list[asyncio.Future[Any]] = []
        self._started = False
        self._finished = False
        self._aborted = False
        self._started_at = time.time()

    @property
    def run_ids(self) -> builtins.list[str | None]:
        """Each task's run id, once its run started (None before, or when
        the server refused it)."""
        return [task.run_id for task in self._tasks]

    @property
    def finished(self) -> bool:
        """Whether the stream has ended."""
        return self._finished and not self._ready

    def __aiter__(self) -> RunParallelStream:
        return self

    async def __anext__(self) -> AgentEvent:
        if not self._started and not self._finished:
            self._started = True
            self._start()
        while True:
            if self._ready:
                return self._ready.popleft()
            if self._finished or not self._pending:
                self._finish()
                raise StopAsyncIteration
            done, _ = await asyncio.wait(self._pending, return_when=asyncio.FIRST_COMPLETED)
            # Task order among what came at once; each task's own order is kept.
            for future in sorted(done, key=lambda f: self._pending[f][1].index):
                kind, task = self._pending.pop(future)
                try:
                    if kind == "start":
                        self._on_start(task, future)
                    else:
                        self._on_event(task, future)
                except BaseException:
                    self._leave()
                    raise

    def _start(self) -> None:
        if not self._tasks:
            self._finished = True
            return
        if self._aborted or any(event.is_set() for event in self._cancel_events):
            # As cligent: no run starts; each task ends interrupted.
            for task in self._tasks:
                task.done = True
                self._ready.append(
                    _with_role(_interrupted_done(task.adapter, task.resume), task.role)
                )
            self._finished = True
            return
        for task in self._tasks:
            task.start = asyncio.ensure_future(
                self._client.run(task.adapter, task.prompt, **task.run_kwargs)
            )
            self._pending[task.start] = ("start", task)
        # Weakly: a stream left early is dropped (and so cancels its runs)
        # even while the events are still unset.
        me = weakref.ref(self)

        def on_cancel_event(watch: asyncio.Future[Any]) -> None:
            stream = me()
            if stream is not None and not watch.cancelled():
                stream.cancel()

        for event in self._cancel_events:
            watch = asyncio.ensure_future(event.wait())
            watch.add_done_callback(on_cancel_event)
            self._watches.append(watch)

    def _on_start(self, task: _Task, future: asyncio.Future[Any]) -> None:
        error = future.exception()
        if error is not None:
            if isinstance(error, MoatConnectionError) or not (
                isinstance(error, MoatError) and error.code in _REFUSALS
            ):
                raise error
            # Refused: this task fails alone, as cligent's does.
            task.done = True
            session = str(uuid.uuid4())
            duration = int((time.time() - self._started_at) * 1000)
            for event in (
                _synthetic(
                    task.adapter,
                    "error",
                    {"code": error.code, "message": error.message, "recoverable": False},
                    session,
                ),
                _synthetic(
                    task.adapter,
                    "done",
                    {"status": "error", "usage": {"toolUses": 0}, "durationMs": duration},
                    session,
                ),
            ):
                self._ready.append(_with_role(event, task.role))
            return
        task.run_id = cast(str, future.result())
        if task.on_permission_request is not None:
            task.forget = self._client._permissions.for_run(task.run_id, task.on_permission_request)
        task.events = EventStream(self._client, task.run_id, 0, max_buffered=self._max_buffered)
        if self._aborted:
            self._cancel_run(task)
        self._next(task)

    def _on_event(self, task: _Task, future: asyncio.Future[Any]) -> None:
        error = future.exception()
        if isinstance(error, StopAsyncIteration):
            task.done = True  # (a stream ends after its done, or raises)
            return
        if error is not None:
            raise error
        event = cast(AgentEvent, future.result())
        if event.get("type") == "done":
            task.done = True
        else:
            self._next(task)
        self._ready.append(_with_role(event, task.role))

    def _next(self, task: _Task) -> None:
        assert task.events is not None
        self._pending[asyncio.ensure_future(task.events.__anext__())] = ("event", task)

    def cancel(self) -> None:
        """Cancels every run (those not started yet when they start); each
        then ends with its `done` interrupted. Before the first iteration:
        no run starts, and each task yields one `done` interrupted."""
        if self._aborted or self._finished:
            return
        self._aborted = True
        for task in self._tasks:
            self._cancel_run(task)

    def _cancel_run(self, task: _Task) -> None:
        if task.run_id is not None and not task.done and not task.cancelled:
            task.cancelled = True
            self._client._send_nowait("cancel", {"run": task.run_id})

    def _finish(self) -> None:
        self._finished = True
        watches, self._watches = self._watches, []
        for watch in watches:
            if not watch.done():
                watch.cancel()
        for task in self._tasks:
            forget, task.forget = task.forget, None
            if forget is not None:
                forget()

    async def aclose(self) -> None:
        """Leaves early: cancels every run still going. Idempotent."""
        self._leave()

    def _leave(self) -> None:
        if self._finished and not self._pending:
            return
        self._finish()
        self._ready.clear()
        client = self._client
        for future, (kind, task) in builtins.list(self._pending.items()):
            if kind == "event":
                future.cancel()  # the event stream itself is stopped below
                future.add_done_callback(_retrieve)
            else:
                # The run may be recorded already: cancel it once its id comes.
                def cancel_started(start: asyncio.Future[Any]) -> None:
                    if not start.cancelled() and start.exception() is None:
                        client._send_nowait("cancel", {"run": start.result()})

                future.add_done_callback(cancel_started)
        self._pending.clear()
        for task in self._tasks:
            if task.done:
                continue
            self._cancel_run(task)
            if task.events is not None:
                task.events._stop()

    async def __aenter__(self) -> RunParallelStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        self._leave()

    def __del__(self) -> None:
        try:
            self._leave()
        except Exception:  # noqa: BLE001, S110  (a finalizer must not raise)
            pass


def _default_bin() -> str:
    explicit = os.environ.get("MOAT_BIN")
    if explicit:
        return explicit
    return shutil.which("moat") or "moat"


def _signal(process: asyncio.subprocess.Process, how: str) -> None:
    try:
        if how == "kill":
            process.kill()
        else:
            process.terminate()
    except ProcessLookupError:
        pass
