"""The one entry point the MCP adapter calls for write tools.

Every call runs the same pipeline: rate-limit slot -> allowlist -> the operation
(with optimistic concurrency) -> re-index -> provenance. Provenance is recorded for
every call, also for refusals and errors, so the dashboard shows what agents tried.
A slot is given back when the call did not change a file, so the limits count writes.

A ``WriteService`` may be shared by threads: each thread gets its own APSW
connection (``thread_connection``); nothing else is mutable.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import apsw

from server.activity import provenance
from server.activity.ratelimit import RateLimiter
from server.config.allowlist import Allowlist
from server.errors import KmsError
from server.store.db import shared_commit, thread_connection
from server.vault.registry import Vault, get_vault, list_vaults
from server.writes import operations

TOOL_CREATE = "kms_create"
TOOL_APPEND = "kms_append"
TOOL_UPDATE_PROPERTIES = "kms_update_properties"
TOOL_INSERT_AT = "kms_insert_at"


class WriteService:
    """Guarded writes for one agent session."""

    def __init__(
        self,
        db_path: str | Path | None,
        session_id: str,
        limits: RateLimiter | None = None,
        allowlist: Allowlist | Iterable[str] | None = None,
        *,
        default_vault: str | None = None,
        lock_dir: Path | None = None,
        enabled: bool = True,
    ) -> None:
        self.enabled = enabled  # agent.write off: every call is refused (and recorded) as feature-disabled
        self.db_path = db_path
        self.session_id = session_id
        self.limits = limits if limits is not None else RateLimiter()
        self.allowlist = allowlist if isinstance(allowlist, Allowlist) else Allowlist(allowlist)
        self.default_vault = default_vault
        self.lock_dir = lock_dir

    def conn(self) -> apsw.Connection:
        """This thread's connection (never shared across threads)."""
        return thread_connection(self.db_path)

    # ----- tools --------------------------------------------------------------------------------

    def create(
        self,
        title: str,
        content: str = "",
        tags: list[str] | None = None,
        folder: str | None = None,
        vault: str | None = None,
    ) -> dict[str, Any]:
        """kms_create: a new note; returns {noteId, title, path, vault, bytesBefore, bytesAfter, linesAdded}."""
        args = {"title": title, "folder": folder, "tags": tags, "content": content, "vault": vault}
        ctx: dict[str, Any] = {"title": title}

        def op(conn: apsw.Connection) -> operations.WriteOutcome:
            v = self._vault(conn, vault)
            ctx["vault"] = v.name
            return operations.create(
                conn, v, title=title, content=content, tags=tags, folder=folder,
                allowlist=self.allowlist, lock_dir=self.lock_dir,
            )

        return self._run(TOOL_CREATE, args, ctx, op)

    def append(
        self,
        note_id: str,
        content: str,
        heading: str | None = None,
        separator: str = "\n\n",
        version: str | None = None,
    ) -> dict[str, Any]:
        """kms_append: add to the end of a note or of the section under ``heading``."""
        args = {"noteId": note_id, "heading": heading, "content": content, "version": version}
        return self._note_call(
            TOOL_APPEND, args, note_id,
            lambda conn, v, n: operations.append(
                conn, v, n, content=content, heading=heading, separator=separator, version=version,
                allowlist=self.allowlist, lock_dir=self.lock_dir,
            ),
        )

    def update_properties(
        self,
        note_id: str,
        set: dict[str, Any] | None = None,  # noqa: A002 - the tool's argument name
        remove: list[str] | None = None,
        version: str | None = None,
    ) -> dict[str, Any]:
        """kms_update_properties: set/remove frontmatter keys (exempt from the folder allowlist)."""
        args = {"noteId": note_id, "set": set, "remove": remove, "version": version}
        return self._note_call(
            TOOL_UPDATE_PROPERTIES, args, note_id,
            lambda conn, v, n: operations.update_properties(
                conn, v, n, set=set, remove=remove, version=version, lock_dir=self.lock_dir
            ),
        )

    def insert_at(
        self,
        note_id: str,
        content: str,
        position: dict[str, Any],
        version: str | None = None,
    ) -> dict[str, Any]:
        """kms_insert_at: insert at {afterHeading|beforeHeading|afterBlockContaining|atLine}."""
        args = {"noteId": note_id, "position": position, "content": content, "version": version}
        return self._note_call(
            TOOL_INSERT_AT, args, note_id,
            lambda conn, v, n: operations.insert_at(
                conn, v, n, content=content, position=position, version=version,
                allowlist=self.allowlist, lock_dir=self.lock_dir,
            ),
        )

    def counters(self) -> dict[str, Any]:
        """This session's live write counters."""
        return self.limits.counters(self.conn(), self.session_id)

    # ----- pipeline -----------------------------------------------------------------------------

    def _vault(self, conn: apsw.Connection, name: str | None) -> Vault:
        name = name or self.default_vault
        if name:
            return get_vault(conn, name)
        vaults = list_vaults(conn)
        if len(vaults) == 1:
            return vaults[0]
        if not vaults:
            raise KmsError("no-index", "no vault is registered; add one with `kms vault add`")
        raise KmsError(
            "invalid-input",
            f"several vaults are registered; say which: {', '.join(v.name for v in vaults)}",
            vaults=[v.name for v in vaults],
        )

    def _note_call(
        self,
        tool: str,
        args: dict[str, Any],
        note_ref: str,
        op: Callable[[apsw.Connection, Vault, operations.NoteRef], operations.WriteOutcome],
    ) -> dict[str, Any]:
        ctx: dict[str, Any] = {"note_id": note_ref if isinstance(note_ref, str) else None}

        def run(conn: apsw.Connection) -> operations.WriteOutcome:
            note, vault = operations.load_note(conn, note_ref)
            ctx.update(note_id=note.id, vault=vault.name, path=note.path, title=note.title)
            return op(conn, vault, note)

        return self._run(tool, args, ctx, run)

    def _run(
        self,
        tool: str,
        args: dict[str, Any],
        ctx: dict[str, Any],
        op: Callable[[apsw.Connection], operations.WriteOutcome],
    ) -> dict[str, Any]:
        conn = self.conn()
        summary = provenance.summarize_input(args)
        slot = None
        with contextlib.ExitStack() as group:
            try:
                if not self.enabled:
                    raise KmsError(
                        "feature-disabled",
                        "agents may not write to this vault; a person can turn it on with "
                        "`kms config set agent.write true` or `kms claude --write`",
                    )
                slot = self.limits.acquire(conn, self.session_id)  # committed before the file is touched
                # the index update and the provenance record then share one commit; the file lock is
                # released before the first of them takes the database lock (never the other order)
                group.enter_context(shared_commit(conn))
                outcome = op(conn)
            except KmsError as e:
                if slot is not None:
                    self.limits.release(conn, slot)
                provenance.record(
                    conn, tool=tool, session_id=self.session_id, status=provenance.status_for(e.kind),
                    input_summary=summary, note_id=ctx.get("note_id"), vault=ctx.get("vault"),
                    path=ctx.get("path") or e.extra.get("path"), title=ctx.get("title"),
                    error=e.kind, message=e.message,
                )
                raise
            except Exception as e:
                if slot is not None:
                    self.limits.release(conn, slot)
                provenance.record(
                    conn, tool=tool, session_id=self.session_id, status="error", input_summary=summary,
                    note_id=ctx.get("note_id"), vault=ctx.get("vault"), path=ctx.get("path"),
                    title=ctx.get("title"), error="internal", message=f"{type(e).__name__}: {e}"[:1000],
                )
                raise
            result = outcome.result
            if not result.get("changed", True) and slot is not None:
                self.limits.release(conn, slot)  # an idempotent no-op is not a write
            invocation_id = provenance.record(
                conn, tool=tool, session_id=self.session_id, status="success", input_summary=summary,
                note_id=result.get("noteId") or ctx.get("note_id"), vault=result.get("vault"),
                path=result.get("path"), title=result.get("title"), message=result.get("indexWarning"),
                lines_added=result.get("linesAdded", 0), bytes_before=result.get("bytesBefore"),
                bytes_after=result.get("bytesAfter"), inserted_text=outcome.inserted_text,
                insert_offset=outcome.insert_offset, props_before=outcome.props_before,
                props_after=outcome.props_after, hash_before=outcome.hash_before, hash_after=outcome.hash_after,
            )
            return {**result, "invocationId": invocation_id}
