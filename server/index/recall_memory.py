"""What past sessions left about a topic, for ``kms_recall``: the decisions first, then the session notes that
touched it, before the other notes (``server.index.recall``).

The notes are the ``type: session`` notes kms writes (``server.activity.session_note``) and any note a person
gives ``type: decision`` (an ADR, a decision log). Decisions are not notes of their own: ``kms_capture`` puts
them in the session note's Decisions section (docs/hooks.md says why). They are read from the note's text as
indexed now, so a decision the person edited or deleted in the note is recalled as it stands, and a note hidden
from agents (a private folder, a privacy rule) never surfaces. A ``type: decision`` note is one decision: its
best-matching section.

A session note is found by the topic's words (the keyword search ``kms_search`` makes, any-word relaxation
included) and, with the topic's vector, by its sections' meaning. Its session, start and project come from
kms's own records of the session when kms wrote the note, else from its frontmatter. The session's project
(``kms_start``'s identity) ranks first: this project's decisions, then the others'.
"""

from __future__ import annotations

import json
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import apsw

from server.humanize import utc_iso
from server.index.search import RELAX_BELOW, build_match
from server.store.db import rows
from server.vault.markdown import atx_heading
from server.vault.scope import Vaults, VaultScope

SESSION_TYPE = "session"
DECISION_TYPE = "decision"
MEMORY_TYPES = (SESSION_TYPE, DECISION_TYPE)
DECISIONS_HEADING = "Decisions"  # the session note's section kms_capture fills with decisions
NEXT_STEPS_HEADING = "Next steps"  # its open next steps ("- [ ] ..."), which kms_start lists
MEMORY_HITS = 8  # session and decision notes considered per recall
SEMANTIC_FLOOR = 0.45  # a section this close in meaning touches the topic without sharing its words
DECISIONS_FLOOR = 0.25  # a Decisions section this close may hold a decision about the topic in other words:
LINE_FLOOR = 0.35  # its decisions are embedded, and one this close to the topic is about it
MAX_LINES = 8  # decisions embedded per recall (one batch)
LINE_CACHE = 4_096  # decisions' vectors kept in a process
_BULLET = re.compile(r"^\s*[-*+]\s+(?:\[(?P<box>[ xX])\]\s+)?(?P<text>\S.*)$")


@dataclass
class MemoryNote:
    """One session or decision note that matches the topic, with what kms knows of its session."""

    rid: int
    type: str
    weight: float  # how well the note matched (0..2: keyword share plus meaning)
    session: str | None
    started: float | None
    date: str | None
    project: str | None
    this_project: bool


def in_scope(conn: apsw.Connection, vault_id: Vaults) -> set[int]:
    """The visible, in-scope notes of type session or decision (left out of recall's other notes)."""
    scope, args = VaultScope.of(vault_id).sql()
    return {
        r[0]
        for r in conn.execute(
            f"""SELECT p.rid FROM note_props p JOIN notes n ON n.rid = p.rid
                WHERE p.key = 'type' AND p.value IN (?, ?) AND n.hidden_at IS NULL {scope}""",
            (*MEMORY_TYPES, *args),
        )
    }


# the words of the topic and, in the same FTS5 query, a property value saying session or decision: the index
# intersects the two lists (filtering every note that holds the topic's words costs several times more)
_SQL = """SELECT n.rid, -f.rank FROM notes_fts f JOIN notes n ON n.rid = f.rowid
WHERE notes_fts MATCH ? AND n.hidden_at IS NULL {scope}
  AND EXISTS (SELECT 1 FROM note_props p WHERE p.rid = n.rid AND p.key = 'type' AND p.value IN (?, ?))
ORDER BY f.rank LIMIT ?"""
_FTS_SYNTAX = re.compile(r'["*:()^]|\b(?:AND|OR|NOT|NEAR)\b')
RELAXED_WEIGHT = 0.7  # a note holding only some of the topic's words (as in the hybrid search)


