"""Permission requests of the runs a client follows, answered by a handler
(docs/approvals.md): the Claude Agent SDK's `can_use_tool`, for moat's
runs."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, cast

from ._errors import MoatError
from ._types import (
    AgentEvent,
    Approval,
    PermissionHandler,
    PermissionRequest,
    PermissionResult,
    PermissionResultAllow,
    PermissionResultDeny,
)

log = logging.getLogger("moat_client")

Json = dict[str, Any]


#: An answer that came too late, for nobody's fault: the request was
#: answered already or the run ended (`INVALID_REQUEST`), the run is gone
#: (`NOT_FOUND`), or the connection is (`CONNECTION_CLOSED`).
_TOO_LATE = frozenset({"INVALID_REQUEST", "NOT_FOUND", "CONNECTION_CLOSED"})


@dataclass
class _Asked:
    """A request seen, until its run's `done`."""

    run_id: str
    task: asyncio.Task[None] | None = None
    #: Its handler is deciding (a coroutine that may be cancelled).
    asking: bool = False
    #: Someone answered it (an answer event came), or its run ended.
    answered: bool = False

    def stop(self) -> None:
        self.answered = True
        task = self.task
        if self.asking and task is not None and not task.done():
            task.cancel()


class _Answering(Protocol):
    """What answering a request takes of a client: `MoatClient`'s
    `approvals`, `approve` and `deny` (named here by shape, so this module
    does not import the client that imports it)."""

    async def approvals(self, run: str) -> list[Approval]: ...

    async def approve(
        self, run: str, *, request: int | str | None = None, always: bool = False
    ) -> Approval: ...

    async def deny(
        self, run: str, *, request: int | str | None = None, reason: str | None = None
    ) -> Approval: ...


class _Permissions:
    """Watches the events of a client's subscriptions for
    `permission_request`s and answers each once with its run's handler (or
    the client's)."""

    def __init__(self, client: _Answering) -> None:
        self._client = client
        #: The client's handler, for every run it follows.
        self.handler: PermissionHandler | None = None
        #: Handlers of single runs (run_agent's, a parallel task's).
        self._by_run: dict[str, PermissionHandler] = {}
        self._asked: dict[tuple[str, str], _Asked] = {}
        #: The tasks answering, held until they end.
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    def for_run(self, run_id: str, handler: PermissionHandler) -> Callable[[], None]:
        """Sets `handler` for one run's requests; the returned function
        removes it."""
        self._by_run[run_id] = handler

        def forget() -> None:
            if self._by_run.get(run_id) is handler:
                del self._by_run[run_id]

        return forget

    def observe(self, message: Json) -> None:
        """A `run_event` of one of the client's subscriptions, as it is
        read."""
        run = message.get("run")
        data = message.get("data")
        if not isinstance(run, str) or not isinstance(data, dict):
            return
        kind = data.get("type")
        if kind == "permission_request":
            self._requested(run, cast(AgentEvent, data))
        elif kind == "moat:permission_answer":
            payload = data.get("payload")
            request_id = payload.get("requestId") if isinstance(payload, dict) else None
            if isinstance(request_id, str):
                asked = self._asked.get((run, request_id))
                if asked is not None:
                    asked.stop()
        elif kind == "done":
            for key, asked in list(self._asked.items()):
                if asked.run_id == run:
                    asked.stop()
                    del self._asked[key]

    def close(self) -> None:
        """The connection is gone: no answer can be sent."""
        self._closed = True
        asked, self._asked = self._asked, {}
        for entry in asked.values():
            entry.stop()
        self._by_run.clear()

    def _requested(self, run: str, event: AgentEvent) -> None:
        payload = event.get("payload")
        request_id = payload.get("requestId") if isinstance(payload, dict) else None
        if self._closed or not isinstance(request_id, str):
            return  # a request the adapter only reports: its backend answered it
        handler = self._by_run.get(run, self.handler)
        try:
            number = int(request_id)
        except ValueError:
            return
        if handler is None or number < 1 or (run, request_id) in self._asked:
            return  # nobody to ask, or seen already (another stream, a replay)
        asked = _Asked(run)
        self._asked[(run, request_id)] = asked
        asked.task = asyncio.get_running_loop().create_task(
            self._ask(asked, run, number, request_id, event, handler)
        )
        self._tasks.add(asked.task)
        asked.task.add_done_callback(self._tasks.discard)
        asked.task.add_done_callback(_finished)

    async def _ask(
        self,
        asked: _Asked,
        run: str,
        number: int,
        request_id: str,
        event: AgentEvent,
        handler: PermissionHandler,
    ) -> None:
        payload = event["payload"]
        tool_name = str(payload.get("toolName", ""))
        try:
            # Only an open request is put to the handler: a replayed one (a
            # subscription from an earlier seq) may have been answered.
            approvals = await self._client.approvals(run)
            approval = next((a for a in approvals if a["number"] == number), None)
            if approval is None or approval["answer"] is not None or asked.answered:
                return
            request = PermissionRequest(
                request_id=request_id,
                number=number,
                kind=payload.get("kind") or approval["request"]["kind"],
                tool_name=tool_name,
                tool_use_id=str(payload.get("toolUseId", "")),
                input=dict(payload.get("input") or {}),
                reason=payload.get("reason"),
                event=event,
            )
            decision: PermissionResult | None
            asked.asking = True
            try:
                outcome = handler(run, request)
                if inspect.isawaitable(outcome):
                    outcome = await outcome
                if outcome is not None and not isinstance(
                    outcome, (PermissionResultAllow, PermissionResultDeny)
                ):
                    raise TypeError(
                        "a permission handler returns PermissionResultAllow, "
                        f"PermissionResultDeny or None, not {outcome!r}"
                    )
                decision = outcome
            except asyncio.CancelledError:
                if asked.answered:
                    return  # someone else answered first; nothing to send
                raise
            except Exception as error:  # the handler's: it denies
                if asked.answered:
                    return
                log.warning(
                    "the permission handler failed on request %s of %s; denying it",
                    request_id,
                    run,
                    exc_info=True,
                )
                decision = PermissionResultDeny(
                    message=f"the client's permission handler failed: {error}"
                )
            finally:
                asked.asking = False
            if decision is None or asked.answered:
                return  # left open, or answered by someone else meanwhile
            if isinstance(decision, PermissionResultAllow):
                await self._client.approve(run, request=number, always=decision.always)
            else:
                await self._client.deny(run, request=number, reason=decision.message)
        except MoatError as error:
            if error.code in _TOO_LATE:
                log.debug("request %s of %s: not answered: %s", request_id, run, error)
            else:
                log.warning("could not answer request %s of %s: %s", request_id, run, error)


def _finished(task: asyncio.Task[None]) -> None:
    """Reports what went wrong in answering a request (nothing is raised
    into the caller's code)."""
    if task.cancelled():
        return
    error = task.exception()
    if error is not None:
        log.error("answering a permission request failed", exc_info=error)
