"""The dashboard feed's second source: what a ``kms claude`` session changed outside kms (its agent's own
Edit/Write, reported by its hooks: ``session_files``) and kms saw (a version in the note history).

A row is one report joined to the version kms kept of it: a version of that vault path seen within
``REPORTED_WINDOW_S`` of the report, holding the bytes the report saw right after the edit (a report that
could not read them, or a deletion, matches any; bytes that match win, then the nearest), the rule
``note_history.attribute_outside_change`` applies. A report matching no version (history off, a file that is no
note) is no row; a change nobody reported is no session's.

The feed merges these rows with the calls (``server.activity.feed``) by time, each source paged by its own
id (``merged_page``: the newest ``limit`` of the merge, so paging back never skips or repeats a row). The
live tail keeps a high-water mark per table (``Mark``): a report and its version arrive in either order and
the row shows once both exist, found from whichever came last (reports above the mark, or reports near
versions above it). Every query is bounded and indexed: ``session_files`` by id, session and path,
``history_versions`` by id and by path and time (m037). Nothing here writes.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Any

import apsw

from server.activity import feed
from server.activity.feed import FEED_WINDOW, FeedFilter
from server.activity.note_history import REPORTED_WINDOW_S, unified
from server.index.note_versions import HOW_MOVED
from server.store import version_blobs as blobs
from server.store.db import rows, scalar

SOURCE = "outside"
STATUS = "outside"  # the status column of such a row: no kms call, so no kms status
SUFFIX = " (outside kms)"  # "Edit (outside kms)": the host's tool, told apart from kms's own

# the version a report names (see the module docstring); ``f`` is the report
_BEST_VERSION = f"""(SELECT v.vid FROM history_versions v INDEXED BY history_versions_path
        JOIN history_notes h ON h.hid = v.hid LEFT JOIN history_blobs b ON b.bid = v.bid
        WHERE v.path = f.path AND v.at BETWEEN f.at - {REPORTED_WINDOW_S} AND f.at + {REPORTED_WINDOW_S}
          AND h.vault_id = f.vault_id AND v.how != '{HOW_MOVED}'
          AND (f.hash_after IS NULL OR b.hash IS NULL OR b.hash = f.hash_after)
        ORDER BY b.hash IS f.hash_after DESC, abs(v.at - f.at), v.vid LIMIT 1)"""

# a report (``f``) joined to its version: what every query here selects, narrowed by its own WHERE
ROWS_SQL = f"""SELECT f.id AS fid, f.at, f.session_id, f.tool AS host_tool, v.vid, v.hid, v.at AS seen_at, v.path,
        v.size, v.how, v.bid, coalesce(vt.name, '?') AS vault, h.note_id,
        (SELECT n.title FROM notes n WHERE n.vault_id = f.vault_id AND n.path = v.path) AS title,
        (SELECT p.size FROM history_versions p WHERE p.hid = v.hid AND p.vid < v.vid
         ORDER BY p.vid DESC LIMIT 1) AS size_before
    FROM session_files f
    JOIN history_versions v ON v.vid = {_BEST_VERSION}
    JOIN history_notes h ON h.hid = v.hid
    LEFT JOIN vaults vt ON vt.id = f.vault_id"""


@dataclass(frozen=True)
class Mark:
    """The highest report id and version id the tail has looked at."""

    report: int = 0
    version: int = 0


@dataclass(frozen=True)
class MergedPage:
    """Feed rows of both sources newest first, with the high-water marks of the snapshot they were read in."""

    rows: list[dict[str, Any]]
    high_water: int  # the calls' (``tool_invocations.id``)
    mark: Mark
    more: bool  # older matching rows exist beyond this page


def row_key(row: dict[str, Any]) -> str:
    """A feed row's key: a call's id, or ``o`` and the report's id (the two id spaces overlap)."""
    return f"o{row['fid']}" if row.get("source") == SOURCE else str(row["id"])


def is_outside(row: dict[str, Any]) -> bool:
    return row.get("source") == SOURCE


def marks(conn: apsw.Connection) -> Mark:
    return Mark(
        int(scalar(conn, "SELECT max(id) FROM session_files") or 0),
        int(scalar(conn, "SELECT max(vid) FROM history_versions") or 0),
    )


def _row(r: dict[str, Any]) -> dict[str, Any]:
    before = r.pop("size_before")
    return {
        **r,
        "source": SOURCE,
        "actor": "agent",
        "tool": f"{r['host_tool']}{SUFFIX}",
        "status": STATUS,
        "size_change": r["size"] - (before or 0),
        "created": before is None,
        "error": None,
        "lines_added": None,
        "reverts_id": None,
        "overwritten_at": None,
    }


def _where(flt: FeedFilter) -> tuple[list[str], list[Any]] | None:
    """The filter as SQL on reports (the same test ``FeedFilter.matches`` makes of a row); None: it
    excludes every such row (a kms tool, a kms status)."""
    if flt.status not in (None, STATUS) or (flt.tool is not None and not flt.tool.endswith(SUFFIX)):
        return None
    clauses, params = ["f.vault_id IS NOT NULL"], []
    if flt.tool is not None:
        clauses.append("f.tool = ?")
        params.append(flt.tool.removesuffix(SUFFIX))
    if flt.session is not None:
        clauses.append("f.session_id = ?")
        params.append(flt.session)
    return clauses, params


