"""Run one tool call: gate, validate, handle, cap the payload, track reads.

Write-tier tools are handed whole to the write guard (``server.writes.guard``), which
gates, validates, rate-limits, runs and records them; read-tier tools are gated,
validated and run here. Everything an MCP client can get back is a dict: the handler's
typed result, or ``{"error": kind, "message": ...}``. Errors never escape as exceptions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from server.activity.agent_session import AgentSession
from server.config.session import SessionConfig
from server.errors import KmsError, validate_input
from server.index import note_data
from server.index.listing import encode_cursor
from server.mcp.process import ProcessServices
from server.mcp.tools.base import PAYLOAD_CAP_BYTES, ReadSpec, ToolContext, ToolSpec, WriteSpec
from server.store.health import UNUSABLE, database_error

if TYPE_CHECKING:
    import anyio

    from server.activity.approvals import Pending
    from server.mcp.host_approval import ApprovalStates, HostAnswer
    from server.writes.guard import Staged

log = logging.getLogger("kms.tools")
Progress = Callable[[float, float | None, str], Awaitable[None]]  # (progress, total, message): MCP progress
Ask = Callable[[str], Awaitable["HostAnswer"]]  # the host puts a staged call (its dialog text) to the person
PROGRESS_S = 1.0  # how often a call waiting for approval tells the host it is still alive


def _reraise(exc: Exception) -> dict[str, Any]:
    raise exc


def note_ids_in(result: dict[str, Any]) -> list[str]:
    """Notes a result gave the text of, as ``ReadSpec.records_reads`` defines a read: a body (or a page or
    section of one: ``kms_read``), or a ``kms_recall`` item holding a whole section of the note (not cut, not
    a linked note's summary or excerpt). Search hits, backlink snippets and summaries are not reads."""
    if "body" in result and "noteId" in result:
        return [result["noteId"]]
    return [
        i["noteId"]
        for i in result.get("items", [])
        if isinstance(i, dict) and "noteId" in i and i.get("kind") in ("match", "section") and not i.get("truncated")
    ]


@dataclass(frozen=True)
class Parked:
    """A staged call the host puts to the person, to be retried with their answer (``resume_write``)."""

    ticket: Staged
    tool: str
    arguments: dict[str, Any]
    state: str  # the request state the host echoes
    message: str  # the dialog's text


class ToolRunner:
    """One session served: its ``AgentSession`` and write guard over the process's services. ``call`` is
    safe from any thread; the adapter runs reads on worker threads and writes through ``call_write``,
    off the event loop and in order within the session.

    ``ToolRunner(config)`` makes a session and, when no ``services`` are given, process services of its
    own (closed with it): a one-session process such as ``kms mcp``, or a test."""

    def __init__(
        self,
        config: SessionConfig | AgentSession,
        registry: Sequence[ToolSpec] | None = None,
        *,
        services: ProcessServices | None = None,
    ) -> None:
        from server.mcp.tools import REGISTRY
        from server.writes.guard import WriteService

        self.session = config if isinstance(config, AgentSession) else AgentSession.open(config)
        self.config = self.session.config
        self._owns_services = services is None
        self.services = services if services is not None else ProcessServices.for_config(self.config)
        self.registry: Sequence[ToolSpec] = registry if registry is not None else REGISTRY
        self.by_name = {s.name: s for s in self.registry}
        self.ctx = ToolContext(self.session, self.services)
        self.writes = WriteService(self.session, self.services.semantic)
        self._write_order: anyio.Lock | None = None  # made on the event loop, at the first write
        self.tool_listing: list[Any] | None = None  # what tools/list answers this session (the adapter's)
        self._states: ApprovalStates | None = None  # request states minted for the host's answers (2026-07-28)
        self._parked: dict[int, Parked] = {}  # staged calls whose host will retry with the person's answer

    def listed(self) -> list[ToolSpec]:
        """Read tools always (a disabled tier answers feature-disabled); the others only when their tier is on."""
        return [s for s in self.registry if s.tier == "read" or self.session.allows(s.tier)]

    def runs_inline(self, name: str) -> bool:
        """Whether the adapter may run this read on its event loop rather than a worker thread: only the
        reads marked ``inline`` (bounded, well under a millisecond). Writes never: one can wait on a note
        lock, a busy database or the person."""
        spec = self.by_name.get(name)
        return isinstance(spec, ReadSpec) and spec.inline

    def is_write(self, name: str) -> bool:
        return isinstance(self.by_name.get(name), WriteSpec)

    def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
        """One call, on this thread (a write waiting for approval blocks it: the adapter uses ``call_write``)."""
        spec = self.by_name.get(name)
        if spec is None:
            tools = ", ".join(s.name for s in self.listed())  # only this session's: no hint of tiers it lacks
            return KmsError("invalid-input", f"unknown tool {name!r}; tools: {tools}").to_dict(), True
        arguments = arguments or {}
        if isinstance(spec, WriteSpec):
            return self._answer(spec, arguments, lambda: self.writes.call(spec, arguments))
        if isinstance(spec, ReadSpec):
            return self._answer(spec, arguments, lambda: self._read(spec, arguments))
        raise TypeError(f"{name}: a tool is a ReadSpec or a WriteSpec, not a bare {type(spec).__name__}")

    async def _in_order(self, work: Callable[[], tuple[dict[str, Any], bool]]) -> tuple[dict[str, Any], bool]:
        """Run one step of a write on a worker thread, after the session's earlier write steps: the event
        loop (and so every other call, of this session or another) goes on while it runs or waits."""
        import anyio

        if self._write_order is None:
            self._write_order = anyio.Lock()
        async with self._write_order:
            return await anyio.to_thread.run_sync(work)

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

        answer = await self._in_order(lambda: self._answer(spec, arguments, stage))
        return answer, staged[0]

    async def call_write(
        self, name: str, arguments: dict[str, Any] | None, progress: Progress | None = None, ask: Ask | None = None
    ) -> tuple[dict[str, Any], bool]:
        """A write-tier call from the event loop: its steps run on worker threads in the session's order; one
        that waits for the person's approval awaits the decision (polling the database, holding no thread
        and not the session's order) and reports progress while it waits, so the host does not give up.
        ``ask``: the host can put the staged call to the person too (``server.mcp.host_approval``)."""
        spec = self.by_name.get(name)
        if not isinstance(spec, WriteSpec):
            return await self._in_order(lambda: self.call(name, arguments))
        arguments = arguments or {}
        answer, ticket = await self._stage(spec, arguments, host_asks=ask is not None)
        if ticket is None:
            return answer
        return await self._conclude(spec, arguments, ticket, progress, ask=ask)

    async def stage_for_host(self, name: str, arguments: dict[str, Any] | None) -> tuple[dict[str, Any], bool] | Parked:
        """A write call whose staging the host will put to the person and then retry with their answer (the
        2026-07-28 round trip): the answer when it needs no approval, else the call parked here with the
        request state the host must echo (``resume_write``)."""
        from server.mcp.host_approval import ApprovalStates

        spec = self.by_name.get(name)
        if not isinstance(spec, WriteSpec):
            return await self.call_write(name, arguments)
        arguments = arguments or {}
        if self._parked:
            import anyio

            await anyio.to_thread.run_sync(self._sweep_parked)
        answer, ticket = await self._stage(spec, arguments, host_asks=True)
        if ticket is None:
            return answer
        if self._states is None:
            self._states = ApprovalStates()
        shown = [f.to_json() for f in ticket.files]
        state = self._states.mint(
            session_id=self.session.id, pending_id=ticket.id, tool=name, arguments=arguments, shown=shown
        )
        parked = Parked(ticket, name, dict(arguments), state, self.described(name, ticket))
        self._parked[ticket.id] = parked
        return parked

    async def resume_write(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        state: str,
        answer: HostAnswer,
        progress: Progress | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """The host's retry of a parked call with the person's answer: the state must be one this session
        minted for this call and not yet used (else ``invalid-input``, nothing changed); then the answer is the
        host's decision (unless the dashboard decided first) and the call ends as any staged call does."""
        from server.mcp.host_approval import forged, replayed, shown_digest

        spec = self.by_name.get(name)
        arguments = arguments or {}
        try:
            if not isinstance(spec, WriteSpec) or self._states is None:
                raise forged("no call of this session waits for the host")
            pending_id, shown = self._states.redeem(state, session_id=self.session.id, tool=name, arguments=arguments)
            parked = self._parked.pop(pending_id, None)
            if parked is None:
                raise replayed(pending_id)
            if shown_digest([f.to_json() for f in parked.ticket.files]) != shown:
                raise forged("what was shown")
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
        spec = self.by_name.get(parked.tool) if parked is not None else None
        if parked is not None and isinstance(spec, WriteSpec):
            try:
                self.writes.abandon(spec, parked.arguments, parked.ticket)
            except Exception:  # the database may be what failed
                log.exception("could not record the abandoned call #%s", pending_id)

    def described(self, name: str, ticket: Staged) -> str:
        """The host's dialog text for a staged call (``staging.describe``) and where else it can be decided."""
        from server.writes.staging import describe

        return (
            f"{describe(name, ticket.files)}\n\npending change #{ticket.id}: the kms dashboard or "
            f"`kms approve {ticket.id}` can decide it too; the first decision wins."
        )

    async def _conclude(
        self,
        spec: WriteSpec[Any],
        arguments: dict[str, Any],
        ticket: Staged,
        progress: Progress | None,
        *,
        ask: Ask | None = None,
        answer: HostAnswer | None = None,
    ) -> tuple[dict[str, Any], bool]:
        """A staged call's end: the person's decision awaited (the host's ``answer`` or ``ask`` counts as one,
        through the ``host`` channel), then applied exactly as shown or refused and recorded."""
        try:
            if answer is not None:
                await self._host_decides(ticket, answer)
            decision = await self._decision(ticket, progress, ask, spec.name)
        except BaseException as exc:  # cancelled (the host gave up, the server stops), or the database failed
            try:
                self.writes.abandon(spec, arguments, ticket)  # no approval can land any more
            except Exception:  # the database may be what failed
                log.exception("could not record the cancelled call #%s", ticket.id)
            if not isinstance(exc, Exception):
                raise
            failure: Exception = exc
        else:
            return await self._in_order(
                lambda: self._answer(spec, arguments, lambda: self.writes.settle(spec, arguments, ticket, decision))
            )
        return self._answer(spec, arguments, lambda: _reraise(failure))  # typed, like any other failure

    async def _host_decides(self, staged: Staged, answer: HostAnswer) -> None:
        """The person's answer in the host, recorded as a decision through the ``host`` channel; a cancel
        decides nothing (the dashboard, `kms approve` or the timeout will), and a call already decided (the
        dashboard first) or expired keeps that."""
        import anyio

        from server.activity import approvals

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
        import anyio

        from server.activity import approvals

        if self.config.approval_channel == "host":
            await anyio.to_thread.run_sync(lambda: approvals.set_asking(self.writes.conn(), staged.id, asking))

    async def _decision(
        self, staged: Staged, progress: Progress | None, ask: Ask | None = None, tool: str = ""
    ) -> Pending:
        """The decision on a staged call; with ``ask``, the host asks the person meanwhile, and whichever
        decides first (the host's answer or the dashboard) wins; the host's question is withdrawn then."""
        import anyio

        from server.mcp.host_approval import HostAnswer

        if ask is None:
            return await self._poll(staged, progress)
        found: list[Pending] = []
        failed: list[Exception] = []

        async def host() -> None:
            try:
                answer = await ask(self.described(tool, staged))
            except Exception:  # the host could not ask (no back channel, an error): the dashboard decides
                log.debug("the host could not ask about #%s", staged.id, exc_info=True)
                answer = HostAnswer("cancel")
            await self._host_decides(staged, answer)

        async def poll(scope: anyio.CancelScope) -> None:
            try:
                found.append(await self._poll(staged, progress))
            except Exception as e:  # kept out of the task group's exception group: answered typed
                failed.append(e)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(host)
            tg.start_soon(poll, tg.cancel_scope)
        if failed:
            raise failed[0]
        return found[0]

    async def _poll(self, staged: Staged, progress: Progress | None) -> Pending:
        import anyio

        from server.writes.guard import POLL_S

        started = last = anyio.current_time()
        told = False
        while (item := self.writes.decision(staged)) is None:
            now = anyio.current_time()
            if progress is not None and (not told or now - last >= PROGRESS_S):
                told, last = True, now
                try:
                    await progress(
                        now - started,
                        self.writes.approval_timeout,
                        f"waiting for the person to approve pending change #{staged.id} "
                        "(kms dashboard, or `kms approve`)",
                    )
                except Exception:  # the host went away: the decision (or the timeout) still ends the call
                    log.debug("progress notification failed", exc_info=True)
            await anyio.sleep(POLL_S)
        return item

    def _read(self, spec: ReadSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        if not self.session.allows(spec.tier):
            raise KmsError("feature-disabled", self.session.disabled_message(spec.name, spec.tier))
        answer = spec.handler(self.ctx, validate_input(spec.input_model, arguments))
        if spec.built_later and (note := self.ctx.index_note()):
            answer["index"] = note  # a new vault's links and tags are still being built
        return answer

    def _answer(
        self, spec: ToolSpec, arguments: dict[str, Any], run: Callable[[], dict[str, Any]]
    ) -> tuple[dict[str, Any], bool]:
        """``run`` answered as the client sees it: errors as dicts, note text fenced (``note_data.mark``), the
        payload capped, reads tracked."""
        name = spec.name
        try:
            result = run()
            if isinstance(spec, WriteSpec) and result:
                self.services.notify_changed()  # embed the new text in the background
        except KmsError as exc:
            return exc.to_dict(), True
        except UNUSABLE as exc:  # a full disk, a damaged or unreachable database: typed, saying what to do
            log.warning("tool %s: database failure: %s", name, exc)
            return database_error(exc, self.config.db_path).to_dict(), True
        except Exception as exc:  # a bug must answer, not kill the session
            log.exception("tool %s failed", name)
            return {"error": "internal", "message": f"{type(exc).__name__}: {exc}"}, True
        result = self._cap(spec, arguments, note_data.mark(result))  # note text fenced: it is data
        query = arguments.get("query", arguments.get("topic"))  # kms_recall's topic is a search too
        if isinstance(spec, ReadSpec) and isinstance(query, str) and query.strip():
            self.session.reads.record_search(name, query)  # the session note's searches (a successful call)
        if spec.records_reads and not result.get("truncated"):
            ids = note_ids_in(result)
            if ids:
                self.session.reads.record(ids)
        return result, False

    def _cap(self, spec: ToolSpec, arguments: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str).encode())
        if size <= PAYLOAD_CAP_BYTES:
            return result
        cursor = arguments.get(spec.cursor_field) if spec.cursor_field else None
        return {
            "truncated": True,
            "cursor": cursor or encode_cursor({"t": spec.name, "o": 0}),
            "message": f"the result is {size // 1000} KB, over the {PAYLOAD_CAP_BYTES // 1000} KB cap; "
            + (
                "narrow the query or lower limit and call again with this cursor"
                if spec.cursor_field
                else "narrow the query (or scope it to one vault) or lower limit"
            ),
        }

    def close(self) -> bool:
        """End the session (its reads flushed); with services of its own, close those too and say whether
        the process may exit normally."""
        for pending_id in list(self._parked):  # its host can no longer come back with an answer
            self._drop_parked(pending_id)
        self.session.close()
        return self.services.close() if self._owns_services else True
