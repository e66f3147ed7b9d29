"""Recall: a context bundle about a topic within a token budget (``kms_recall``).

An agent otherwise chains search, read and backlinks and reads whole notes to find the paragraph
that matters. Here the hybrid hits (``semantic_search``; keyword-only while the model is not ready)
give their best-matching sections, not whole notes, and the notes they link to or are linked from
join them. Each item is one (note, section), says why it is included and how to read on
(``readMore``: the ``kms_read`` arguments). Items are ranked, deduplicated and packed greedily:
the sum of their ``tokenEstimate`` never exceeds the budget, and a section too long for what is
left is cut at a word and marked ``truncated``.

What past sessions decided comes first (``server.index.recall_memory``): the decisions about the topic (kind
``decision``, with their session, date and project), then the other notes as above, then the session notes
that touched the topic (kind ``session``: one that decided something on it is there through its decisions;
ranked above the notes, a trivial session note pushed the real note on the topic down); ``kind`` keeps one of
the three. Unless one is asked for, decisions take at most half the budget, and session and decision notes
are not among the other notes.

A ``tokenEstimate`` is the notes' rule (4 bytes a token) taken on the item's whole JSON, rounded
up, so the bundle's bytes on the wire stay under 4 x the budget plus a small envelope.
"""

from __future__ import annotations

import json
import re
from typing import Any

import apsw

from server.index import note_data, recall_memory
from server.index.properties import Filter
from server.index.recall_memory import MemoryNote, decision_lines, is_decisions, section_sims
from server.index.search import STOPWORDS
from server.store.db import rows
from server.vault.scope import Vaults, VaultScope

DEFAULT_BUDGET = 4_000
MAX_BUDGET = 20_000
MIN_BUDGET = 200
MIN_CUT_TOKENS = 60  # below this, a cut section says too little to be worth its place
NEIGHBOURS = 10  # linked notes considered (the best-connected ones)
SECTIONS_PER_NOTE = 3  # a match's best section plus up to two more that also match
NEIGHBOUR_CHARS = 600  # a linked note shows its summary or its best section, this long at most
MAX_DECISIONS = 8  # decisions recalled (MAX_ONE_KIND when only decisions or only sessions are asked for)
MAX_SESSIONS = 4  # session notes recalled
MAX_ONE_KIND = 20
MEMORY_SHARE = 0.5  # of the budget, at most, for decisions and session notes before the other notes
KINDS = ("decision", "session", "note")
_WORD = re.compile(r"\w+")


