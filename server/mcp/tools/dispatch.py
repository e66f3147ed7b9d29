"""Run one tool call: gate, validate, handle, cap the payload, track reads.

Write-tier tools are handed whole to the write guard (``server.writes.guard``), which
gates, validates, rate-limits, runs and records them; read-tier tools are gated,
validated and run here. Everything an MCP client can get back is a dict: the handler's
typed result, or ``{"error": kind, "message": ...}``. Errors never escape as exceptions.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from server.activity.reads import ReadTracker
from server.config.session import TIERS, SessionConfig
from server.errors import KmsError, validate_input
from server.index.listing import encode_cursor
from server.mcp.tools.base import PAYLOAD_CAP_BYTES, Tier, ToolContext, ToolSpec
from server.store.health import UNUSABLE, database_error

log = logging.getLogger("kms.tools")


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

    def __init__(self, config: SessionConfig, registry: list[ToolSpec] | None = None) -> None:
        from server.mcp.tools import REGISTRY
        from server.mcp.tools.write_tools import make_write_service

        self.config = config
        self.registry = registry if registry is not None else REGISTRY
        self.by_name = {s.name: s for s in self.registry}
        self.ctx = ToolContext(config)
        self.reads = ReadTracker(config.db_path, config.session_id)
        self.writes = make_write_service(config, lambda name: self._disabled_message(name, self._tier_of(name)))

    def listed(self) -> list[ToolSpec]:
        """Read tools always (a disabled tier answers feature-disabled); the others only when their tier is on."""
        return [s for s in self.registry if s.tier == "read" or self.config.tier_enabled(s.tier)]

    def _tier_of(self, name: str) -> Tier:
        spec = self.by_name.get(name)
        return spec.tier if spec is not None else "write"

    def runs_inline(self, name: str) -> bool:
        """Whether the adapter may run this tool on its event loop rather than a worker thread:
        the write tools, which are short and serialised by the database's write lock anyway."""
        spec = self.by_name.get(name)
        return spec is not None and spec.tier != "read"

    def call(self, name: str, arguments: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
        spec = self.by_name.get(name)
        if spec is None:
            tools = ", ".join(s.name for s in self.listed())  # only this session's: no hint of tiers it lacks
            return KmsError("invalid-input", f"unknown tool {name!r}; tools: {tools}").to_dict(), True
        arguments = arguments or {}
        try:
            if spec.tier != "read":
                result = self.writes.call(spec, arguments)
                semantic = self.ctx.services.get("semantic")
                if semantic is not None:
                    semantic.notify_changed()  # embed the new text in the background
            else:
                if not self.config.tier_enabled(spec.tier):
                    raise KmsError("feature-disabled", self._disabled_message(spec.name, spec.tier))
                result = spec.handler(self.ctx, validate_input(spec.input_model, arguments))
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
        c = self.config
        switches = (("KMS_ENABLED", "read", c.enabled), ("KMS_AGENT_TOOLS_ENABLED", "read", c.read_enabled),
                    ("KMS_AGENT_WRITE_TOOLS_ENABLED", "write", c.write_enabled),
                    ("KMS_AGENT_EDIT_TOOLS_ENABLED", "edit", c.edit_enabled),
                    ("KMS_AGENT_ORGANIZE_TOOLS_ENABLED", "organize", c.organize_enabled))
        needed = TIERS[: TIERS.index(tier) + 1]
        off = [var for var, t, on in switches if t in needed and not on]
        message = (f"{name} is turned off for this session ({', '.join(off)} off). The person can enable "
                   f"it with `kms config set` and start a new session.")
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
