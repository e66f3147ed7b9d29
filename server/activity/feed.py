"""Read-only queries behind the live dashboard (``kms tui``): what agents do, cheaply.

The dashboard polls several times a second while a person watches, and the
provenance table may hold 100,000 rows, so every query here is bounded and uses
an index: the feed is a window of light columns (never ``inserted_text``),
paged by id; a live tail fetches only ids above the last one seen; "reverted by" comes
from the partial index on ``reverts_id`` (m005), and the detail view fetches full rows
one at a time. Where an insertion is now is ``server.activity.changes.locate``, the
answer revert acts on.

Nothing here writes and nothing imports textual: the TUI calls these from its
worker threads, each with its own connection.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from server.activity import changes, provenance
from server.activity.ratelimit import Gauge, session_gauges
from server.activity.session_registry import SessionRow, list_sessions, pid_alive
from server.activity.tool_names import KMS_APPEND, KMS_CREATE, KMS_INSERT_AT, KMS_UPDATE_PROPERTIES
from server.errors import KmsError
from server.store.db import rows, scalar
from server.vault.files import decode
from server.vault.paths import resolve_note_file

FEED_WINDOW = 500
LIVE_AFTER_S = 45.0  # a server heartbeats every 15 s; three missed beats and it is no longer "live"
TOOLS = (KMS_CREATE, KMS_APPEND, KMS_INSERT_AT, KMS_UPDATE_PROPERTIES, "revert")
STATUSES = ("success", "error", "conflict", "rate-limited", "folder-denied", "refused")

_FEED_COLUMNS = (
    "t.id, t.at, t.session_id, t.actor, t.tool, t.note_id, t.vault, t.path, "
    "coalesce(t.title, (SELECT n.title FROM notes n WHERE n.id = t.note_id)) AS title, "
    "t.status, t.error, t.lines_added, t.reverts_id, t.overwritten_at"
)


# ----------------------------------------------------------------------------- the feed


@dataclass(frozen=True)
class FeedFilter:
    """What the person narrowed the feed to (None = any)."""

    session: str | None = None
    tool: str | None = None
    status: str | None = None

    def matches(self, row: dict[str, Any]) -> bool:
        """The same test the SQL applies, for rows that arrive on the live tail."""
        return (
            (self.session is None or row["session_id"] == self.session)
            and (self.tool is None or row["tool"] == self.tool)
            and (self.status is None or row["status"] == self.status)
        )

    def where(self) -> tuple[list[str], list[Any]]:
        clauses: list[str] = []
        params: list[Any] = []
        for column, value in (("session_id", self.session), ("tool", self.tool), ("status", self.status)):
            if value is not None:
                clauses.append(f"t.{column} = ?")
                params.append(value)
        return clauses, params


@dataclass(frozen=True)
class FeedPage:
    """Feed rows newest first, plus the highest id that existed when they were read.

    ``high_water`` lets a caller merge tail rows that arrived while the page was being
    fetched (ids above it) without gaps or duplicates.
    """

    rows: list[dict[str, Any]]
    high_water: int
    more: bool  # older matching rows exist beyond this page


def data_version(conn: apsw.Connection) -> int:
    """SQLite's per-connection change counter: moves when another connection commits."""
    return int(scalar(conn, "PRAGMA data_version") or 0)


def latest_id(conn: apsw.Connection) -> int:
    return int(scalar(conn, "SELECT max(id) FROM tool_invocations") or 0)


def feed_page(
    conn: apsw.Connection,
    flt: FeedFilter | None = None,
    *,
    before_id: int | None = None,
    limit: int = FEED_WINDOW,
) -> FeedPage:
    """The newest ``limit`` matching rows (older than ``before_id`` when paging back)."""
    conn.execute("BEGIN")  # one snapshot: the page and its high-water mark agree
    try:
        high = latest_id(conn)
        found, more = window(conn, flt, before_id=before_id, limit=limit)
    finally:
        conn.execute("COMMIT")
    return FeedPage(found, high, more)


