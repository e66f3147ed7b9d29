"""A note's history told to the person and to agents (docs/history.md): its versions, who made each, diffs.

The index keeps the versions (``server.index.note_versions``); who made one is told here from what kms
recorded: the call whose bytes a version holds (``tool_invocations.hash_after``, or a unit's
``tool_file_changes``) made within ``CALL_WINDOW_S`` of when the version was seen, a kms call (an
agent's, with its session and call id) or the person's (a revert, a restore, an approval); else the change
was made **outside kms**, and ``attribute_outside_change`` is the one place that may know more (a
``kms claude`` session whose hooks reported an edit of that file).

Versions are numbered 1, 2, ... per note in the order kms saw them (moves and deletions are entries
too, with no bytes of their own). An agent sees the history of a visible note only, and no version seen
while the note was hidden (``agent_versions``).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

import apsw

from server.activity.session_material import files_for_path
from server.errors import KmsError
from server.index.note_versions import HOW_DELETED, HOW_MOVED
from server.index.notes import find_note
from server.store import version_blobs as blobs

CALL_WINDOW_S = 60.0  # a call's row is written right after the version it made was indexed
OUTSIDE = "outside kms"
REPORTED_WINDOW_S = 30.0  # a host's report of an edit and kms seeing it: the watcher's delay, the hook's


@dataclass(frozen=True)
class OutsideChange:
    """What is known about a change no kms call made: the ``kms claude`` session whose hooks reported it."""

    session_id: str
    tool: str  # the agent's own tool that made it (Edit, Write, Bash)


def attribute_outside_change(
    conn: apsw.Connection, vault_id: int, path: str, at: float, content_hash: str | None = None
) -> OutsideChange | None:
    """The seam for changes made around kms: which session, if any, reported editing ``path`` (of vault
    ``vault_id``) at about ``at`` through its Claude Code hooks. None: nobody did (an editor, a sync,
    a script), told as "outside kms". Every history answer asks only this for such a change.

    The session's report (PostToolUse, ``session_material``) and kms seeing the file change (the watcher, or
    the next index) come within moments of each other, in either order: the report nearest to ``at`` within
    ``REPORTED_WINDOW_S`` names the session. A report that recorded the bytes it left (``hash_after``) names
    it only for a version with those bytes (``content_hash``), so a person's save just before or after the
    agent's edit stays the person's."""

    reports = files_for_path(conn, vault_id, path, since=at - REPORTED_WINDOW_S)
    near = [
        r
        for r in reports
        if abs(r.at - at) <= REPORTED_WINDOW_S
        and (content_hash is None or r.hash_after is None or r.hash_after == content_hash)
    ]
    if not near:
        return None
    best = min(near, key=lambda r: abs(r.at - at))
    return OutsideChange(best.session_id, best.tool)


@dataclass(frozen=True)
class Line:
    """A note's line of versions: its id (the latest it had), vault, path, and whether it is gone."""

    hid: int
    vault_id: int
    vault: str
    note_id: str
    path: str
    rid: int | None
    deleted_at: float | None


def line_by_hid(conn: apsw.Connection, hid: int) -> Line:
    """The line numbered ``hid`` (``history_notes``)."""
    row: Any = conn.execute(
        "SELECT h.hid, h.vault_id, coalesce(v.name, '?'), h.note_id, h.path, h.rid, h.deleted_at "
        "FROM history_notes h LEFT JOIN vaults v ON v.id = h.vault_id WHERE h.hid = ?",
        (hid,),
    ).fetchone()
    return Line(*row)


def find_line(conn: apsw.Connection, ref: str, vault: str | None = None) -> Line:
    """A note's line by its id (any id it had), its path now or a path it had (a deleted note's too),
    else the note a name finds (``find_note``). ``not-found`` when kms keeps no version of it."""

    ref = ref.strip()
    found = (
        conn.execute(
            "SELECT h.hid FROM notes n JOIN history_notes h ON h.rid = n.rid WHERE n.id = ?", (ref,)
        ).fetchone()
        or conn.execute("SELECT hid FROM history_ids WHERE note_id = ?", (ref,)).fetchone()
    )
    if found is None:
        vault_sql = " AND vault_id = (SELECT id FROM vaults WHERE name = ?)" if vault else ""
        args: tuple = (ref, vault) if vault else (ref,)
        found = (
            conn.execute(  # a note there now
                "SELECT h.hid FROM notes n JOIN history_notes h ON h.rid = n.rid "
                f"WHERE n.path = ?{vault_sql.replace('vault_id', 'n.vault_id')} LIMIT 1",
                args,
            ).fetchone()
            or conn.execute(  # a deleted note that was there
                f"SELECT hid FROM history_notes WHERE path = ? AND rid IS NULL{vault_sql} "
                "ORDER BY deleted_at DESC LIMIT 1",
                args,
            ).fetchone()
            or conn.execute(
                "SELECT v.hid FROM history_versions v JOIN history_notes h ON h.hid = v.hid "
                f"WHERE v.path = ?{vault_sql.replace('vault_id', 'h.vault_id')} ORDER BY v.vid DESC LIMIT 1",
                args,
            ).fetchone()
        )
    if found is None:
        vault_id = conn.execute("SELECT id FROM vaults WHERE name = ?", (vault,)).fetchone() if vault else None
        try:
            note = find_note(conn, ref, include_hidden=True, vault_id=vault_id[0] if vault_id else None)
        except KmsError as e:
            if e.kind != "not-found":
                raise
            note = None
        if note is not None:
            found = conn.execute("SELECT hid FROM history_notes WHERE rid = ?", (note["rid"],)).fetchone()
    if found is None:
        raise KmsError("not-found", f"kms keeps no version of {ref!r}", ref=ref)
    return line_by_hid(conn, int(found[0]))


