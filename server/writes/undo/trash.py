"""The vault's ``.trash/`` folder for a person: list, restore, empty (the only hard delete in kms).

``kms_trash`` moves a note to ``.trash/<its path>`` (Obsidian's own convention, so Obsidian's
trash and kms's are one). Restoring a note kms trashed is the revert of that call (the
note gets its id back and the revert is recorded); one trashed by hand is moved back and
recorded as the person's. Emptying deletes files whose trash time is older than a cutoff.

When a file was trashed: the latest of kms's own record of the move (a ``kms_trash`` call),
the file's ctime (a rename, which is how Obsidian and a person trash a note, updates it) and its
mtime. A rename keeps the mtime, so the mtime alone dates a note trashed today by its last
edit; taking the latest of the three can only make a file look more recently trashed, so
``empty --older-than`` never deletes for good what was trashed more recently than asked.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from dataclasses import dataclass
from typing import Any

import apsw

from server.activity.changes import FilesChanged
from server.errors import KmsError
from server.store.db import rows
from server.vault.files import fsync_dir
from server.vault.paths import TRASH, strip_note_suffix
from server.vault.registry import Vault, list_vaults
from server.writes import reindex
from server.writes.context import Touched
from server.writes.multifile import apply_plans
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.person import person_write
from server.writes.undo import revert as revert_mod
from server.writes.unit_files import FilePlan

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw])\s*$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``30d`` -> seconds (s, m, h, d, w)."""
    m = _DURATION.match(text or "")
    if not m:
        raise KmsError("invalid-input", f"{text!r} is not a duration like 30d, 12h or 2w")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


@dataclass(frozen=True)
class Trashed:
    vault: str
    path: str  # where it was (and goes back to), vault-relative
    trashed_at: float
    size: int

    def to_json(self) -> dict[str, Any]:
        return {"vault": self.vault, "path": self.path, "trashedAt": self.trashed_at, "size": self.size}


@dataclass(frozen=True)
class TrashedBy:
    """The call that put a file in the trash: an agent's ``kms_trash`` (restoring it is its revert)."""

    invocation_id: int
    session_id: str
    actor: str
    at: float
    tool: str


_TRASH_CALLS = f"""
    SELECT t.id, t.session_id, t.actor, t.at, t.tool, t.vault, c.new_path FROM tool_file_changes c
      JOIN tool_invocations t ON t.id = c.invocation_id
     WHERE substr(c.new_path, 1, {len(TRASH) + 1}) = '{TRASH}/' AND t.status = 'success' AND t.reverts_id IS NULL
       AND NOT EXISTS (SELECT 1 FROM tool_invocations r WHERE r.reverts_id = t.id AND r.status = 'success')
     ORDER BY t.id"""


def _trash_calls(conn: apsw.Connection) -> dict[tuple[str, str], TrashedBy]:
    """(vault, path in the trash) -> the standing ``kms_trash`` call that put it there."""
    by: dict[tuple[str, str], TrashedBy] = {}
    for r in rows(conn, _TRASH_CALLS):  # oldest first: the newest call for a path wins
        by[(r["vault"], r["new_path"][len(TRASH) + 1 :])] = TrashedBy(
            r["id"], r["session_id"], r["actor"], r["at"], r["tool"]
        )
    return by


def list_trash(
    conn: apsw.Connection, vault: str | None = None, calls: dict[tuple[str, str], TrashedBy] | None = None
) -> list[Trashed]:
    """Every file in the trash of every vault (or of one), newest first, dated as the module says."""
    calls = _trash_calls(conn) if calls is None else calls
    out: list[Trashed] = []
    for v in list_vaults(conn):
        if vault is not None and v.name != vault:
            continue
        root = v.root / TRASH
        if not root.is_dir():
            continue
        for dirpath, _dirs, files in os.walk(root):
            for name in files:
                full = os.path.join(dirpath, name)
                st = os.lstat(full)
                rel = os.path.relpath(full, root).replace(os.sep, "/")
                by = calls.get((v.name, rel))
                at = max(st.st_mtime, st.st_ctime, by.at if by else 0.0)
                out.append(Trashed(v.name, rel, at, st.st_size))
    return sorted(out, key=lambda t: (-t.trashed_at, t.vault, t.path))


