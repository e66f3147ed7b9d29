"""Notice an agent's write that a later save dropped (an editor that had loaded the older version).

The watcher (``kms mcp``, ``kms watch``) calls ``check`` with the notes it just re-indexed (a hook it is
given: the index layer cannot import this one). Only notes with a recent successful
agent write are looked at (text inserted, a note created, properties changed, one note edited with
``kms_edit``). "Is what it wrote still there" is ``changes.survives`` (for
inserted text ``changes.locate``, the same answer the detail pane and revert give, so they never
disagree). A row whose change is gone and that was not reverted gets ``overwritten_at``; if the
change comes back (the person undid their save) the flag is cleared.

The flag is exact: a note is judged by the bytes the index holds (a file read that differs from them is a
save still landing, judged at its own event), and every flagged row of the note is judged again at each
event (a flag on a busy note would otherwise stay on text that came back).

No drop is missed however many writes the note had, and the work stays bounded: a save that was not
kms's (an editor holding an old buffer) can drop any recent write, so after one every recent write of the
note (``RECENT_S``) is judged; a watcher's ``Settled`` remembers, per note, the version it last judged and
the newest write it judged then, so while only kms's own appends and inserts followed (each written on the
version before it: its ``hash_before`` is the previous one's ``hash_after``) nothing but the flagged rows is
judged again, and a note whose file is that chain's end with no flag costs a few indexed queries. Without a
``Settled`` (a one-off call) every recent write is judged.
"""

from __future__ import annotations

import json
import threading
import time
from collections import OrderedDict
from typing import Any

import apsw

from server.activity import changes, provenance
from server.store.db import rows
from server.vault.files import decode, sha256_hex
from server.vault.paths import resolve_note_file
from server.vault.registry import Vault

RECENT_S = 24 * 3600.0  # writes older than this are not checked again (a person's later edits are theirs)
SETTLED_NOTES = 10_000  # notes a watcher remembers its last judgement of (the least recent forgotten)

_WHERE = """
     WHERE t.note_id = ? AND t.status = 'success' AND t.actor = 'agent' AND t.at >= ?
       AND t.change_kind IN ('text-inserted', 'file-created', 'properties-changed', 'files-changed')
       AND NOT EXISTS (SELECT 1 FROM tool_invocations r WHERE r.reverts_id = t.id AND r.status = 'success')
"""
_RECENT = f"SELECT t.id, t.change_kind, t.hash_before, t.hash_after, t.overwritten_at FROM tool_invocations t {_WHERE}"
_FULL = """
    SELECT t.id, t.path, t.change_kind, t.inserted_text, t.insert_offset, t.hash_after, t.overwritten_at,
           t.props_before, t.props_after
      FROM tool_invocations t WHERE t.id IN ({})
"""
_CHUNK = 500  # ids per IN list


class Settled:
    """A watcher's memory of its judgements: per note, the version (content hash) it judged every recent
    write against and the newest write id among them. Thread-safe; holds ``SETTLED_NOTES`` notes at most.
    Called as the watcher's ``after`` hook, it is ``check`` with this memory."""

    def __init__(self, size: int = SETTLED_NOTES) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._notes: OrderedDict[tuple[str, str], tuple[str, int]] = OrderedDict()

    def get(self, conn: apsw.Connection, note_id: str) -> tuple[str, int] | None:
        with self._lock:
            return self._notes.get((conn.filename, note_id))

    def put(self, conn: apsw.Connection, note_id: str, content_hash: str, newest: int) -> None:
        with self._lock:
            key = (conn.filename, note_id)
            self._notes[key] = (content_hash, newest)
            self._notes.move_to_end(key)
            while len(self._notes) > self._size:
                self._notes.popitem(last=False)

    def __call__(self, conn: apsw.Connection, vault: Vault, relpaths: list[str]) -> int:
        return check(conn, vault, relpaths, settled=self)


def only_kms_since(since: list[dict[str, Any]], current: str, judged_hash: str) -> bool:
    """Whether the note went from the version last judged to ``current`` by kms's own appends and inserts
    alone: every write recorded ``since`` links, ``hash_before`` to ``hash_after``, from that version to this
    one (in the order the writes happened, whatever order their rows were recorded in), so no save could have
    dropped anything since."""
    by_after = {r["hash_after"]: r for r in since}
    if len(by_after) != len(since):
        return False  # two writes left the same bytes: no single chain to follow
    expected = current
    while expected != judged_hash:
        r = by_after.pop(expected, None)
        if r is None or r["change_kind"] != changes.TEXT_INSERTED or not r["hash_before"]:
            return False
        expected = r["hash_before"]
    return not by_after


def _full_rows(conn: apsw.Connection, ids: list[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(0, len(ids), _CHUNK):
        part = ids[i : i + _CHUNK]
        out += rows(conn, _FULL.format(",".join("?" * len(part))), tuple(part))
    return out


def check(
    conn: apsw.Connection, vault: Vault, relpaths: list[str], now: float | None = None, settled: Settled | None = None
) -> int:
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
        note_id, current = str(note[0][0]), str(note[0][1])
        recent = (note_id, now - RECENT_S)
        last = settled.get(conn, note_id) if settled is not None else None
        since = rows(conn, _RECENT + " AND t.id > ? ORDER BY t.id DESC", (*recent, last[1])) if last else None
        if last is not None and since is not None and only_kms_since(since, current, last[0]):
            newest = since[0]["id"] if since else last[1]
            judge = [r["id"] for r in rows(conn, _RECENT + " AND t.overwritten_at IS NOT NULL", recent)]  # may be back
        else:
            found = rows(conn, _RECENT + " ORDER BY t.id DESC", recent)
            if not found:
                continue  # no agent write to judge
            newest = found[0]["id"]
            judge = [r["id"] for r in found]  # a save not kms's may have dropped any of them
        if not judge:
            if settled is not None:
                settled.put(conn, note_id, current, newest)
            continue
        try:
            raw = resolve_note_file(str(vault.root), rel).read_bytes()
            if sha256_hex(raw) != current:
                continue  # not the version the index holds: a save still landing, judged at its own event
            text = decode(raw)[0]
        except Exception:  # gone, unreadable, not text: nothing to judge by
            continue
        for inv in _full_rows(conn, judge):
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
        if settled is not None:
            settled.put(conn, note_id, current, newest)
    return changed