def _calls(conn: apsw.Connection, line: Line) -> list[tuple]:
    """(at, id, actor, tool, session, hash_after, path, new_path) of every successful call on this note."""
    ids = [r[0] for r in conn.execute("SELECT note_id FROM history_ids WHERE hid = ?", (line.hid,))]
    paths = [r[0] for r in conn.execute("SELECT DISTINCT path FROM history_versions WHERE hid = ?", (line.hid,))]
    marks_i, marks_p = ",".join("?" * len(ids)), ",".join("?" * len(paths))
    return conn.execute(
        f"""SELECT t.at, t.id, t.actor, t.tool, t.session_id, t.hash_after, t.path, NULL FROM tool_invocations t
            WHERE t.note_id IN ({marks_i}) AND t.status = 'success'
            UNION ALL
            SELECT t.at, t.id, t.actor, t.tool, t.session_id, f.hash_after, f.path, f.new_path
            FROM tool_file_changes f JOIN tool_invocations t ON t.id = f.invocation_id
            WHERE (f.path IN ({marks_p}) OR f.new_path IN ({marks_p})) AND t.status = 'success'
            ORDER BY 1""",
        (*ids, *paths, *paths),
    ).fetchall()


def _by_call(call: tuple) -> dict[str, Any]:
    _at, invocation, actor, tool, session, *_rest = call
    return {"by": actor, "how": tool, "sessionId": session if actor == "agent" else None, "invocationId": invocation}


def _who(conn: apsw.Connection, line: Line, v: dict[str, Any], calls: list[tuple]) -> dict[str, Any]:
    at, path, digest, how = v["at"], v["path"], v["hash"], v["how"]
    until = min(at + CALL_WINDOW_S, v.pop("_next_at", None) or at + CALL_WINDOW_S)
    near = [c for c in calls if at - 5 <= c[0] <= until]  # a call recorded after the next version made this one never
    for c in near:
        if how == HOW_DELETED and c[6] == path and (c[5] == "" or c[7] not in (None, path)):
            return _by_call(c)
        if how == HOW_MOVED and c[7] == path:
            return _by_call(c)
        if how not in (HOW_DELETED, HOW_MOVED) and digest and c[5] == digest:
            return _by_call(c)
    outside = attribute_outside_change(conn, line.vault_id, path, at, digest or None)
    if outside is not None:
        return {
            "by": "agent",
            "how": f"{OUTSIDE} ({outside.tool}, reported by its session)",
            "sessionId": outside.session_id,
            "invocationId": None,
        }
    return {"by": OUTSIDE, "how": OUTSIDE, "sessionId": None, "invocationId": None}


def versions(
    conn: apsw.Connection, line: Line, *, limit: int | None = None, before: int | None = None, agent: bool = False
) -> list[dict[str, Any]]:
    """The note's versions, newest first (``before``: only those numbered below it); ``agent``: none
    seen while the note was hidden (their number and time are not told either)."""
    rows: list[Any] = conn.execute(
        "SELECT v.vid, v.at, v.path, coalesce(b.hash, ''), v.size, v.how, v.hidden FROM history_versions v "
        "LEFT JOIN history_blobs b ON b.bid = v.bid WHERE v.hid = ? ORDER BY v.vid",
        (line.hid,),
    ).fetchall()
    calls = _calls(conn, line)
    out: list[dict[str, Any]] = []
    prev_size = 0
    next_at = [r[1] for r in rows[1:]] + [None]
    for number, (_vid, at, path, digest, size, how, hidden) in enumerate(rows, start=1):
        entry = {
            "version": number,
            "at": at,
            "path": path,
            "hash": digest,
            "size": size,
            "sizeChange": size - prev_size,
            "how": how,
            "hidden": bool(hidden),
            "_next_at": next_at[number - 1],
        }
        prev_size = size
        if before is not None and number >= before:
            continue
        if agent and hidden:
            continue
        out.append(entry)
    out.reverse()
    if limit is not None:
        out = out[:limit]
    for entry in out:
        entry["who"] = _who(conn, line, entry, calls)
    for entry in out:
        entry.pop("_next_at", None)
    return out