def page(
    conn: apsw.Connection, flt: FeedFilter | None = None, *, before: int | None = None, limit: int = FEED_WINDOW
) -> tuple[list[dict[str, Any]], bool]:
    """The newest ``limit`` matching rows (reports older than ``before``), and whether older ones exist."""
    where = _where(flt or FeedFilter())
    if where is None:
        return [], False
    clauses, params = where
    if before is not None:
        clauses.append("f.id < ?")
        params.append(before)
    found = rows(conn, f"{ROWS_SQL} WHERE {' AND '.join(clauses)} ORDER BY f.id DESC LIMIT ?", (*params, limit + 1))
    return [_row(r) for r in found[:limit]], len(found) > limit


def merged_page(
    conn: apsw.Connection,
    flt: FeedFilter | None = None,
    *,
    before_id: int | None = None,
    before_report: int | None = None,
    limit: int = FEED_WINDOW,
) -> MergedPage:
    """The newest ``limit`` rows of both sources merged by time, each older than its own cursor (None: from
    the newest). A caller pages back with the oldest id of each source it holds."""
    conn.execute("BEGIN")  # one snapshot: the rows and the marks agree
    try:
        high, mark = feed.latest_id(conn), marks(conn)
        calls, calls_more = feed.window(conn, flt, before_id=before_id, limit=limit)
        outside, outside_more = page(conn, flt, before=before_report, limit=limit)
    finally:
        conn.execute("COMMIT")
    merged = list(heapq.merge(calls, outside, key=lambda r: -r["at"]))  # each source keeps its own order
    return MergedPage(merged[:limit], high, mark, calls_more or outside_more or len(merged) > limit)


def since(conn: apsw.Connection, mark: Mark, limit: int = FEED_WINDOW) -> tuple[list[dict[str, Any]], Mark, bool]:
    """Rows made whole since ``mark`` (a new report, or a new version of a reported edit), oldest first; the
    new mark; and whether more remain to look at (call again with the new mark)."""
    conn.execute("BEGIN")
    try:
        reports = [
            r[0]
            for r in conn.execute("SELECT id FROM session_files WHERE id > ? ORDER BY id LIMIT ?", (mark.report, limit))
        ]
        vids = [
            r[0]
            for r in conn.execute(
                "SELECT vid FROM history_versions WHERE vid > ? ORDER BY vid LIMIT ?", (mark.version, limit)
            )
        ]
        new = Mark(reports[-1] if reports else mark.report, vids[-1] if vids else mark.version)
        near = [
            r[0]
            for r in conn.execute(
                f"""SELECT DISTINCT f.id FROM history_versions v JOIN history_notes h ON h.hid = v.hid
                    JOIN session_files f INDEXED BY session_files_path ON f.vault_id = h.vault_id AND f.path = v.path
                     AND f.at BETWEEN v.at - {REPORTED_WINDOW_S} AND v.at + {REPORTED_WINDOW_S}
                    WHERE v.vid > ? AND v.vid <= ? AND f.id <= ?""",
                (mark.version, new.version, new.report),
            )
        ]
        ids = sorted(set(reports) | set(near))
        marks_sql = ",".join("?" * len(ids))
        found = rows(conn, f"{ROWS_SQL} WHERE f.id IN ({marks_sql}) ORDER BY f.id", tuple(ids)) if ids else []
    finally:
        conn.execute("COMMIT")
    full = len(reports) == limit or len(vids) == limit
    return [_row(r) for r in found], new, full


# ----------------------------------------------------------------------------- detail


@dataclass(frozen=True)
class OutsideDetail:
    """One outside row in full: the version kms saw and its diff against the one before."""

    row: dict[str, Any]
    number: int  # the version's number in the note's history (``kms history``)
    before: int | None  # the number of the last version before it with text (None: the edit created the note)
    diff: str


def _text(conn: apsw.Connection, bid: int | None) -> bytes:
    if bid is None:
        return b""  # a deletion
    try:
        return blobs.blob_bytes(conn, bid)
    except LookupError:  # a damaged database repaired without this blob (``kms doctor`` counts them)
        return b"(the text of this version was lost)\n"


def detail(conn: apsw.Connection, report_id: int) -> OutsideDetail | None:
    """The row of report ``report_id`` with the diff of its version against the one before (None: no such
    report, or kms kept no version of it)."""
    found = rows(conn, f"{ROWS_SQL} WHERE f.id = ?", (report_id,))
    if not found:
        return None
    row = _row(found[0])
    line = conn.execute(
        "SELECT vid, bid FROM history_versions WHERE hid = ? AND vid <= ? ORDER BY vid", (row["hid"], row["vid"])
    ).fetchall()
    older = [(i, int(bid)) for i, (_vid, bid) in enumerate(line[:-1], start=1) if bid is not None]
    before, before_bid = older[-1] if older else (None, None)
    this_bid = row["bid"]
    a = _text(conn, before_bid)
    b = _text(conn, None if this_bid is None else int(this_bid))
    name = f"{row['vault']}/{row['path']}"
    text = unified(a, b, (name if before else None, f"version {before}"), (name, f"version {len(line)}"))
    return OutsideDetail(row, len(line), before, text)
