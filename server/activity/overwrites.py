"""Notice an agent's write that a later save dropped (an editor that had loaded the older version).

The watcher (``kms mcp``, ``kms watch``) calls ``check`` with the notes it just re-indexed (a hook it is
given: the index layer cannot import this one). Only notes with a recent successful
agent write are looked at (text inserted, a note created, properties changed, one note edited with
``kms_edit``), and only when the file is not the version kms wrote last (the watcher echoing kms's
own write costs one indexed query). "Is what it wrote still there" is ``changes.survives`` (for
inserted text ``changes.locate``, the same answer the detail pane and revert give, so they never
disagree). A row whose change is gone and that was not reverted gets ``overwritten_at``; if the
change comes back (the person undid their save) the flag is cleared.

The flag is exact: a note is judged by the bytes the index holds (a file read that differs from them is a
save still landing, judged at its own event), and every flagged row of the note is judged again at each
event, not only the newest ``MAX_CHECKED`` writes (a flag on a busy note would otherwise stay on text
that came back).
"""

from __future__ import annotations

import json
import time

import apsw

from server.activity import changes, provenance
from server.store.db import rows
from server.vault.files import decode, sha256_hex
from server.vault.paths import resolve_note_file
from server.vault.registry import Vault

RECENT_S = 24 * 3600.0  # writes older than this are not checked again (a person's later edits are theirs)
MAX_CHECKED = 50  # per note and save: the newest writes only, so a busy note stays cheap

_CANDIDATES = """
    SELECT t.id, t.path, t.change_kind, t.inserted_text, t.insert_offset, t.hash_after, t.overwritten_at,
           t.props_before, t.props_after
      FROM tool_invocations t
     WHERE t.note_id = ? AND t.status = 'success' AND t.actor = 'agent' AND t.at >= ?
       AND t.change_kind IN ('text-inserted', 'file-created', 'properties-changed', 'files-changed')
       AND NOT EXISTS (SELECT 1 FROM tool_invocations r WHERE r.reverts_id = t.id AND r.status = 'success')
     ORDER BY t.id DESC LIMIT ?
"""
_FLAGGED = _CANDIDATES.replace("AND t.at >= ?", "AND t.at >= ? AND t.overwritten_at IS NOT NULL")


def check(conn: apsw.Connection, vault: Vault, relpaths: list[str], now: float | None = None) -> int:
    """Flag (or unflag) the recent agent writes to these notes whose text a save dropped; return how
    many rows changed. Never raises for a note that is gone or unreadable (it is simply not judged)."""
    now = time.time() if now is None else now
    changed = 0
    for rel in relpaths:
        note = conn.execute(
            "SELECT id, content_hash FROM notes WHERE vault_id = ? AND path = ?", (vault.id, rel)
        ).fetchall()
        if not note:
            continue
        note_id, current = note[0]
        found = rows(conn, _CANDIDATES, (note_id, now - RECENT_S, MAX_CHECKED))
        newest = {r["id"] for r in found}
        found += [r for r in rows(conn, _FLAGGED, (note_id, now - RECENT_S, -1)) if r["id"] not in newest]
        if not found or (found[0]["hash_after"] == current and all(r["overwritten_at"] is None for r in found)):
            continue  # no agent write to judge, or the file is the version kms wrote last
        try:
            raw = resolve_note_file(str(vault.root), rel).read_bytes()
            if sha256_hex(raw) != current:
                continue  # not the version the index holds: a save still landing, judged at its own event
            text = decode(raw)[0]
        except Exception:  # gone, unreadable, not text: nothing to judge by
            continue
        for inv in found:
            if inv["change_kind"] == changes.FILES_CHANGED:
                inv["files"] = provenance.file_changes(conn, inv["id"])
            for key in ("props_before", "props_after"):
                inv[key] = json.loads(inv[key]) if inv[key] is not None else None
            kept = changes.survives(changes.from_row(inv), text)
            if kept is None:
                continue  # nothing this write left that could be looked for
            gone = not kept
            if gone and inv["overwritten_at"] is None:
                conn.execute("UPDATE tool_invocations SET overwritten_at = ? WHERE id = ?", (now, inv["id"]))
                changed += 1
            elif not gone and inv["overwritten_at"] is not None:
                conn.execute("UPDATE tool_invocations SET overwritten_at = NULL WHERE id = ?", (inv["id"],))
                changed += 1
    return changed
