"""The pending queue as the page shows it: newest first, grouped by session, each item a unit.

A **unit** is one staged call: every file it would change is decided together (the write guard applies a
call's files as one, so a decision per file cannot exist); a session's group can be approved or rejected
whole. Each item says who asked (the session, its kind and the label of the token it was served under: a
host, a remote grant), where it writes (vault and folder), its size (lines, files) and its full arguments.

A page shows ``PAGE`` items (the newest); older ones are a link away, so the page costs the same with 1,000
waiting calls as with 10 (``bench/bench_review.py``).
"""

from __future__ import annotations

import json
import posixpath
import time
from dataclasses import dataclass, field
from typing import Any

import apsw

from server.activity import approvals
from server.web.diffview import DiffView, view

PAGE = 30  # a page of the queue: what a person reviews at once (older ones: a link)


@dataclass(frozen=True)
class Who:
    session_id: str
    kind: str  # launcher, server, ... ('?' when no session row is left)
    label: str | None  # the token it was served under: host:cursor, a remote grant, ...
    vault: str | None

    @property
    def text(self) -> str:
        return self.label or self.kind


@dataclass(frozen=True)
class FileView:
    vault: str
    path: str
    new_path: str | None
    folder: str
    added: int
    removed: int
    diff: DiffView


@dataclass(frozen=True)
class Item:
    pending: approvals.Pending
    who: Who
    files: list[FileView]
    arguments: str  # the full arguments, as indented JSON

    @property
    def size(self) -> str:
        p = self.pending
        return f"{p.lines} line{'s' * (p.lines != 1)} in {len(p.files)} file{'s' * (len(p.files) != 1)}"


@dataclass
class Group:
    who: Who
    items: list[Item] = field(default_factory=list)


@dataclass(frozen=True)
class Queue:
    groups: list[Group]
    shown: int
    total: int
    older_than: int | None  # the id to page back from (None: nothing older)
    key: str
    paged: bool = False  # a page of older calls (not live)


def who_asked(conn: apsw.Connection, session_ids: list[str]) -> dict[str, Who]:
    """Each session's kind, vault and token label, in one query."""
    if not session_ids:
        return {}
    marks = ",".join("?" * len(session_ids))
    found = {
        sid: Who(sid, kind, label, vault)
        for sid, kind, vault, label in conn.execute(
            "SELECT s.id, s.kind, s.vault, (SELECT t.label FROM tokens t WHERE t.session_id = s.id"
            " AND t.kind != 'session' ORDER BY t.created_at LIMIT 1)"
            f" FROM sessions s WHERE s.id IN ({marks})",
            tuple(session_ids),
        )
    }
    return {sid: found.get(sid) or Who(sid, "?", None, None) for sid in session_ids}


def file_view(f: dict[str, Any]) -> FileView:
    folder = posixpath.dirname(f.get("newPath") or f["path"]) or "/"
    return FileView(f["vault"], f["path"], f.get("newPath"), folder, f["added"], f["removed"], view(f.get("diff", "")))


def item(p: approvals.Pending, who: Who) -> Item:
    args = json.dumps(p.arguments, ensure_ascii=False, indent=2, sort_keys=True, default=str)
    return Item(p, who, [file_view(f) for f in p.files], args)


def signature(conn: apsw.Connection, now: float | None = None) -> str:
    """What the open queue is now, in a few characters: the page's poll answers 'nothing new' (204) while this
    holds, so a page left open costs one indexed read a second and no rendering."""
    at = time.time() if now is None else now
    n, top, total = next(
        iter(
            conn.execute(
                "SELECT count(*), coalesce(max(id), 0), coalesce(sum(id), 0) FROM pending_writes"
                " WHERE status = ? AND expires_at > ?",
                (approvals.OPEN, at),
            )
        )
    )
    return f"{n}-{top}-{total}"


def build(conn: apsw.Connection, *, before_id: int | None = None, limit: int = PAGE, now: float | None = None) -> Queue:
    at = time.time() if now is None else now
    found = approvals.open_newest(conn, limit=limit + 1, before_id=before_id, now=at)
    more = len(found) > limit
    found = found[:limit]
    people = who_asked(conn, sorted({p.session_id for p in found}))
    groups: dict[str, Group] = {}
    for p in found:  # newest first: a group sits where its newest item is
        groups.setdefault(p.session_id, Group(people[p.session_id])).items.append(item(p, people[p.session_id]))
    return Queue(
        list(groups.values()),
        len(found),
        approvals.count_open(conn, now=at),
        found[-1].id if more and found else None,
        signature(conn, at),
        before_id is not None,
    )


def one(conn: apsw.Connection, pending_id: int) -> Item | None:
    """One staged call, whatever its state (its page shows the decision once made)."""
    p = approvals.get(conn, pending_id)
    if p is None:
        return None
    return item(p, who_asked(conn, [p.session_id])[p.session_id])