def _keyword(conn: apsw.Connection, topic: str, vault_id: Vaults) -> dict[int, float]:
    """rid -> the keyword score relative to the first hit's, among session and decision notes (the topic's
    words as ``kms_search`` takes them; any word when fewer than ``RELAX_BELOW`` notes hold them all)."""

    def run(match: str) -> list[tuple[int, float]]:
        where = f"({match}) AND props : ({' OR '.join(MEMORY_TYPES)})"
        scope, args = VaultScope.of(vault_id).sql()
        return list(conn.execute(_SQL.format(scope=scope), (where, *args, *MEMORY_TYPES, MEMORY_HITS)))

    strict, relaxed = build_match(topic)
    try:
        found = run(strict) if strict else []
    except apsw.SQLError:  # the topic's own FTS5 syntax is broken: its plain words
        strict, relaxed = build_match(_FTS_SYNTAX.sub(" ", topic))
        found = run(strict) if strict else []
    out = {rid: score for rid, score in found}
    if relaxed and len(found) < RELAX_BELOW:
        for rid, score in run(relaxed):
            out.setdefault(rid, RELAXED_WEIGHT * score)
    top = max(out.values(), default=1.0) or 1.0
    return {rid: score / top for rid, score in out.items()}


def section_sims(conn: apsw.Connection, index: Any, vec: Any, rids: list[int]) -> dict[int, dict[str | None, float]]:
    """Per note, the best cosine of the topic with the chunks of each section heading."""
    if vec is None or not rids:
        return {}
    chunks = list(conn.execute(f"SELECT id, rid, heading FROM chunks WHERE rid IN ({','.join('?' * len(rids))})", rids))
    sims = index.similarities(vec, [c[0] for c in chunks])
    out: dict[int, dict[str | None, float]] = {}
    for cid, rid, heading in chunks:
        if cid in sims:
            per = out.setdefault(rid, {})
            per[heading] = max(per.get(heading, -1.0), sims[cid])
    return out


def _text(value: Any) -> str | None:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else None


def find(
    conn: apsw.Connection,
    topic: str,
    scoped: set[int],
    vault_id: Vaults,
    *,
    project: str | None,
    index: Any = None,
    vec: Any = None,
) -> tuple[list[MemoryNote], dict[int, dict[str | None, float]]]:
    """The session and decision notes (of ``scoped``) that touch ``topic``, best first, and their sections'
    similarity to the topic (empty without ``vec``)."""
    if not scoped:
        return [], {}
    weight = _keyword(conn, topic, vault_id)
    sims = section_sims(conn, index, vec, sorted(scoped)) if vec is not None else {}
    for rid, per in sims.items():
        best = max(per.values(), default=0.0)
        if best < DECISIONS_FLOOR:  # the Decisions section is no nearer than the best one
            continue
        decided = max((v for h, v in per.items() if is_decisions(h)), default=0.0)
        if best >= SEMANTIC_FLOOR or decided >= DECISIONS_FLOOR:
            weight[rid] = weight.get(rid, 0.0) + best
    found = sorted((r for r in weight if r in scoped), key=lambda r: (-weight[r], r))[:MEMORY_HITS]
    if not found:
        return [], {}
    sims = {r: sims[r] for r in found if r in sims}
    marks = ",".join("?" * len(found))
    meta = rows(
        conn,
        f"""SELECT n.rid, n.frontmatter, s.id AS sid, s.started_at, s.project,
                   (SELECT p.value FROM note_props p WHERE p.rid = n.rid AND p.key = 'type'
                    AND p.value IN (?, ?) ORDER BY p.ord LIMIT 1) AS type
            FROM notes n LEFT JOIN session_records r ON r.note_id = n.id LEFT JOIN sessions s ON s.id = r.session_id
            WHERE n.rid IN ({marks})""",
        (*MEMORY_TYPES, *found),
    )
    out = []
    for m in meta:
        front = json.loads(m["frontmatter"]) if m["frontmatter"] else {}
        front = front if isinstance(front, dict) else {}
        if m["sid"] is not None:  # kms wrote it: its own records say whose session it is
            session, started, proj = m["sid"], m["started_at"], m["project"]
            date = utc_iso(started) if started is not None else None
        else:
            session, started, proj = _text(front.get("session")), None, _text(front.get("project"))
            date = _text(front.get("started") or front.get("date"))
            date = date[:-6] + "Z" if date and date.endswith("+00:00") else date  # as kms writes UTC times
        out.append(
            MemoryNote(
                m["rid"],
                m["type"] or SESSION_TYPE,
                weight[m["rid"]],
                session,
                started,
                date,
                proj,
                bool(project) and proj == project,
            )
        )
    out.sort(key=lambda n: (not n.this_project, -n.weight, -(n.started or 0.0), n.rid))
    return out, sims


