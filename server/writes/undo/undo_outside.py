"""The notes a session changed outside kms, in its undo: its agent's own Edit/Write (or any change its
hooks reported, ``session_material.files_for_session``) that the note history attributes to it.

``plan`` finds, for each note the session reported, its versions (``activity.note_history.versions``): those whose
bytes are those the session's report saw right after its edit (a deletion: that the history attributes
to this session, ``attribute_outside_change``; a save the watcher missed is indexed first: ``catch_up``). The note
goes back to the version it had before the session's first such change: rewritten (``restore.restore``), or
created again when the session left it deleted; a note the session created goes to kms's trash (never lost).
A note someone else changed after the session's edit (a version neither the session's edit nor its kms
calls made) is not restored: listed as ``conflict`` with why. The session's own kms calls on that note made
after its first outside edit are covered by the restore (``covers``), so the session undo does not revert
them again; its earlier ones are reverted after the restore, as usual.

Each restore is the person's write (recorded, revertible), made only while the note still holds the bytes
the preview saw (``expect``), else ``conflict`` and the others are still restored.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import apsw

from server.activity.changes import FilesChanged
from server.activity.note_history import REPORTED_WINDOW_S, Line, line_by_hid, pick, version_bytes, versions
from server.activity.session_material import OutsideFile, files_for_session
from server.errors import KmsError
from server.index.note_versions import HOW_DELETED
from server.vault.files import sha256_hex
from server.vault.paths import TRASH, is_note_path
from server.vault.registry import Vault, get_vault
from server.writes import reindex
from server.writes.context import Touched, WriteContext
from server.writes.multifile import apply_plans
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.person import person_write
from server.writes.undo.restore import TOOL_RESTORE, current_bytes, restore, restore_target
from server.writes.undo.revert import free_trash_path
from server.writes.unit_files import FilePlan

KIND = "outside edit reported by the session"


def _reports(conn: apsw.Connection, session_id: str, since: float | None) -> list[OutsideFile]:
    """The session's reported edits of notes inside a vault (since ``since``, give or take the report's delay)."""
    start = (since or 0.0) - REPORTED_WINDOW_S
    return [
        f
        for f in files_for_session(conn, session_id)
        if f.vault_id is not None and f.path and is_note_path(f.path) and f.at >= start
    ]


def catch_up(conn: apsw.Connection, session_id: str, since: float | None = None) -> None:
    """Index the notes the session reported, as they are now: a save the watcher had not seen yet (the session
    ended before its watcher did) gets its version, so the undo judges what is on disk."""
    for vault_id, path in sorted({(f.vault_id, f.path) for f in _reports(conn, session_id, since)}):
        assert vault_id is not None and path is not None
        try:
            reindex.as_it_is(conn, get_vault(conn, vault_id), path)
        except KmsError:
            continue  # a vault removed since, a path no longer a plain one: nothing kms can restore


def _lines(conn: apsw.Connection, reports: Iterable[OutsideFile]) -> list[Line]:
    hids: set[int] = set()
    for vault_id, path in {(f.vault_id, f.path) for f in reports}:
        hids.update(
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT v.hid FROM history_versions v JOIN history_notes h ON h.hid = v.hid "
                "WHERE h.vault_id = ? AND v.path = ?",
                (vault_id, path),
            )
        )
    return [line_by_hid(conn, hid) for hid in sorted(hids)]


def _who(v: Mapping[str, Any], session_id: str, seen_after: set[tuple[str, str]]) -> str:
    """``outside``: the session's edit outside kms; ``kms``: one of its kms calls; ``other``: anyone else.

    A version with bytes is the session's edit only when they are the bytes its report saw right after the
    edit (the history's nearest-report rule would also name a save made moments before or after it by
    someone else); a deletion, which has none, is the session's when the history attributes it so."""
    who = v["who"]
    if who["invocationId"] is not None:
        return "kms" if who["by"] == "agent" and who["sessionId"] == session_id else "other"
    if v["hash"]:
        return "outside" if (v["path"], v["hash"]) in seen_after else "other"
    return "outside" if who["sessionId"] == session_id else "other"


