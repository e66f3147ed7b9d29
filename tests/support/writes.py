"""Shared set-up for the write-tool tests: a real vault folder, a real APSW database."""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import Vault, add_vault


@dataclass
class Env:
    tmp: Path
    root: Path  # the vault folder
    db_path: Path
    conn: apsw.Connection
    vault: Vault

    def note(self, relpath: str, text: str | bytes) -> str:
        """Write a note file and index it; return its note id."""
        full = self.root / relpath
        full.parent.mkdir(parents=True, exist_ok=True)
        full.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
        note_id = reindex_file(self.conn, self.vault, relpath)
        assert note_id, relpath
        return note_id

    def read(self, relpath: str) -> str:
        return (self.root / relpath).read_bytes().decode("utf-8")

    def reindex(self) -> None:
        index_vault(self.conn, self.vault)


def make_env(tmp: Path, name: str = "v") -> Env:
    root = tmp / "vault"
    root.mkdir(parents=True, exist_ok=True)
    db_path = tmp / "db" / "kms.db"
    conn = connect(db_path)
    vault = add_vault(conn, root, name)
    return Env(tmp, vault.root, db_path, conn, vault)


def snapshot(top: Path, skip: tuple[Path, ...] = ()) -> dict[str, str]:
    """Every file and symlink under ``top`` (not following links) -> content hash or link target."""
    out: dict[str, str] = {}
    skip_s = tuple(str(s) for s in skip)
    for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
        if dirpath.startswith(skip_s):
            dirnames[:] = []
            continue
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            if p.startswith(skip_s):
                continue
            if os.path.islink(p):
                out[p] = "link:" + os.readlink(p)
            elif os.path.isfile(p):
                with open(p, "rb") as f:
                    out[p] = hashlib.sha256(f.read()).hexdigest()
            else:
                out[p] = "dir"
    return out


def write_service(
    db_path: Path | str,
    session_id: str,
    limits: Any = None,
    allowlist: Any = None,
    *,
    enabled: bool = True,
    tiers: bool = True,
    vault: str | None = None,
    approval: str = "off",
    review_mode: str | None = None,
    approval_lines: int = 20,
    approval_timeout: int = 120,
    max_files: int = 50,
    memory_folder: str | None = "kms-memory",
    clock: Any = None,
) -> Any:
    """A real session's write guard (``WriteService(AgentSession)``) from plain values: every tier on unless
    ``enabled`` (kms itself) or ``tiers`` (the edit and organize tiers) say otherwise."""
    import time

    from server.activity.agent_session import AgentSession
    from server.config.session_contract import SessionConfig
    from server.writes.guard import WriteService

    config = SessionConfig(
        db_path=Path(db_path),
        config_path=Path(db_path).parent / "config.toml",
        enabled=enabled,
        read_enabled=True,
        write_enabled=True,
        edit_enabled=tiers,
        organize_enabled=tiers,
        session_id=session_id,
        approval=approval,
        review_mode=review_mode,
        approval_lines=approval_lines,
        approval_timeout=approval_timeout,
        max_files_per_call=max_files,
        allowlist=tuple(allowlist or ()),
        vault=vault,
        memory_folder=memory_folder,
        watch=False,
    )
    return WriteService(AgentSession.open(config, limits=limits, clock=clock or time.time))


class Writer:
    """One session's write guard driven with Python arguments: every call goes through the real
    registry entry (``WriteService.call``: gate, input model, rate limit, operation, provenance)."""

    def __init__(
        self, db_path: Path | str, session_id: str, limits: Any = None, allowlist: Any = None, **kw: Any
    ) -> None:
        self.guard = write_service(db_path, session_id, limits, allowlist, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.guard, name)

    @property
    def limits(self) -> Any:
        return self.guard.session.limits

    def call(self, tool: str, **arguments: Any) -> dict[str, Any]:
        from server.mcp.tools.write_tools import WRITE_TOOLS

        spec = next(s for s in WRITE_TOOLS if s.name == tool)
        return self.guard.call(spec, {k: v for k, v in arguments.items() if v is not None})

    def create(
        self, title: Any, content: Any = None, tags: Any = None, folder: Any = None, vault: Any = None
    ) -> dict[str, Any]:
        return self.call("kms_create", title=title, content=content, tags=tags, folder=folder, vault=vault)

    def append(
        self, note_id: Any, content: Any, heading: Any = None, separator: Any = None, version: Any = None
    ) -> dict[str, Any]:
        return self.call(
            "kms_append", noteId=note_id, content=content, heading=heading, separator=separator, version=version
        )

    def update_properties(
        self,
        note_id: Any,
        set: Any = None,
        remove: Any = None,  # noqa: A002
        version: Any = None,
    ) -> dict[str, Any]:
        return self.call("kms_update_properties", noteId=note_id, set=set, remove=remove, version=version)

    def insert_at(self, note_id: Any, content: Any, position: Any, version: Any = None) -> dict[str, Any]:
        return self.call("kms_insert_at", noteId=note_id, content=content, position=position, version=version)