def window(
    conn: apsw.Connection, flt: FeedFilter | None = None, *, before_id: int | None = None, limit: int = FEED_WINDOW
) -> tuple[list[dict[str, Any]], bool]:
    """``feed_page``'s rows and whether older ones exist, in the caller's transaction (the dashboard's
    feed merges them with ``server.activity.outside_feed`` in one snapshot)."""
    clauses, params = (flt or FeedFilter()).where()
    if before_id is not None:
        clauses.append("t.id < ?")
        params.append(before_id)
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    found = rows(
        conn,
        f"SELECT {_FEED_COLUMNS} FROM tool_invocations t {where} ORDER BY t.id DESC LIMIT ?",
        (*params, limit + 1),
    )
    return found[:limit], len(found) > limit


def feed_since(conn: apsw.Connection, after_id: int, limit: int = FEED_WINDOW) -> list[dict[str, Any]]:
    """Rows with id above ``after_id``, oldest first (a tail pages forward and never skips)."""
    return rows(
        conn,
        f"SELECT {_FEED_COLUMNS} FROM tool_invocations t WHERE t.id > ? ORDER BY t.id ASC LIMIT ?",
        (after_id, limit),
    )


def search_feed(
    conn: apsw.Connection, query: str, flt: FeedFilter | None = None, limit: int = FEED_WINDOW
) -> list[dict[str, Any]]:
    """Full-text search over the provenance FTS index (tool, title, input, inserted text,
    message), newest first like the feed it replaces, narrowed by the same filters."""
    match = provenance.fts_query(query)
    if not match:
        return []
    clauses, params = (flt or FeedFilter()).where()
    extra = (" AND " + " AND ".join(clauses)) if clauses else ""
    return rows(
        conn,
        f"""SELECT {_FEED_COLUMNS} FROM tool_invocations t
            WHERE t.id IN (SELECT rowid FROM tool_invocations_fts WHERE tool_invocations_fts MATCH ?){extra}
            ORDER BY t.id DESC LIMIT ?""",
        (match, *params, limit),
    )


def reverted_ids(conn: apsw.Connection) -> dict[int, int]:
    """invocation id -> id of the successful revert that took it back (the m005 index holds only
    rows with a ``reverts_id``, so this reads the reverts, never the whole table)."""
    found = conn.execute(
        """SELECT reverts_id, min(id) FROM tool_invocations
           WHERE reverts_id IS NOT NULL AND status = 'success' GROUP BY reverts_id"""
    )
    return {int(target): int(by) for target, by in found}


def overwritten_ids(conn: apsw.Connection, from_id: int = 0) -> set[int]:
    """Ids (from ``from_id`` up) of agent writes a later save dropped (``server.activity.overwrites``);
    the m010 partial index holds only those rows, so a live dashboard can ask on every commit."""
    found = conn.execute(
        "SELECT id FROM tool_invocations INDEXED BY tool_invocations_overwritten "
        "WHERE overwritten_at IS NOT NULL AND id >= ?",
        (from_id,),
    )
    return {int(r[0]) for r in found}


# ----------------------------------------------------------------------------- sessions and gauges


@dataclass(frozen=True)
class SessionInfo:
    """A session row (or a writer known only from its counters) with its state and gauge."""

    id: str
    kind: str
    state: str  # live | idle | gone | ended
    started_at: float | None
    last_seen_at: float | None
    ended_at: float | None
    exit_code: int | None
    vault: str | None
    gauge: Gauge = field(default_factory=Gauge)
    control: str = "active"  # the person's control: active, paused, revoked (server.activity.control)
    pending: int = 0  # its calls waiting for approval
    label: str | None = None  # the label of the service token it was served under (`host:cursor`, ...)

    @property
    def who(self) -> str:
        """How a list names it: its token's label, else its kind (a service session was an anonymous
        `server` in `kms session list` and the dashboard)."""
        return self.label or self.kind


def _state(s: SessionRow, now: float) -> str:
    if s.ended_at is not None:
        return "ended"
    if now - s.last_seen_at <= LIVE_AFTER_S:
        return "live"
    return "idle" if pid_alive(s.pid) else "gone"