def listing(conn: apsw.Connection, vault: str | None = None) -> list[tuple[Trashed, TrashedBy | None]]:
    """``list_trash`` with the call that trashed each file (None: it was moved there by hand), for the
    dashboard's trash screen. One pass over the file changes that went into a trash."""
    by = _trash_calls(conn)
    items = list_trash(conn, vault, by)
    return [(t, by.get((t.vault, t.path))) for t in items]


def _find(conn: apsw.Connection, ref: str, in_vault: str | None = None) -> tuple[Vault, Trashed]:
    items = list_trash(conn, in_vault)
    want = ref.strip().removeprefix(f"{TRASH}/")
    found = [
        t
        for t in items
        if t.path == want or strip_note_suffix(t.path) == want or strip_note_suffix(t.path.rpartition("/")[2]) == want
    ]
    if not found:
        raise KmsError("not-found", f"nothing named {ref!r} in the trash (`kms trash list` shows it)")
    if len(found) > 1:
        raise KmsError(
            "invalid-input",
            f"{ref!r} names {len(found)} trashed files; give the path: "
            + ", ".join(f"{t.vault}:{t.path}" for t in found[:10]),
        )
    vault = next(v for v in list_vaults(conn) if v.name == found[0].vault)
    return vault, found[0]


def restore(conn: apsw.Connection, ref: str, in_vault: str | None = None) -> dict[str, Any]:
    """Put a trashed note back where it was; ``already-exists`` if another note took its place.
    ``in_vault``: look only in that vault's trash (the same path may be in two)."""
    vault, item = _find(conn, ref, in_vault)
    trashed = f"{TRASH}/{item.path}"
    calls = rows(
        conn,
        """
        SELECT c.invocation_id FROM tool_file_changes c JOIN tool_invocations t ON t.id = c.invocation_id
        WHERE c.new_path = ? AND t.vault = ? AND t.status = 'success' AND t.reverts_id IS NULL
          AND NOT EXISTS (SELECT 1 FROM tool_invocations r WHERE r.reverts_id = t.id AND r.status = 'success')
        ORDER BY c.invocation_id DESC LIMIT 1""",
        (trashed, vault.name),
    )
    if calls:
        if (vault.root / item.path).exists():
            raise KmsError("already-exists", f"{item.path!r} exists again; move it away first", path=item.path)
        return revert_mod.revert(conn, calls[0]["invocation_id"])
    return _move_back(conn, vault, item)


def _move_back(conn: apsw.Connection, vault: Vault, item: Trashed) -> dict[str, Any]:
    """A file trashed outside kms: moved back as is, and recorded as the person's (a restore the database
    cannot record moves nothing: ``person.person_write``)."""
    with person_write(
        conn, tool="trash-restore", summary=f"restore {item.path}", touched=Touched(None, vault.name, item.path)
    ) as call:
        plan = FilePlan(f"{TRASH}/{item.path}", lambda t: t, new_path=item.path)
        files, unit = apply_plans(call.ctx, vault, [plan])
        result = WriteResult(
            path=item.path,
            vault=vault.name,
            title=strip_note_suffix(item.path.rpartition("/")[2]),
            bytesBefore=item.size,
            bytesAfter=item.size,
            linesAdded=0,
            changed=True,
        )
        reindex.warn_into(call.ctx, unit, result)
        call.outcome = WriteOutcome(result, FilesChanged(item.path, tuple(files)))
    return {**call.result.result, "invocationId": call.invocation_id}


def empty(
    conn: apsw.Connection, older_than_s: float | None = None, *, now: float | None = None, vault: str | None = None
) -> list[Trashed]:
    """Delete for good what has been in the trash longer than ``older_than_s`` (everything: None)."""
    now = time.time() if now is None else now
    gone: list[Trashed] = []
    roots = {v.name: v.root for v in list_vaults(conn)}
    for item in list_trash(conn, vault):
        if older_than_s is not None and now - item.trashed_at < older_than_s:
            continue
        full = roots[item.vault] / TRASH / item.path
        with contextlib.suppress(FileNotFoundError):
            os.unlink(full)
            gone.append(item)
            with contextlib.suppress(OSError):
                fsync_dir(full.parent)
    for root in {roots[t.vault] / TRASH for t in gone}:  # folders the trash no longer needs
        for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda w: -len(w[0])):
            if dirpath != str(root):
                with contextlib.suppress(OSError):
                    os.rmdir(dirpath)  # only succeeds when empty
    return gone
