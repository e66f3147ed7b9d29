"""Run one tool call: gate, validate, handle, cap the payload, track reads.

Write-tier tools are handed whole to the write guard (``server.writes.guard``), which
gates, validates, rate-limits, runs and records them; read-tier tools are gated,
validated and run here. Everything an MCP client can get back is a dict: the handler's
typed result, or ``{"error": kind, "message": ...}``. Errors never escape as exceptions.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio

from server.activity.agent_session import AgentSession
from server.config.session_contract import SessionConfig
from server.errors import KmsError, validate_input
from server.index import note_data
from server.index.listing import encode_cursor
from server.mcp.process import ProcessServices
from server.mcp.tools.base import PAYLOAD_CAP_BYTES, ReadSpec, ToolContext, ToolSpec, WriteSpec
from server.store.health import UNUSABLE, database_error
from server.writes.guard import WriteService

if TYPE_CHECKING:
    import anyio

    from server.mcp.approval_flow import ApprovalFlow

log = logging.getLogger("kms.tools")


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


class ToolRunner:
    """One session served: its ``AgentSession`` and write guard over the process's services. ``call`` is
    safe from any thread; the adapter runs reads on worker threads and writes off the event loop, in order
    within the session (``in_order``), through ``server.mcp.approval_flow.ApprovalFlow.call_write``.

    ``ToolRunner(config)`` makes a session and, when no ``services`` are given, process services of its
    own (closed with it): a one-session process such as ``kms mcp``, or a test."""

    def __init__(
        self,
        config: SessionConfig | AgentSession,
        registry: Sequence[ToolSpec] | None = None,
        *,
        services: ProcessServices | None = None,
    ) -> None:
        # deferred: the registry's package imports this module (a cycle at import time)
        from server.mcp.tools import REGISTRY

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
        self.approval: ApprovalFlow | None = None  # its write calls' approvals, from the first (``approval_flow``)

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
        """One call, on this thread (a write waiting for approval blocks it: the adapter uses
        ``ApprovalFlow.call_write``)."""
        spec = self.by_name.get(name)
        if spec is None:
            tools = ", ".join(s.name for s in self.listed())  # only this session's: no hint of tiers it lacks
            return KmsError("invalid-input", f"unknown tool {name!r}; tools: {tools}").to_dict(), True
        arguments = arguments or {}
        if isinstance(spec, WriteSpec):
            return self.answered(spec, arguments, lambda: self.writes.call(spec, arguments))
        if isinstance(spec, ReadSpec):
            return self.answered(spec, arguments, lambda: self._read(spec, arguments))
        raise TypeError(f"{name}: a tool is a ReadSpec or a WriteSpec, not a bare {type(spec).__name__}")

    async def in_order(self, work: Callable[[], tuple[dict[str, Any], bool]]) -> tuple[dict[str, Any], bool]:
        """Run one step of a write on a worker thread, after the session's earlier write steps: the event
        loop (and so every other call, of this session or another) goes on while it runs or waits."""

        if self._write_order is None:
            self._write_order = anyio.Lock()
        async with self._write_order:
            return await anyio.to_thread.run_sync(work)

    def _read(self, spec: ReadSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        if not self.session.allows(spec.tier):
            raise KmsError("feature-disabled", self.session.disabled_message(spec.name, spec.tier))
        answer = spec.handler(self.ctx, validate_input(spec.input_model, arguments))
        if spec.built_later and (note := self.ctx.index_note()):
            answer["index"] = note  # a new vault's links and tags are still being built
        return answer

    def answered(
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
        if self.approval is not None:  # its host can no longer come back with an answer
            self.approval.close()
        self.session.close()
        return self.services.close() if self._owns_services else True