def session_overview(conn: apsw.Connection, now: float, limit: int = 50) -> list[SessionInfo]:
    """Recent sessions, live ones first, each with its write gauge.

    Writers that have counters but no session row (a test harness, an old server) are
    listed too, so every write the feed shows has a gauge somewhere.
    """
    gauges = session_gauges(conn, now)
    pending = dict(
        conn.execute("SELECT session_id, count(*) FROM pending_writes WHERE status = 'pending' GROUP BY session_id")
    )
    labels = dict(  # a host's or the person's token names its session; a launcher's says no more than its kind
        conn.execute("SELECT session_id, label FROM tokens WHERE kind != 'session' ORDER BY created_at")
    )
    out = [
        SessionInfo(
            s.id,
            s.kind,
            _state(s, now),
            s.started_at,
            s.last_seen_at,
            s.ended_at,
            s.exit_code,
            s.vault,
            gauges.pop(s.id, Gauge()),
            s.control,
            pending.get(s.id, 0),
            labels.get(s.id),
        )
        for s in list_sessions(conn, limit=limit)
    ]
    marks = ",".join("?" * len(gauges))  # (the dashboard polls this: only the writers left, not every session)
    found = conn.execute(f"SELECT id FROM sessions WHERE id IN ({marks})", tuple(gauges)) if gauges else ()
    recorded = {sid for (sid,) in found}
    for sid, g in gauges.items():
        if sid not in recorded:  # a session past ``limit`` is not a writer without a row
            out.append(SessionInfo(sid, "?", "idle", None, None, None, None, None, g))
    order = {"live": 0, "idle": 1, "gone": 2, "ended": 3}
    out.sort(key=lambda s: (order[s.state], -(s.started_at or 0), s.id))
    return out[:limit]


def session_reads(conn: apsw.Connection, session_id: str, limit: int = 500) -> list[dict[str, Any]]:
    """Notes the session's agent read, most recent first (title/path when still indexed)."""
    return rows(
        conn,
        """SELECT r.note_id, r.count, r.first_at, r.last_at, n.title, n.path, v.name AS vault
           FROM note_reads r LEFT JOIN notes n ON n.id = r.note_id LEFT JOIN vaults v ON v.id = n.vault_id
           WHERE r.session_id = ? ORDER BY r.last_at DESC, r.note_id LIMIT ?""",
        (session_id, limit),
    )


# ----------------------------------------------------------------------------- detail


@dataclass(frozen=True)
class ContextLine:
    """One line of the note around an insertion: (text, inserted?) pieces."""

    number: int  # 1-based line number in the note as it is now
    pieces: tuple[tuple[str, bool], ...]

    @property
    def inserted(self) -> bool:
        return any(flag for _text, flag in self.pieces)


@dataclass(frozen=True)
class NoteNow:
    """Where an invocation's inserted text stands in the note as it is now on disk."""

    state: str  # present | moved | edited | ambiguous | missing | unreadable | none
    explanation: str
    file: Path | None = None
    bytes_now: int | None = None
    offset: int | None = None  # where the inserted text starts now
    lines: tuple[ContextLine, ...] = ()


@dataclass(frozen=True)
class Detail:
    invocation: dict[str, Any]
    note: NoteNow


def _note_file(conn: apsw.Connection, inv: dict[str, Any]) -> tuple[Path, str]:
    """The note's file now: by note id (the index follows renames), else the recorded path."""
    if not inv.get("vault"):
        raise KmsError("not-found", "the invocation names no vault")
    found = rows(
        conn,
        """SELECT v.root, coalesce(n.path, ?) AS path FROM vaults v
           LEFT JOIN notes n ON n.vault_id = v.id AND n.id = ? WHERE v.name = ?""",
        (inv.get("path"), inv.get("note_id"), inv["vault"]),
    )
    if not found or not found[0]["path"]:
        raise KmsError("not-found", f"vault {inv['vault']!r} or the note's path is gone")
    return resolve_note_file(found[0]["root"], found[0]["path"]), found[0]["path"]