def decision_lines(text: str) -> list[str]:
    """The decisions of a Decisions section: one per list item (a line that continues an item joins it)."""
    items: list[str] = []
    for line in text.splitlines():
        m = _BULLET.match(line)
        if m:
            items.append(m["text"].strip())
        elif line.strip() and items:
            items[-1] += " " + line.strip()
    return items


def open_steps(body: str) -> list[str]:
    """The unchecked items (``- [ ] ...``) of a session note's Next steps section, as the note says them now
    (a step the person ticked or deleted is no longer open); without fenced code or another parser, so
    ``kms_start`` (the start brief's hook) stays light."""

    steps: list[str] = []
    level = 0  # inside the section: its heading's level
    for line in body.splitlines():
        heading = atx_heading(line)
        if heading is not None:
            inside = heading[1].casefold() == NEXT_STEPS_HEADING.casefold()
            level = heading[0] if inside else (0 if heading[0] <= level else level)
            continue
        m = _BULLET.match(line) if level else None
        if m is not None and m["box"] == " ":
            steps.append(m["text"].strip())
    return steps


def is_decisions(heading: str | None) -> bool:
    """Whether a section (by its heading trail) is a session note's Decisions section."""
    return heading is not None and heading.rsplit(" > ", 1)[-1].strip().casefold() == DECISIONS_HEADING.casefold()


class _LineVectors:
    """Decisions' vectors by (model, text), the most recent ``LINE_CACHE`` kept: a server recalls the same
    session notes again and again, and embedding is the dearest step of a recall (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._vectors: OrderedDict[tuple[int, str], Any] = OrderedDict()

    def get(self, embedder: Any, lines: list[str]) -> list[Any]:
        keys = [(id(embedder), line) for line in lines]
        with self._lock:
            known = {k: self._vectors[k] for k in keys if k in self._vectors}
            for k in known:
                self._vectors.move_to_end(k)
        missing = list(dict.fromkeys(k for k in keys if k not in known))
        if missing:
            for k, v in zip(missing, embedder.embed([line for _e, line in missing]), strict=True):
                known[k] = v
            with self._lock:
                self._vectors.update((k, known[k]) for k in missing)
                while len(self._vectors) > LINE_CACHE:
                    self._vectors.popitem(last=False)
        return [known[k] for k in keys]


_LINES = _LineVectors()


def line_similarities(index: Any, vec: Any, lines: list[str]) -> list[float]:
    """The cosine of the topic with each decision (the first ``MAX_LINES``; the rest and every line without a
    ready model: 0). A Decisions section is one chunk: its meaning does not tell which of its decisions is about
    the topic."""
    out = [0.0] * len(lines)
    if index is None or vec is None or not lines:
        return out
    # deferred: the model module loads numpy: only when there are vectors to compare
    from server.index.embed.model import ModelNotReady

    try:
        vectors = _LINES.get(index.embedder, lines[:MAX_LINES])
    except ModelNotReady:
        return out
    out[: len(vectors)] = [float(v @ vec) for v in vectors]
    return out
