"""Hybrid search: BM25 keyword hits fused with embedding similarity by Reciprocal Rank Fusion.

Keywords find exact terms (names, error codes) that embeddings blur; embeddings find notes
that say the same thing in other words. RRF (score = sum of 1 / (60 + rank) over the two
lists) needs no score calibration between BM25 and cosine, and a note found by both rises.
The keyword list is ``kms_search``'s, any-word relaxation included (``server.index.search``):
a question whose words are not all in one note still brings the notes plain search ranks first.

The chunk vectors live in memory (``server.index.vectors.SemanticIndex``: exact up to 20k chunks,
a principal projection with int8 re-ranking past that). The matrix is refreshed from the DB when
``embed_generation`` changed, loading only chunks with ids above the last one seen; the
background embedder refreshes it after each pass so queries rarely pay for that.

When the model is not ready (loading, missing, failed, turned off) or nothing is embedded
yet, ``semantic_search`` returns the keyword hits with ``mode: keyword-only`` and a reason:
never an error; only a session's first call waits (``SemanticService.wait_first_call``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import apsw
import numpy as np

from server.errors import KmsError
from server.index.embed.model import LOADING, Embedder, ModelNotReady
from server.index.embed.pipeline import BackgroundEmbedder
from server.index.properties import passing_ids
from server.index.search import build_match, search
from server.index.vectors import DEPTH, SemanticIndex
from server.vault.scope import Vaults

if TYPE_CHECKING:
    from server.index.properties import Filter

RRF_K = 60
MAX_LIMIT = 50
EXCERPT_CHARS = 320
# A keyword hit that holds only some of the query's words is weaker evidence than one with all of them:
# its RRF share is scaled, so a paraphrase's semantic match is not pushed down by notes sharing "out".
RELAXED_WEIGHT = 0.7
FIRST_CALL_WAIT_S = 3.0  # how long a session's first semantic call waits for a model still loading
_FTS_SYNTAX = re.compile(r'["*:()^]|\b(?:AND|OR|NOT|NEAR)\b')
_CARD = "n.rid, n.id AS noteId, n.title, n.path, v.name AS vault, n.tags, n.updated_at AS updatedAt"


def keyword_hits(
    conn: apsw.Connection,
    query: str,
    limit: int,
    vault_id: Vaults,
    *,
    strict: bool = False,
    where: Sequence[Filter] = (),
) -> tuple[list[dict[str, Any]], bool]:
    """The BM25 list (``server.index.search``) and whether it was relaxed to any-word matching.

    The hybrid search takes it as ``kms_search`` gives it: when few notes hold every word, any
    word (stop words left out, see ``search.STOPWORDS``), so a note plain search ranks 4th is
    not lost below the semantic matches. ``strict`` keeps to notes with every word (benchmarks).
    A query that trips FTS5 syntax (``what's "x``) is retried as plain words instead of refused.
    ``where``: property filters every hit passes (``kms_recall`` leaves session and decision notes out).
    """

    def run(q: str) -> dict[str, Any]:
        if strict:
            q = build_match(q)[0]  # quoted terms (or the query's own syntax): never relaxed
            if not q:
                return {"hits": []}
        return search(conn, q, limit, vault_id, where=where)

    try:
        found = run(query)
    except KmsError as exc:
        if exc.kind != "invalid-input":
            raise
        plain = _FTS_SYNTAX.sub(" ", query)
        if not plain.strip():
            return [], False
        found = run(plain)
    hits = found["hits"]
    if found.get("relaxed"):  # the hits after the first allWords lack some of the words
        for i, hit in enumerate(hits):
            hit["allWords"] = i < found["allWords"]
    return hits, bool(found.get("relaxed"))


def _excerpt(heading: str | None, text: str) -> str:
    text = " ".join(text.split())
    if len(text) > EXCERPT_CHARS:
        cut = text.rfind(" ", 0, EXCERPT_CHARS)
        text = text[: cut if cut > EXCERPT_CHARS // 2 else EXCERPT_CHARS] + "…"
    return f"{heading}: {text}" if heading else text


def _cards(conn: apsw.Connection, rids: list[int]) -> dict[int, dict[str, Any]]:
    if not rids:
        return {}
    marks = ",".join("?" * len(rids))
    cur = conn.execute(
        f"SELECT {_CARD} FROM notes n JOIN vaults v ON v.id = n.vault_id "
        f"WHERE n.rid IN ({marks}) AND n.hidden_at IS NULL",
        rids,
    )
    out = {}
    for row in cur:
        rid, note_id, title, path, vault, tags, updated = row
        out[rid] = {
            "noteId": note_id,
            "title": title,
            "path": path,
            "vault": vault,
            "tags": tags.split() if tags else [],
            "updatedAt": updated,
        }
    return out


def _keyword_only(
    conn: apsw.Connection, query: str, limit: int, vault_id: Vaults, reason: str, where: Sequence[Filter] = ()
) -> dict[str, Any]:
    """The fallback answer: the keyword hits, in the hybrid hit shape, saying why."""
    kw, relaxed = keyword_hits(conn, query, limit, vault_id, where=where)
    hits = [
        {
            "noteId": h["noteId"],
            "title": h["title"],
            "path": h["path"],
            "vault": h["vault"],
            "excerpt": h["excerpt"],
            "heading": None,
            "score": h["score"],
            "matchType": "keyword",
            "similarity": None,
            "tags": h["tags"],
            "updatedAt": h["updatedAt"],
        }
        for h in kw[:limit]
    ]
    return {"query": query, "mode": "keyword-only", "reason": reason, "relaxed": relaxed, "hits": hits}


def semantic_search(
    conn: apsw.Connection,
    index: SemanticIndex,
    query: str,
    limit: int = 10,
    vault_id: Vaults = None,
    *,
    mode: str = "hybrid",
    query_vec: np.ndarray | None = None,
    where: Sequence[Filter] = (),
) -> dict[str, Any]:
    """Hybrid (default) or ``mode="semantic"`` (embeddings only) search; hidden notes never appear.

    ``vault_id`` (a ``VaultScope``) limits every part (keyword and embedding hits) to its vaults.

    Hits: noteId, title, path, vault, excerpt (the best chunk with its heading, or the keyword
    snippet for a keyword-only match), heading, score (RRF), matchType (keyword / semantic /
    both), similarity (cosine of the best chunk, for semantic matches), tags, updatedAt.
    ``query_vec``: the query's embedding when the caller already has it (``recall`` reuses it).
    ``where``: property filters every hit passes, keyword and semantic alike (``recall`` leaves session and
    decision notes out of its other notes).
    """
    if mode not in ("hybrid", "semantic"):
        raise KmsError("invalid-input", f"mode must be hybrid or semantic, not {mode!r}")
    if not query or not query.strip():
        raise KmsError("invalid-input", "the query is empty")
    limit = max(1, min(int(limit), MAX_LIMIT))

    embedder = index.embedder
    if not embedder.ready:
        reason = embedder.reason or f"the embedding model is {embedder.state}"
        return _keyword_only(conn, query, limit, vault_id, reason, where)
    index.refresh(conn)
    if not len(index):
        return _keyword_only(conn, query, limit, vault_id, "no notes are embedded yet (run `kms embed`)", where)

    # The model and the matrix product run in a worker thread while this thread runs the
    # keyword search on its own connection: both release the GIL, so on 2 cores the query
    # costs about max(keyword, embedding) instead of their sum.
    def nearest() -> list[tuple[int, int, float]]:
        vec = query_vec if query_vec is not None else embedder.embed_query(query)
        return index.best_notes(vec, vault_id=vault_id)

    semantic = index.pool().submit(nearest)
    try:
        kw, relaxed = keyword_hits(conn, query, DEPTH, vault_id, where=where) if mode == "hybrid" else ([], False)
    finally:
        failed: str | None = None
        try:
            sem = semantic.result()
        except ModelNotReady as exc:
            sem, failed = [], exc.reason
    if failed is not None:
        return _keyword_only(conn, query, limit, vault_id, failed, where)

    cards = _cards(conn, [rid for rid, _c, _s in sem])
    if where:
        passing = passing_ids(conn, [c["noteId"] for c in cards.values()], where)
        cards = {rid: c for rid, c in cards.items() if c["noteId"] in passing}
    sem = [s for s in sem if s[0] in cards]  # hidden (or just deleted) notes drop out here
    fused: dict[str, dict[str, Any]] = {}
    for rank, hit in enumerate(kw, 1):
        weight = RELAXED_WEIGHT if hit.pop("allWords", True) is False else 1.0
        fused[hit["noteId"]] = {**hit, "score": weight / (RRF_K + rank), "matchType": "keyword"}
    chunk_for: dict[str, int] = {}
    for rank, (rid, chunk_id, sim) in enumerate(sem, 1):
        card = cards[rid]
        entry = fused.get(card["noteId"])
        if entry is None:
            entry = fused[card["noteId"]] = {**card, "score": 0.0, "matchType": "semantic"}
        else:
            entry["matchType"] = "both"
        entry["score"] += 1.0 / (RRF_K + rank)
        entry["similarity"] = round(sim, 4)
        chunk_for[card["noteId"]] = chunk_id
    # Ties (one list's rank r vs the other's rank r) go to notes both lists found.
    order = {"both": 0, "keyword": 1, "semantic": 2}
    ranked = sorted(fused.values(), key=lambda h: (-h["score"], order[h["matchType"]]))[:limit]

    wanted = [chunk_for[h["noteId"]] for h in ranked if h["noteId"] in chunk_for]
    chunks: dict[int, tuple[str | None, str]] = {}
    if wanted:
        marks = ",".join("?" * len(wanted))
        chunks = {
            cid: (heading, text)
            for cid, heading, text in conn.execute(
                f"SELECT id, heading, text FROM chunks WHERE id IN ({marks})", wanted
            )
        }
    hits = []
    for h in ranked:
        cid = chunk_for.get(h["noteId"])
        heading = None
        if cid is not None and cid in chunks:
            heading, text = chunks[cid]
            h["excerpt"] = _excerpt(heading, text) or h.get("excerpt") or h["title"]
        hits.append(
            {
                "noteId": h["noteId"],
                "title": h["title"],
                "path": h["path"],
                "vault": h["vault"],
                "excerpt": h.get("excerpt") or h["title"],
                "heading": heading,
                "score": round(h["score"], 5),
                "matchType": h["matchType"],
                "similarity": h.get("similarity"),
                "tags": h["tags"],
                "updatedAt": h["updatedAt"],
            }
        )
    return {"query": query, "mode": mode, "hits": hits, **({"relaxed": True} if relaxed else {})}


class SemanticService:
    """What a long-running process (the MCP server) holds for semantic search.

    ``start()`` returns at once: the model loads in a background thread, and a background
    embedder (its own DB connection) embeds pending notes once the model is ready, then
    whenever ``notify_changed()`` is called (after a write tool or a watcher reindex) or every
    ``interval`` seconds. Until the model is ready, ``search`` answers keyword-only.
    """

    def __init__(
        self,
        db_path: str | Path,
        *,
        model_dir: str | Path | None = None,
        enabled: bool = True,
        background_embedding: bool = True,
        interval: float = 30.0,
        threads: int | None = None,
        download: bool = False,
        first_call_wait_s: float = FIRST_CALL_WAIT_S,
    ) -> None:

        self.embedder = Embedder(model_dir, threads=threads, enabled=enabled, download=download)
        self.index = SemanticIndex(self.embedder)
        self.background = (
            BackgroundEmbedder(db_path, self.embedder, interval=interval, after_pass=self.index.refresh)
            if background_embedding and enabled
            else None
        )
        self._started = False
        self._first_call_wait_s = first_call_wait_s

    def start(self) -> None:
        if self._started:
            return
        self._started = True
        self.embedder.start()
        if self.background is not None:
            self.background.start()

    def wait_first_call(self) -> None:
        """The session's first semantic call waits (bounded) for a model that is loading: an agent's
        opening question, asked while the server starts, then gets meaning, not keywords only."""
        wait, self._first_call_wait_s = self._first_call_wait_s, 0.0
        if wait > 0 and self.embedder.state == LOADING:
            self.embedder.wait(wait)

    def search(
        self, conn: apsw.Connection, query: str, limit: int = 10, vault_id: Vaults = None, *, mode: str = "hybrid"
    ) -> dict[str, Any]:
        self.wait_first_call()
        return semantic_search(conn, self.index, query, limit, vault_id, mode=mode)

    def notify_changed(self) -> None:
        """Notes changed: embed them soon (no-op without a background embedder)."""
        if self.background is not None:
            self.background.wake()

    def status(self) -> dict[str, Any]:
        out = self.embedder.status()
        out["indexedChunks"] = len(self.index)
        if self.background is not None and self.background.last_report is not None:
            out["pendingNotes"] = self.background.last_report.pending
        if self.background is not None and self.background.last_error:
            out["embedError"] = self.background.last_error
        return out

    def close(self, settle_s: float = 20.0) -> bool:
        """Stop the background work; returns whether the process may exit normally. A model still
        loading, or still embedding, is waited for (bounded): onnxruntime aborts the process (SIGABRT)
        when the interpreter finalises under a session being built or run."""
        stopped = True
        if self.background is not None and self._started:
            stopped = self.background.stop()  # (False: a model run outlived the wait; the process must not finalise)
        self.index.close()
        if self._started and self.embedder.state == LOADING:
            self.embedder.wait(settle_s)
        return stopped and self.embedder.state != LOADING