def context_lines(text: str, start: int, length: int, around: int = 3) -> tuple[ContextLine, ...]:
    """The lines covering ``text[start:start+length]`` plus ``around`` lines either side,
    split into pieces flagged inserted or not (an insertion may start or end mid-line)."""
    end = start + length
    starts = [0, *(m.end() for m in re.finditer("\n", text))]
    first = bisect_right(starts, start) - 1
    last = bisect_right(starts, max(start, end - 1)) - 1
    out: list[ContextLine] = []
    for i in range(max(0, first - around), min(len(starts) - 1, last + around) + 1):
        a = starts[i]
        b = starts[i + 1] - 1 if i + 1 < len(starts) else len(text)
        if b > a and text[b - 1] == "\r":
            b -= 1
        s, e = max(a, start), min(b, end)
        pieces: list[tuple[str, bool]]
        if s < e:
            pieces = [(text[a:s], False)] if a < s else []
            pieces.append((text[s:e], True))
            if e < b:
                pieces.append((text[e:b], False))
        elif a == b and start <= a < end:
            pieces = [("", True)]  # an empty line the insertion added
        else:
            pieces = [(text[a:b], False)]
        out.append(ContextLine(i + 1, tuple(pieces)))
    return tuple(out)


def invocation_detail(conn: apsw.Connection, invocation_id: int, around: int = 3) -> Detail | None:
    """One invocation in full plus its inserted text in context in the note as it is NOW."""
    inv = provenance.get_invocation(conn, invocation_id)
    if inv is None:
        return None
    if not inv.get("vault") or not (inv.get("path") or inv.get("note_id")):
        return Detail(inv, NoteNow("none", "this call touched no note"))
    try:
        path, _rel = _note_file(conn, inv)
        raw = path.read_bytes()
        text, _fmt = decode(raw)
    except FileNotFoundError:
        return Detail(inv, NoteNow("missing", "the note no longer exists"))
    except (KmsError, OSError) as e:
        return Detail(inv, NoteNow("unreadable", getattr(e, "message", None) or str(e)))
    change = changes.from_row(inv)
    where = changes.locate(change, text)
    found = changes.inserted(change)
    lines = context_lines(text, where.offset, len(found[1]), around) if where.offset is not None and found else ()
    return Detail(inv, NoteNow(where.state, where.explanation, path, len(raw), where.offset, lines))


@dataclass(frozen=True)
class NoteText:
    """A note's current text for viewing, with the invocation's insertion located in it."""

    label: str  # vault/path
    file: Path
    text: str
    offset: int | None = None
    length: int = 0


def _read_text(path: Path, rel: str) -> str:
    try:
        return decode(path.read_bytes())[0]
    except FileNotFoundError as e:
        raise KmsError("not-found", f"the note {rel!r} no longer exists") from e


def read_note(conn: apsw.Connection, invocation_id: int) -> NoteText:
    """The note an invocation wrote, as it is now, with its inserted text located."""
    inv = provenance.get_invocation(conn, invocation_id)
    if inv is None:
        raise KmsError("not-found", f"no tool invocation #{invocation_id}")
    if not inv.get("vault") or not (inv.get("path") or inv.get("note_id")):
        raise KmsError("not-found", f"invocation #{invocation_id} touched no note")
    path, rel = _note_file(conn, inv)
    text = _read_text(path, rel)
    change = changes.from_row(inv)
    found = changes.inserted(change)
    where = changes.locate(change, text)
    return NoteText(f"{inv['vault']}/{rel}", path, text, where.offset, len(found[1]) if found else 0)


def read_note_by_id(conn: apsw.Connection, note_id: str) -> NoteText:
    """An indexed note (e.g. one a session read), as it is now."""
    found = rows(
        conn,
        "SELECT v.root, v.name, n.path FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE n.id = ?",
        (note_id,),
    )
    if not found:
        raise KmsError("not-found", f"note {note_id} is no longer indexed")
    r = found[0]
    path = resolve_note_file(r["root"], r["path"])
    return NoteText(f"{r['name']}/{r['path']}", path, _read_text(path, r["path"]))