def _rows(conn: apsw.Connection, line: Line) -> list[tuple]:
    return conn.execute(
        "SELECT v.vid, v.at, v.path, coalesce(b.hash, ''), v.bid, v.size, v.how, v.hidden FROM history_versions v "
        "LEFT JOIN history_blobs b ON b.bid = v.bid WHERE v.hid = ? ORDER BY v.vid",
        (line.hid,),
    ).fetchall()


def pick(conn: apsw.Connection, line: Line, *, number: int | None = None, at: float | None = None) -> dict[str, Any]:
    """One version with bytes: number ``number``, or the one the note held at time ``at`` (the last seen
    at or before it); neither: the newest. ``not-found`` when there is none (a deletion has no bytes)."""
    rows = _rows(conn, line)
    chosen = None
    if number is not None:
        if not 1 <= number <= len(rows):
            raise KmsError("not-found", f"{line.path!r} has versions 1 to {len(rows)}, not {number}")
        chosen = number
    else:
        candidates = [i for i, r in enumerate(rows, start=1) if at is None or r[1] <= at]
        if not candidates:
            raise KmsError("not-found", f"kms kept no version of {line.path!r} from that time")
        chosen = candidates[-1]
    vid, v_at, path, digest, bid, size, how, hidden = rows[chosen - 1]
    if bid is None:
        if number is not None:
            raise KmsError("not-found", f"version {chosen} of {line.path!r} is its deletion: it has no text")
        older = [i for i in range(chosen - 1, 0, -1) if rows[i - 1][4] is not None]
        if not older:
            raise KmsError("not-found", f"kms kept no text of {line.path!r} from that time")
        return pick(conn, line, number=older[0])
    return {
        "version": chosen,
        "at": v_at,
        "path": path,
        "hash": digest,
        "size": size,
        "how": how,
        "hidden": bool(hidden),
        "bid": bid,
    }


def version_bytes(conn: apsw.Connection, version: dict[str, Any]) -> bytes:
    try:
        return blobs.blob_bytes(conn, int(version["bid"]))
    except LookupError:  # a damaged database repaired without this blob (``kms doctor`` counts them)
        raise KmsError("not-found", f"the text of version {version['version']} was lost") from None


def text_of(data: bytes) -> str:
    return data.decode("utf-8", "replace")


def unified(a: bytes, b: bytes, old: tuple[str | None, str], new: tuple[str | None, str], context: int = 3) -> str:
    """A unified diff of two versions' texts that ``git apply`` and ``patch`` take as it is: each side is
    (path, label), written ``a/PATH<TAB>(label)`` as diff -u writes a timestamp (a path of None is
    ``/dev/null``), and a last line without a newline is marked as diff marks it."""
    lines = difflib.unified_diff(
        text_of(a).splitlines(keepends=True),
        text_of(b).splitlines(keepends=True),
        _side("a", *old),
        _side("b", *new),
        n=context,
        lineterm="\n",
    )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


def _side(prefix: str, path: str | None, label: str) -> str:
    return "/dev/null" if path is None else f"{prefix}/{path}\t({label})"


def diff(
    conn: apsw.Connection,
    line: Line,
    *,
    number: int | None = None,
    at: float | None = None,
    to_number: int | None = None,
    to_at: float | None = None,
    current: bytes | None = None,
    to_now: bool = False,
) -> dict[str, Any]:
    """The diff from one version to another (``to_*``), or, ``to_now``, to ``current`` (the file now; None:
    the note is deleted, so the whole text is removed and ``deleted`` says so: comparing with the newest
    version instead showed a version against itself, "no difference"), else to the newest version."""
    a = pick(conn, line, number=number, at=at)
    deleted = False
    if to_number is not None or to_at is not None:
        b = pick(conn, line, number=to_number, at=to_at)
        b_bytes, b_side = version_bytes(conn, b), (b["path"], f"version {b['version']}")
    elif to_now or current is not None:
        deleted = current is None
        b, b_bytes, b_side = None, current or b"", (line.path, "deleted" if deleted else "now")
    else:
        b = pick(conn, line)
        b_bytes, b_side = version_bytes(conn, b), (b["path"], f"version {b['version']}")
    a_bytes = version_bytes(conn, a)
    return {
        "from": {k: a[k] for k in ("version", "at", "path", "size")},
        "to": None if b is None else {k: b[k] for k in ("version", "at", "path", "size")},
        "deleted": deleted,
        "diff": unified(a_bytes, b_bytes, (a["path"], f"version {a['version']}"), b_side),
    }
