"""A write call over MCP: staged for the person's approval when it must be, and waited for until they decide.

``ApprovalFlow`` is one session's side of it (``ApprovalFlow.of(runner)``): the call run up to its staging in the
session's write order (``ToolRunner.in_order``); a call that needs no approval answered at once, a detached one
(``SessionConfig.review_detached``) answered ``staged`` at once; otherwise the decision awaited on the event loop
(polling the database, holding no thread and not the session's order, reporting progress so the host does not
give up), then applied exactly as shown or refused, and recorded.

The protocol era decides how the host is asked (``server.mcp.host_approval``): on a 2025-era connection the
server sends ``elicitation/create`` inside the call while it keeps polling for the dashboard's decision; on
2026-07-28 the call answers an ``InputRequiredResult`` (the form and a sealed request state) and the host
retries it with the person's answer. A session whose ``write.approval_channel`` is ``dashboard``, a detached
session, or a client that declared no form elicitation, waits for the dashboard alone, as before.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import anyio
import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from server.activity import approvals, review_access
from server.activity.approvals import Pending
from server.errors import KmsError
from server.mcp import host_approval
from server.mcp.service_state import session_pages
from server.mcp.tools.base import WriteSpec
from server.mcp.tools.dispatch import ToolRunner
from server.writes import staging
from server.writes.held_call import POLL_S, Staged, staged_answer

log = logging.getLogger("kms.tools")
Answer = tuple[dict[str, Any], bool]
Progress = Callable[[float, float | None, str], Awaitable[None]]  # (progress, total, message): MCP progress
Ask = Callable[[str], Awaitable[host_approval.HostAnswer]]  # the host puts a staged call (its text) to the person
PROGRESS_S = 1.0  # how often a call waiting for approval tells the host it is still alive


def _reraise(exc: Exception) -> dict[str, Any]:
    raise exc


@dataclass(frozen=True)
class Parked:
    """A staged call the host puts to the person, to be retried with their answer (``resume_write``)."""

    ticket: Staged
    tool: str
    arguments: dict[str, Any]
    state: str  # the request state the host echoes
    message: str  # the dialog's text


class ApprovalFlow:
    """One session's write calls from the event loop, with their approval (see the module docstring)."""

    def __init__(self, runner: ToolRunner) -> None:
        self.runner = runner
        self.session, self.config, self.writes = runner.session, runner.config, runner.writes
        self._states: host_approval.ApprovalStates | None = None  # request states minted for the host (2026-07-28)
        self._parked: dict[int, Parked] = {}  # staged calls whose host will retry with the person's answer

    @classmethod
    def of(cls, runner: ToolRunner) -> ApprovalFlow:
        """``runner``'s flow, made at its first write call; the runner closes it when its session ends."""
        if runner.approval is None:
            runner.approval = cls(runner)
        flow = runner.approval
        assert isinstance(flow, ApprovalFlow)
        return flow

    def close(self) -> None:
        """The session ends: its host can no longer come back with an answer to a parked call."""
        for pending_id in list(self._parked):
            self._drop_parked(pending_id)

    async def _stage(
        self, spec: WriteSpec[Any], arguments: dict[str, Any], host_asks: bool = False
    ) -> tuple[tuple[dict[str, Any], bool], Staged | None]:
        """The call run up to its staging: its answer when it needs no approval (or was refused), else the
        ticket of the call now waiting for the person (``host_asks``: the host will ask them about it too)."""
        staged: list[Staged | None] = [None]
        quiet = host_asks and self.config.approval_channel == "host"  # the dashboard's bell waits for the host

        def stage() -> dict[str, Any]:
            staged[0] = self.writes.stage(spec, arguments, asking_host=quiet)
            return {} if staged[0] is not None else self.writes.run(spec, arguments)

        answer = await self.runner.in_order(lambda: self.runner.answered(spec, arguments, stage))
        return answer, staged[0]

    async def call_write(
        self, name: str, arguments: dict[str, Any] | None, progress: Progress | None = None, ask: Ask | None = None
    ) -> tuple[dict[str, Any], bool]:
        """A write-tier call from the event loop: its steps run on worker threads in the session's order; one
        that waits for the person's approval awaits the decision (polling the database, holding no thread
        and not the session's order) and reports progress while it waits, so the host does not give up.
        ``ask``: the host can put the staged call to the person too (``server.mcp.host_approval``)."""
        spec = self.runner.by_name.get(name)
        if not isinstance(spec, WriteSpec):
            return await self.runner.in_order(lambda: self.runner.call(name, arguments))
        arguments = arguments or {}
        answer, ticket = await self._stage(spec, arguments, host_asks=ask is not None)
        if ticket is None:
            return answer
        if ticket.detached:  # nobody waits: the person's decision applies it (``server.writes.review``)
            pages = await anyio.to_thread.run_sync(self.pages)
            return staged_answer(ticket, pages), False
        return await self._conclude(spec, arguments, ticket, progress, ask=ask)

    async def stage_for_host(self, name: str, arguments: dict[str, Any] | None) -> tuple[dict[str, Any], bool] | Parked:
        """A write call whose staging the host will put to the person and then retry with their answer (the
        2026-07-28 round trip): the answer when it needs no approval, else the call parked here with the
        request state the host must echo (``resume_write``)."""
        spec = self.runner.by_name.get(name)
        if not isinstance(spec, WriteSpec):
            return await self.call_write(name, arguments)
        arguments = arguments or {}
        if self._parked:
            await anyio.to_thread.run_sync(self._sweep_parked)
        answer, ticket = await self._stage(spec, arguments, host_asks=True)
        if ticket is None:
            return answer
        if self._states is None:
            self._states = host_approval.ApprovalStates()
        shown = [f.to_json() for f in ticket.files]
        state = self._states.mint(
            session_id=self.session.id, pending_id=ticket.id, tool=name, arguments=arguments, shown=shown
        )
        pages = await anyio.to_thread.run_sync(self.pages)
        parked = Parked(ticket, name, dict(arguments), state, self.described(name, ticket, pages))
        self._parked[ticket.id] = parked
        return parked

    async def resume_write(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        state: str,
        answer: host_approval.HostAnswer,
        progress: Progress | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """The host's retry of a parked call with the person's answer: the state must be one this session
        minted for this call and not yet used (else ``invalid-input``, nothing changed); then the answer is the
        host's decision (unless the dashboard decided first) and the call ends as any staged call does."""
        spec = self.runner.by_name.get(name)
        arguments = arguments or {}
        try:
            if not isinstance(spec, WriteSpec) or self._states is None:
                raise host_approval.forged("no call of this session waits for the host")
            pending_id, shown = self._states.redeem(state, session_id=self.session.id, tool=name, arguments=arguments)
            parked = self._parked.pop(pending_id, None)
            if parked is None:
                raise host_approval.replayed(pending_id)
            if host_approval.shown_digest([f.to_json() for f in parked.ticket.files]) != shown:
                raise host_approval.forged("what was shown")
        except KmsError as refusal:
            return refusal.to_dict(), True
        return await self._conclude(spec, arguments, parked.ticket, progress, answer=answer)

    def _sweep_parked(self) -> None:
        """Calls parked for a host that never came back, past their time: no answer can land any more."""
        now = self.session.clock()
        for pid, parked in list(self._parked.items()):
            if now >= parked.ticket.expires_at:
                self._drop_parked(pid)

    def _drop_parked(self, pending_id: int) -> None:
        parked = self._parked.pop(pending_id, None)
        if self._states is not None:
            self._states.drop(pending_id)
        spec = self.runner.by_name.get(parked.tool) if parked is not None else None
        if parked is not None and isinstance(spec, WriteSpec):
            try:
                self.writes.abandon(spec, parked.arguments, parked.ticket)
            except Exception:  # the database may be what failed
                log.exception("could not record the abandoned call #%s", pending_id)

    def pages(self) -> str | None:
        """The review pages' address a staged call's answer names (``service_state.session_pages``: a stdio session
        asks the running service's state file now)."""
        return session_pages(self.config)

    def described(self, name: str, ticket: Staged, pages: str | None = None) -> str:
        """The host's dialog text for a staged call (``staging.describe``) and where else it can be decided
        (``approvals.review_hint``: the review page's URL when a service serves it)."""
        hint = approvals.review_hint(ticket.id, pages)
        return f"{staging.describe(name, ticket.files)}\n\n{hint}; the first decision wins."

    async def _conclude(
        self,
        spec: WriteSpec[Any],
        arguments: dict[str, Any],
        ticket: Staged,
        progress: Progress | None,
        *,
        ask: Ask | None = None,
        answer: host_approval.HostAnswer | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """A staged call's end: the person's decision awaited (the host's ``answer`` or ``ask`` counts as one,
        through the ``host`` channel), then applied exactly as shown or refused and recorded."""
        try:
            if answer is not None:
                await self._host_decides(ticket, answer)
            pages = await anyio.to_thread.run_sync(self.pages)
            decision = await self._decision(ticket, progress, ask, spec.name, pages)
        except BaseException as exc:  # cancelled (the host gave up, the server stops), or the database failed
            try:
                self.writes.abandon(spec, arguments, ticket)  # no approval can land any more
            except Exception:  # the database may be what failed
                log.exception("could not record the cancelled call #%s", ticket.id)
            if not isinstance(exc, Exception):
                raise
            failure: Exception = exc
        else:
            return await self.runner.in_order(
                lambda: self.runner.answered(
                    spec, arguments, lambda: self.writes.settle(spec, arguments, ticket, decision)
                )
            )
        return self.runner.answered(spec, arguments, lambda: _reraise(failure))  # typed, like any other failure

    async def _host_decides(self, staged: Staged, answer: host_approval.HostAnswer) -> None:
        """The person's answer in the host, recorded as a decision through the ``host`` channel; a cancel
        decides nothing (the dashboard, `kms approve` or the timeout will), and a call already decided (the
        dashboard first) or expired keeps that."""
        if answer.action == "cancel":  # the dashboard's bell, quiet while the host asked, may ring now
            await self._asking(staged, False)
            return

        def decide() -> None:
            try:
                approvals.decide(
                    self.writes.conn(),
                    staged.id,
                    approve=answer.action == "apply",
                    reason=answer.reason,
                    now=self.session.clock(),
                    channel="host",
                )
            except KmsError as e:  # decided elsewhere first, or no longer waiting: that stands
                log.debug("the host's answer on #%s came too late: %s", staged.id, e.message)

        await anyio.to_thread.run_sync(decide)

    async def _asking(self, staged: Staged, asking: bool) -> None:
        """With ``write.approval_channel = host``, the dashboard's bell waits while the host asks the person (set
        at staging, cleared here when the host stops asking without a decision)."""
        if self.config.approval_channel == "host":
            await anyio.to_thread.run_sync(lambda: approvals.set_asking(self.writes.conn(), staged.id, asking))

    async def _decision(
        self,
        staged: Staged,
        progress: Progress | None,
        ask: Ask | None = None,
        tool: str = "",
        pages: str | None = None,
    ) -> Pending:
        """The decision on a staged call; with ``ask``, the host asks the person meanwhile, and whichever
        decides first (the host's answer or the dashboard) wins; the host's question is withdrawn then.
        ``pages``: the review pages' address, named to the host and in progress messages."""
        if ask is None:
            return await self._poll(staged, progress, pages)
        found: list[Pending] = []
        failed: list[Exception] = []

        async def host() -> None:
            try:
                answer = await ask(self.described(tool, staged, pages))
            except Exception:  # the host could not ask (no back channel, an error): the dashboard decides
                log.debug("the host could not ask about #%s", staged.id, exc_info=True)
                answer = host_approval.HostAnswer("cancel")
            await self._host_decides(staged, answer)

        async def poll(scope: anyio.CancelScope) -> None:
            try:
                found.append(await self._poll(staged, progress, pages))
            except Exception as e:  # kept out of the task group's exception group: answered typed
                failed.append(e)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(host)
            tg.start_soon(poll, tg.cancel_scope)
        if failed:
            raise failed[0]
        return found[0]

    async def _poll(self, staged: Staged, progress: Progress | None, pages: str | None = None) -> Pending:
        started = last = anyio.current_time()
        told = False
        page = review_access.item_url(pages, staged.id) if pages else "the review page (`kms review` opens it)"
        where = f"{page}, the kms dashboard"
        while (item := self.writes.decision(staged)) is None:
            now = anyio.current_time()
            if progress is not None and (not told or now - last >= PROGRESS_S):
                told, last = True, now
                try:
                    await progress(
                        now - started,
                        self.writes.approval_timeout,
                        f"waiting for the person to approve pending change #{staged.id} ({where}, or `kms approve`)",
                    )
                except Exception:  # the host went away: the decision (or the timeout) still ends the call
                    log.debug("progress notification failed", exc_info=True)
            await anyio.sleep(POLL_S)
        return item


def _answer_in(responses: types.InputResponses | None) -> host_approval.HostAnswer:
    """The person's answer among the host's input responses; none (or not a form's answer): no decision."""
    found = (responses or {}).get(host_approval.INPUT_KEY)
    if isinstance(found, types.ElicitResult):
        return host_approval.answer_of(found)
    return host_approval.HostAnswer("cancel")


async def write_call(runner: ToolRunner, ctx: Any, params: types.CallToolRequestParams) -> Answer | Parked:
    """Run a write call for ``ctx``'s connection; a ``Parked`` call is for the adapter to answer with
    ``input_required`` (``input_required``)."""
    flow = ApprovalFlow.of(runner)
    progress = ctx.session.report_progress
    if params.request_state is not None or params.input_responses:
        if params.request_state is None:
            return host_approval.forged("input responses without a request state").to_dict(), True
        answer = _answer_in(params.input_responses)
        return await flow.resume_write(params.name, params.arguments, params.request_state, answer, progress)
    if runner.writes.detached or not host_approval.asks(
        runner.config.approval_channel, ctx.session.client_capabilities
    ):
        return await flow.call_write(params.name, params.arguments, progress)
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        return await flow.stage_for_host(params.name, params.arguments)

    async def ask(message: str) -> host_approval.HostAnswer:
        result = await ctx.session.elicit_form(message, host_approval.FORM_SCHEMA, related_request_id=ctx.request_id)
        return host_approval.answer_of(result)

    return await flow.call_write(params.name, params.arguments, progress, ask)


def input_required(parked: Parked) -> types.InputRequiredResult:
    """The 2026-07-28 answer of a parked call: the form for the person, the state the host echoes."""
    request = types.ElicitRequest(params=host_approval.elicit_params(parked.message))
    return types.InputRequiredResult(input_requests={host_approval.INPUT_KEY: request}, request_state=parked.state)