def item_tokens(item: dict[str, Any]) -> int:
    """The item's size in estimated tokens: its compact JSON bytes / 4, rounded up, as sent: its note text
    fenced (``note_data.mark``)."""
    sent = note_data.mark(item)
    return -(-len(json.dumps(sent, ensure_ascii=False, separators=(",", ":")).encode()) // 4)


def topic_terms(topic: str) -> set[str]:
    """The words that say what the topic is about (stop words out, unless that leaves none)."""
    words = {w for w in _WORD.findall(topic.lower()) if len(w) > 1}
    return (words - STOPWORDS) or words


def _cut(text: str, max_chars: int) -> str:
    """``text`` cut at a word boundary to at most ``max_chars`` characters (ellipsis included)."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return ""
    cut = text.rfind(" ", 0, max_chars - 1)
    return text[: cut if cut > max_chars // 2 else max_chars - 1].rstrip() + "…"


class _Note:
    """One candidate note: its card, its sections and how well each matches the topic."""

    def __init__(
        self, row: dict[str, Any], terms: re.Pattern[str] | None, n_terms: int, sims: dict[str | None, float]
    ) -> None:
        # deferred: the chunker loads numpy: only when recall has a model
        from server.index.embed.chunker import sections

        self.rid, self.id, self.title, self.path, self.vault = (
            row["rid"],
            row["id"],
            row["title"],
            row["path"],
            row["vault"],
        )
        self.summary = row["summary_text"] if row["summary_state"] != "none" and row["summary_text"] else None
        self.sections = sections(row["body"], row["title"]) or [(None, row["title"])]
        self.relevance = []
        for heading, text in self.sections:
            found = set(terms.findall(f"{heading or ''} {text}".lower())) if terms is not None else set()
            self.relevance.append(sims.get(heading, 0.0) + 0.5 * (len(found) / n_terms if n_terms else 0.0))

    def ranked_sections(self) -> list[int]:
        """Section indexes, best match first (the note's order breaks ties)."""
        return sorted(range(len(self.sections)), key=lambda i: (-self.relevance[i], i))

    def item(self, idx: int, kind: str, why: str, score: float, max_chars: int) -> dict[str, Any]:
        heading, text = self.sections[idx]
        if kind == "linked" and self.summary and self.relevance[idx] <= 0:
            heading, text = None, self.summary
        shown = _cut(text, max_chars)
        last = heading.rsplit(" > ", 1)[-1] if heading else None
        return {
            "noteId": self.id,
            "title": self.title,
            "path": self.path,
            "vault": self.vault,
            "heading": heading,
            "kind": kind,
            "why": why,
            "text": shown,
            "truncated": shown != text,
            "score": round(score, 4),
            "readMore": {"noteId": self.id, "section": last},
        }

    def memory_item(
        self, idx: int, kind: str, why: str, score: float, max_chars: int, m: MemoryNote, text: str | None = None
    ) -> dict[str, Any]:
        """A decision (``text``: one decision of the section) or a session note's section, saying whose
        session it was, when, and for which project."""
        item = self.item(idx, "match", why, score, max_chars)
        if text is not None:
            shown = _cut(text, max_chars)
            item["text"], item["truncated"] = shown, shown != text
        item["kind"] = kind
        item.update(session=m.session, date=m.date, project=m.project, thisProject=m.this_project)
        return item


def _load(conn: apsw.Connection, rids: list[int], vault_id: Vaults) -> dict[int, dict[str, Any]]:
    """Visible, in-scope notes by rid (a hidden note or another vault's never gets this far)."""
    if not rids:
        return {}
    scope, params = VaultScope.of(vault_id).sql()
    found = rows(
        conn,
        f"""SELECT n.rid, n.id, n.title, n.path, v.name AS vault, n.body, n.summary_state,
                                  n.summary_text
                           FROM notes n JOIN vaults v ON v.id = n.vault_id
                           WHERE n.rid IN ({",".join("?" * len(rids))}) AND n.hidden_at IS NULL {scope}""",
        (*rids, *params),
    )
    return {r["rid"]: r for r in found}


def _edges(conn: apsw.Connection, rids: list[int]) -> list[tuple[int, int]]:
    """(source, target) of every resolved link from or to these notes, self-links left out."""
    marks = ",".join("?" * len(rids))
    return [
        (s, d)
        for s, d in conn.execute(
            f"""SELECT src_rid, dst_rid FROM links WHERE src_rid IN ({marks}) AND dst_rid IS NOT NULL
            UNION SELECT src_rid, dst_rid FROM links WHERE dst_rid IN ({marks})""",
            (*rids, *rids),
        )
        if s != d
    ]


def _names(titles: list[str]) -> str:
    shown = ", ".join(f"[[{t}]]" for t in titles[:2])
    return shown + (f" and {len(titles) - 2} more" if len(titles) > 2 else "")


def _vector(conn: apsw.Connection, topic: str, index: Any) -> Any:
    """The topic's embedding, or None (no model here, not ready, nothing embedded yet)."""
    if index is None or not index.embedder.ready:
        return None
    index.refresh(conn)
    if not len(index):
        return None
    # deferred: the model module loads numpy: only when there is an index to ask
    from server.index.embed.model import ModelNotReady

    try:
        return index.embedder.embed_query(topic)
    except ModelNotReady:
        return None


def _no_model(index: Any) -> str:
    """Why the search is keyword-only (the reasons ``semantic_search`` gives)."""
    if index is None:
        return "semantic search is not available here"
    embedder = index.embedder
    if not embedder.ready:
        return str(embedder.reason or f"the embedding model is {embedder.state}")
    return "no notes are embedded yet (run `kms embed`)"


def _hits(
    conn: apsw.Connection, topic: str, limit: int, vault_id: Vaults, index: Any, vec: Any, others: bool
) -> tuple[list[dict[str, Any]], Any, dict[str, Any]]:
    """The hybrid hits, the topic's vector (None without a ready model) and the search's mode/reason.
    ``others``: only notes that are neither session nor decision notes."""
    # deferred: semantic search loads numpy: only when recall runs
    from server.index.semantic import keyword_hits, semantic_search

    where = (Filter("type", "in", recall_memory.MEMORY_TYPES, negated=True),) if others else ()
    if index is None:
        hits, relaxed = keyword_hits(conn, topic, limit, vault_id, where=where)
        return hits, None, {"mode": "keyword-only", "reason": _no_model(None)}
    found = semantic_search(conn, index, topic, limit, vault_id, query_vec=vec, where=where)
    info = {"mode": found["mode"], **({"reason": found["reason"]} if found.get("reason") else {})}
    return found["hits"], (vec if found["mode"] == "hybrid" else None), info


def recall(
    conn: apsw.Connection,
    topic: str,
    budget: int = DEFAULT_BUDGET,
    vault_id: Vaults = None,
    index: Any = None,
    *,
    kind: str | None = None,
    project: str | None = None,
) -> dict[str, Any]:
    """The bundle for ``topic``: ``items`` (decisions, the other notes, then the session notes that touched
    it; each group best first), ``usedTokens`` <= ``budget``, ``omitted`` (items that did not fit), and the
    search's ``mode`` (``hybrid``, or ``keyword-only`` with a ``reason``). ``index``: the process's
    ``SemanticIndex`` (None: keywords only). ``kind``: only ``decision``, ``session`` or ``note`` items;
    ``project``: the session's (its decisions and sessions rank first)."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}")
    budget = max(MIN_BUDGET, min(int(budget), MAX_BUDGET))
    limit = min(20, max(8, budget // 500))
    vec = _vector(conn, topic, index)
    terms = topic_terms(topic)
    # one scan per section for the topic's words (building a word set of every section costs far more)
    pattern = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(terms))) + r")\b") if terms else None
    scoped = recall_memory.in_scope(conn, vault_id)
    memory: list[dict[str, Any]] = []
    if kind != "note":
        found, msims = recall_memory.find(conn, topic, scoped, vault_id, project=project, index=index, vec=vec)
        memory = _memory_items(conn, found, msims, vault_id, pattern, len(terms), kind, (index, vec))
    if kind in ("decision", "session"):
        info = {"mode": "hybrid"} if vec is not None else {"mode": "keyword-only", "reason": _no_model(index)}
        return {"topic": topic, **info, **_pack(memory, budget, ordered=True), "budgetTokens": budget}
    # the other notes: session and decision notes have their place above
    hits, vec, info = _hits(conn, topic, limit, vault_id, index, vec, bool(scoped))
    by_id = {h["noteId"]: h for h in hits}
    id_rows = (
        rows(conn, f"SELECT rid, id FROM notes WHERE id IN ({','.join('?' * len(by_id))})", tuple(by_id))
        if by_id
        else []
    )
    rid_of = {r["id"]: r["rid"] for r in id_rows}
    hit_rids = [rid_of[h["noteId"]] for h in hits if h["noteId"] in rid_of]
    edges = {(s, d) for s, d in _edges(conn, hit_rids) if s not in scoped and d not in scoped} if hit_rids else set()
    hit_set = set(hit_rids)
    # a hit's weight: its score relative to the first hit's
    top = hits[0]["score"] if hits and hits[0]["score"] else 1.0
    base = {rid_of[h["noteId"]]: h["score"] / top for h in hits if h["noteId"] in rid_of}
    # neighbours: linked to or from a hit, ranked by how strongly the hits they touch matched
    touch: dict[int, dict[int, str]] = {}  # neighbour -> {hit: "to" | "from"}
    for src, dst in edges:
        if src in hit_set and dst not in hit_set:
            touch.setdefault(dst, {})[src] = "from"  # the neighbour is linked from the hit
        elif dst in hit_set and src not in hit_set:
            touch.setdefault(src, {})[dst] = "to"  # the neighbour links to the hit
    strength = {n: max(base[h] for h in hs) + 0.05 * (len(hs) - 1) for n, hs in touch.items()}
    top_neighbours = sorted(strength, key=lambda n: (-strength[n], n))[: NEIGHBOURS * 2]
    loaded = _load(conn, hit_rids + top_neighbours, vault_id)
    neighbours = [n for n in top_neighbours if n in loaded][:NEIGHBOURS]
    wanted = [r for r in hit_rids + neighbours if r in loaded]
    sims = section_sims(conn, index, vec, wanted)
    notes = {rid: _Note(loaded[rid], pattern, len(terms), sims.get(rid, {})) for rid in wanted}

    max_chars = max(1_200, budget)  # one section never takes more than about a quarter of the budget
    candidates: list[dict[str, Any]] = []
    for rank, hit in enumerate(hits, 1):
        rid = rid_of.get(hit["noteId"])
        if rid not in notes:
            continue
        note = notes[rid]
        order = note.ranked_sections()
        best = note.relevance[order[0]] or 1.0
        related = [
            notes[o].title for o in hit_set if o in notes and o != rid and ((rid, o) in edges or (o, rid) in edges)
        ]
        why = f"search hit {rank} ({hit.get('matchType', 'keyword')} match); its best-matching section"
        if related:
            why += f"; connected to {_names(sorted(related))}"
        candidates.append(note.item(order[0], "match", why, base[rid], max_chars))
        for idx in order[1:SECTIONS_PER_NOTE]:
            rel = note.relevance[idx]
            if rel <= 0 or rel < 0.5 * best:
                break
            candidates.append(
                note.item(
                    idx,
                    "section",
                    f"another section of search hit {rank} that matches",
                    base[rid] * 0.6 * rel / best,
                    max_chars,
                )
            )
    for n in neighbours:
        note = notes[n]
        linked_from = sorted(notes[h].title for h, how in touch[n].items() if how == "from" and h in notes)
        links_to = sorted(notes[h].title for h, how in touch[n].items() if how == "to" and h in notes)
        parts = ([f"linked from {_names(linked_from)}"] if linked_from else []) + (
            [f"links to {_names(links_to)}"] if links_to else []
        )
        idx = note.ranked_sections()[0]
        score = 0.45 * strength[n] + 0.1 * min(1.0, note.relevance[idx])
        candidates.append(
            note.item(idx, "linked", "; ".join(parts) or "linked with a search hit", score, NEIGHBOUR_CHARS)
        )
    if not memory:
        return {"topic": topic, **info, **_pack(candidates, budget), "budgetTokens": budget}
    # decisions on the topic first; then the notes on it; then the sessions that only touched it (a session
    # note that decided something is there through its decisions): trivial session notes ranked above the
    # real note on the topic
    decided = _pack([i for i in memory if i["kind"] == "decision"], int(budget * MEMORY_SHARE), ordered=True)
    notes_on_it = _pack(candidates, budget - decided["usedTokens"])
    touched = _pack(
        [i for i in memory if i["kind"] == "session"],
        budget - decided["usedTokens"] - notes_on_it["usedTokens"],
        ordered=True,
    )
    groups = (decided, notes_on_it, touched)
    return {
        "topic": topic,
        **info,
        "usedTokens": sum(g["usedTokens"] for g in groups),
        "items": [item for g in groups for item in g["items"]],
        "omitted": sum(g["omitted"] for g in groups),
        "budgetTokens": budget,
    }


def _memory_items(
    conn: apsw.Connection,
    found: list[MemoryNote],
    sims: dict[int, dict[str | None, float]],
    vault_id: Vaults,
    pattern: re.Pattern[str] | None,
    n_terms: int,
    kind: str | None,
    meaning: tuple[Any, Any] = (None, None),
) -> list[dict[str, Any]]:
    """The decisions about the topic (this project's first), then the session notes that touched it.
    ``meaning``: the process's index and the topic's vector, when there are both."""
    if not found:
        return []
    loaded = _load(conn, [m.rid for m in found], vault_id)
    decisions: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    sessions: list[dict[str, Any]] = []
    unsure: list[tuple[tuple[Any, ...], dict[str, Any], float]] = []  # no word of the topic: meaning decides
    for m in found:
        if m.rid not in loaded:
            continue
        note = _Note(loaded[m.rid], pattern, n_terms, sims.get(m.rid, {}))
        whose = "this project" if m.this_project else "another project" if m.project else "no project recorded"
        rank = (not m.this_project, -(m.started or 0.0))
        if m.type == recall_memory.DECISION_TYPE:
            idx = note.ranked_sections()[0]
            score = 0.5 * m.weight + note.relevance[idx]
            why = f"a decision note (type: decision; {whose}); its best-matching section"
            decisions.append(((rank[0], -score, rank[1]), note.memory_item(idx, "decision", why, score, 1_200, m)))
            continue
        for idx, (heading, text) in enumerate(note.sections):
            if not is_decisions(heading):
                continue
            sim = max(sims.get(m.rid, {}).get(heading, 0.0), 0.0)
            for n, line in enumerate(decision_lines(text)):
                frac = len(set(pattern.findall(line.lower()))) / n_terms if pattern is not None and n_terms else 0.0
                if frac <= 0 and sim < recall_memory.DECISIONS_FLOOR:
                    continue
                score = 0.5 * m.weight + frac + sim
                why = f"a decision recorded with kms_capture in a session of {whose}"
                item = note.memory_item(idx, "decision", why, score, 1_200, m, text=line)
                key = (rank[0], -score, rank[1], n)
                if frac > 0:
                    decisions.append((key, item))
                else:
                    unsure.append((key, item, score))
        other = [i for i in note.ranked_sections() if not is_decisions(note.sections[i][0])]
        if other and (kind == "session" or _touches(note, other[0], pattern, sims.get(m.rid, {}))):
            why = f"a session note of {whose} that touched the topic; its best-matching section"
            sessions.append(note.memory_item(other[0], "session", why, m.weight, NEIGHBOUR_CHARS, m))
    if unsure and len(decisions) < (MAX_ONE_KIND if kind else MAX_DECISIONS):  # enough share the topic's words
        near = recall_memory.line_similarities(*meaning, [item["text"] for _k, item, _s in unsure])
        for (key, item, score), sim in zip(unsure, near, strict=True):
            if sim >= recall_memory.LINE_FLOOR:
                item["score"] = round(score + sim, 4)
                decisions.append(((key[0], -(score + sim), *key[2:]), item))
    cap = MAX_ONE_KIND if kind else None
    decided = [item for _key, item in sorted(decisions, key=lambda d: d[0])][: cap or MAX_DECISIONS]
    kept = sessions[: cap or MAX_SESSIONS]
    return (decided if kind != "session" else []) + (kept if kind != "decision" else [])


def _touches(note: _Note, idx: int, pattern: re.Pattern[str] | None, sims: dict[str | None, float]) -> bool:
    """Whether a section holds one of the topic's words or is close to it in meaning (a session note whose
    only match is its Decisions section is there through its decisions)."""
    heading, text = note.sections[idx]
    near = sims.get(heading, 0.0) >= recall_memory.SEMANTIC_FLOOR
    return near or (pattern is not None and pattern.search(f"{heading or ''} {text}".lower()) is not None)


def _pack(candidates: list[dict[str, Any]], budget: int, *, ordered: bool = False) -> dict[str, Any]:
    """Best first (``ordered``: in the order given), each (note, section) once, a decision once per text; what
    does not fit is cut to fit, or left out and counted."""
    items: list[dict[str, Any]] = []
    seen: set[tuple[str, str | None, str]] = set()
    used = omitted = 0
    for item in candidates if ordered else sorted(candidates, key=lambda c: -c["score"]):
        key = (item["noteId"], item["heading"], item["text"] if item["kind"] == "decision" else "")
        if key in seen:
            continue
        seen.add(key)
        item["tokenEstimate"] = 0
        cost = _estimate(item)
        left = budget - used
        if cost > left:
            if left < MIN_CUT_TOKENS or not _fit(item, left):
                omitted += 1
                continue
            cost = item["tokenEstimate"]
        items.append(item)
        used += cost
    return {"usedTokens": used, "items": items, "omitted": omitted}


def _estimate(item: dict[str, Any]) -> int:
    """Set ``tokenEstimate`` to the estimate of the item with that number in it (it is part of the JSON);
    it only grows until it covers itself, so it is never below the item's real size."""
    item["tokenEstimate"] = 0
    cost = item_tokens(item)
    while True:
        item["tokenEstimate"] = cost
        again = item_tokens(item)
        if again <= cost:
            return cost
        cost = again


def _fit(item: dict[str, Any], left: int) -> bool:
    """Cut the item's text so the whole item fits ``left`` tokens; False if only a stub would."""
    text = item["text"]
    item["text"] = ""
    room = (left - _estimate(item)) * 4  # bytes the text may take (a character is at least one)
    chars = min(len(text), room)
    item["truncated"] = True
    while chars >= MIN_CUT_TOKENS:
        item["text"] = _cut(text, chars)
        if _estimate(item) <= left:
            return True
        chars = int(chars * 0.9)
    item["text"] = text
    return False
