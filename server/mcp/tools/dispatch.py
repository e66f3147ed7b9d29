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

from server.activity.reads import ReadTracker
from server.config import tiers
from server.config.session import SessionConfig
from server.errors import KmsError, validate_input
from server.index.listing import encode_cursor
from server.mcp.tools.base import PAYLOAD_CAP_BYTES, ReadSpec, Tier, ToolContext, ToolSpec, WriteSpec
from server.store.health import UNUSABLE, database_error

if TYPE_CHECKING:
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
    """Holds the frozen config and per-process services; ``call`` is safe from any thread."""

    def __init__(self, config: SessionConfig, registry: Sequence[ToolSpec] | None = None) -> None:
        from server.mcp.tools import REGISTRY
        from server.mcp.tools.write_tools import make_write_service

        self.config = config
        self.registry: Sequence[ToolSpec] = registry if registry is not None else REGISTRY
        self.by_name = {s.name: s for s in self.registry}
        self.ctx = ToolContext(config)
        self.reads = ReadTracker(config.db_path, config.session_id)
        self.writes = make_write_service(config, lambda name: self._disabled_message(name, self._tier_of(name)))
        self.writes.services = self.ctx.services  # kms_remember reaches the session's identity and model
        from server.activity.visits import SessionIdentity

        self.ctx.services["identity"] = SessionIdentity(config.session_id, config.project)

    def listed(self) -> list[ToolSpec]:
        """Read tools always (a disabled tier answers feature-disabled); the others only when their tier is on."""
        return [s for s in self.registry if s.tier == "read" or tiers.tier_enabled(self.config, s.tier)]

    def _tier_of(self, name: str) -> Tier:
        spec = self.by_name.get(name)
        return spec.tier if spec is not None else "write"

    def runs_inline(self, name: str) -> bool:
        """Whether the adapter may run this tool on its event loop rather than a worker thread: the write
        tools, which are short and serialised by the database's write lock anyway, and the reads marked
        ``inline`` (bounded, well under a millisecond)."""
        spec = self.by_name.get(name)
        return spec is not None and (isinstance(spec, WriteSpec) or spec.inline)

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

    async def call_write(self, name: str, arguments: dict[str, Any] | None,
                         progress: Progress | None = None) -> tuple[dict[str, Any], bool]:
        """A write-tier call on the event loop: one that waits for the person's approval awaits the decision
        (polling the database, so the loop and the session's other calls go on) and reports progress while
        it waits, so the host does not give up on it."""
        spec = self.by_name.get(name)
        if not isinstance(spec, WriteSpec):
            return self.call(name, arguments)
        arguments = arguments or {}
        staged: list[Staged | None] = [None]

        def stage() -> dict[str, Any]:
            staged[0] = self.writes.stage(spec, arguments)
            return {} if staged[0] is not None else self.writes.run(spec, arguments)

        answer = self._answer(spec, arguments, stage)
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
            return self._answer(spec, arguments, lambda: self.writes.settle(spec, arguments, ticket, decision))
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
                    await progress(now - started, float(self.writes.approval_timeout),
                                   f"waiting for the person to approve pending change #{staged.id} "
                                   "(kms dashboard, or `kms approve`)")
                except Exception:  # the host went away: the decision (or the timeout) still ends the call
                    log.debug("progress notification failed", exc_info=True)
            await anyio.sleep(POLL_S)
        return item

    def _read(self, spec: ReadSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        if not tiers.tier_enabled(self.config, spec.tier):
            raise KmsError("feature-disabled", self._disabled_message(spec.name, spec.tier))
        return spec.handler(self.ctx, validate_input(spec.input_model, arguments))

    def _answer(self, spec: ToolSpec, arguments: dict[str, Any],
                run: Callable[[], dict[str, Any]]) -> tuple[dict[str, Any], bool]:
        """``run`` answered as the client sees it: errors as dicts, the payload capped, reads tracked."""
        name = spec.name
        try:
            result = run()
            if isinstance(spec, WriteSpec):
                semantic = self.ctx.services.get("semantic")
                if semantic is not None and result:
                    semantic.notify_changed()  # embed the new text in the background
        except KmsError as exc:
            return exc.to_dict(), True
        except UNUSABLE as exc:  # a full disk, a damaged or unreachable database: typed, saying what to do
            log.warning("tool %s: database failure: %s", name, exc)
            return database_error(exc, self.config.db_path).to_dict(), True
        except Exception as exc:  # a bug must answer, not kill the session
            log.exception("tool %s failed", name)
            return {"error": "internal", "message": f"{type(exc).__name__}: {exc}"}, True
        result = self._cap(spec, arguments, result)
        if spec.records_reads and not result.get("truncated"):
            ids = note_ids_in(result)
            if ids:
                self.reads.record(ids)
        return result, False

    def _disabled_message(self, name: str, tier: Tier) -> str:
        message = tiers.disabled_message(self.config, name, tier)
        # the agent tools default to on once a vault is registered: with none, that is the real fix
        from server.index.notes import index_is_empty

        try:
            problem = index_is_empty(self.ctx.conn)
        except Exception:  # the DB unreachable: the message above still holds
            problem = None
        return f"{message} Also, {problem}." if problem else message

    def _cap(self, spec: ToolSpec, arguments: dict[str, Any], result: dict[str, Any]) -> dict[str, Any]:
        size = len(json.dumps(result, ensure_ascii=False, separators=(",", ":"), default=str).encode())
        if size <= PAYLOAD_CAP_BYTES:
            return result
        cursor = arguments.get(spec.cursor_field) if spec.cursor_field else None
        return {
            "truncated": True,
            "cursor": cursor or encode_cursor({"t": spec.name, "o": 0}),
            "message": f"the result is {size // 1000} KB, over the {PAYLOAD_CAP_BYTES // 1000} KB cap; "
                       + ("narrow the query or lower limit and call again with this cursor" if spec.cursor_field
                          else "narrow the query (or scope it to one vault) or lower limit"),
        }

    def close(self) -> None:
        self.reads.close()