def plan(conn: apsw.Connection, session_id: str, since: float | None = None) -> dict[str, list[dict[str, Any]]]:
    """``restore``: the notes to bring back (each with its ``action``: restore, recreate or trash, the
    version, ``sizeChange``, ``expect`` and the kms calls it ``covers``); ``skip``: those that cannot be,
    with ``reason`` and ``errorKind`` ``conflict``. Nothing is written (but the index catching up)."""
    reports = _reports(conn, session_id, since)
    tool_of: dict[tuple[int | None, str | None], str] = {}
    for f in reports:
        tool_of.setdefault((f.vault_id, f.path), f.tool)
    out: dict[str, list[dict[str, Any]]] = {"restore": [], "skip": []}
    for line in _lines(conn, reports):
        seen_after = {(f.path or "", f.hash_after) for f in reports if f.vault_id == line.vault_id and f.hash_after}
        entries = list(reversed(versions(conn, line)))  # oldest first
        kinds = [_who(v, session_id, seen_after) for v in entries]
        mine = [i for i, (v, k) in enumerate(zip(entries, kinds, strict=True)) if k == "outside"]
        first = next((i for i in mine if entries[i]["at"] >= (since or 0)), None)
        if first is None:
            continue  # kms kept no version the session made (history off, or the edit left the bytes as they were)
        vault, path = restore_target(conn, line)
        now = current_bytes(conn, line)
        item: dict[str, Any] = {
            "kind": KIND,
            "tool": tool_of.get((line.vault_id, entries[first]["path"]), "Edit"),
            "at": entries[first]["at"],
            "vault": vault.name,
            "path": path,
            "noteId": line.note_id,
            "hid": line.hid,
            "expect": "" if now is None else sha256_hex(now),
        }
        before = entries[first - 1] if first > 0 else None
        created = before is None or before["how"] == HOW_DELETED
        data = None if before is None or created else version_bytes(conn, pick(conn, line, number=before["version"]))
        if (created and (now is None or path.startswith(TRASH + "/"))) or (not created and now == data):
            continue  # as it was before the session already (undone, or put back by hand)
        other = next((v for v, k in zip(entries[first + 1 :], kinds[first + 1 :], strict=True) if k == "other"), None)
        if other is not None:
            by = other["who"]["by"] if other["who"]["by"] != "agent" else f"session {other['who']['sessionId']}"
            reason = f"changed after the session's edit by {by} (version {other['version']}); left as it is"
            out["skip"].append({**item, "reason": reason, "errorKind": "conflict"})
            continue
        if created:
            assert now is not None
            item.update(action="trash", version=None, sizeChange=-len(now), data=None)
        else:
            assert before is not None and data is not None
            action = "recreate" if now is None else "restore"
            item.update(action=action, version=before["version"], sizeChange=len(data) - len(now or b""), data=data)
        item["covers"] = [
            {"invocationId": v["who"]["invocationId"], "at": v["at"]}
            for v, k in zip(entries[first + 1 :], kinds[first + 1 :], strict=True)
            if k == "kms"
        ]
        out["restore"].append(item)
    return out


def public(item: Mapping[str, Any]) -> dict[str, Any]:
    """An item as the preview shows it (the bytes it restores stay out)."""
    return {k: v for k, v in item.items() if k != "data"}


def apply(conn: apsw.Connection, item: Mapping[str, Any], session_id: str, expect: str) -> dict[str, Any]:
    """Bring one note back as ``plan`` said, as the person, only while it holds ``expect`` (its hash at the
    preview, ``""``: no file); else ``conflict``, nothing written."""
    why = f"undo of session {session_id}: {KIND}"
    if item["action"] != "trash":
        return restore(conn, item["noteId"], number=item["version"], expect=expect, vault=item["vault"], why=why)
    path = item["path"]
    vault = get_vault(conn, item["vault"])
    touched = Touched(item["noteId"], vault.name, path, path.rsplit("/", 1)[-1])
    with person_write(conn, tool=TOOL_RESTORE, summary=f"move {path} to the trash ({why})", touched=touched) as call:
        call.outcome = _trash(call.ctx, vault, path, expect, touched)
        call.message = "moved to the trash"
    return {**call.result.result, "invocationId": call.invocation_id}


def _trash(ctx: WriteContext, vault: Vault, path: str, expect: str, touched: Touched) -> WriteOutcome:
    """Move a note the session created outside kms into kms's trash (``kms trash restore`` brings it back)."""
    if not expect:
        raise KmsError("conflict", f"{path!r} is gone already; nothing was moved", path=path)
    dest = free_trash_path(vault, f"{TRASH}/{path}")
    try:
        files, unit = apply_plans(ctx, vault, [FilePlan(path, lambda t: t, new_path=dest, expect_hash=expect)])
    except KmsError as e:
        if e.kind != "conflict":
            raise
        raise KmsError("conflict", f"{path!r} changed since the preview; nothing was moved", path=path) from None
    result = WriteResult(title=touched.title or path, path=dest, oldPath=path, vault=vault.name, changed=True)
    reindex.warn_into(ctx, unit, result)
    return WriteOutcome(result, FilesChanged(path, tuple(files)))
