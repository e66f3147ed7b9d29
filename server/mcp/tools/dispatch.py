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
    from server.writes.guard import Staged

log = logging.getLogger("kms.tools")
Progress = Callable[[float, float | None, str], Awaitable[None]]  # (progress, total, message): MCP progress
PROGRESS_S = 1.0  # how often a call waiting for approval tells the host it is still alive


def _reraise(exc: Exception) -> dict[str, Any]:
    raise exc


def note_ids_in(result: dict[str, Any]) -> list[str]:
    """Notes whose content a result carries (for read tracking)."""
    if "body" in result and "noteId" in result:
        return [result["noteId"]]
    ids: list[str] = []
    for key in ("hits", "backlinks", "items"):
        ids += [h["noteId"] for h in result.get(key, []) if isinstance(h, dict) and "noteId" in h]
    return ids


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

    async def call_write(
        self, name: str, arguments: dict[str, Any] | None, progress: Progress | None = None
    ) -> tuple[dict[str, Any], bool]:
        """A write-tier call from the event loop: its steps run on worker threads in the session's order; one
        that waits for the person's approval awaits the decision (polling the database, holding no thread
        and not the session's order) and reports progress while it waits, so the host does not give up."""
        spec = self.by_name.get(name)
        if not isinstance(spec, WriteSpec):
            return await self._in_order(lambda: self.call(name, arguments))
        arguments = arguments or {}
        staged: list[Staged | None] = [None]

        def stage() -> dict[str, Any]:
            staged[0] = self.writes.stage(spec, arguments)
            return {} if staged[0] is not None else self.writes.run(spec, arguments)

        answer = await self._in_order(lambda: self._answer(spec, arguments, stage))
        ticket = staged[0]
        if ticket is None:
            return answer
        try:
            decision = await self._decision(ticket, progress)
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

    async def _decision(self, staged: Staged, progress: Progress | None) -> Pending:
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
        return spec.handler(self.ctx, validate_input(spec.input_model, arguments))

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
        self.session.close()
        return self.services.close() if self._owns_services else True
