"""Hybrid search: BM25 keyword hits fused with embedding similarity by Reciprocal Rank Fusion.

Keywords find exact terms (names, error codes) that embeddings blur; embeddings find notes
that say the same thing in other words. RRF (score = sum of 1 / (60 + rank) over the two
lists) needs no score calibration between BM25 and cosine, and a note found by both rises.
The keyword list is ``kms_search``'s, any-word relaxation included (``server.index.search``):
a question whose words are not all in one note still brings the notes plain search ranks first.

The chunk vectors live in one in-memory float32 matrix (``SemanticIndex``): a query is one
matrix-vector product (~10 ms for the 80k chunks of 10k long notes on 2 cores, exact, no
approximate index to tune or rebuild). The matrix is refreshed from the DB when
``embed_generation`` changed, loading only chunks with ids above the last one seen; the
background embedder refreshes it after each pass so queries rarely pay for that.

When the model is not ready (loading, missing, failed, turned off) or nothing is embedded
yet, ``semantic_search`` returns the keyword hits with ``mode: keyword-only`` and a reason:
never an error and never a wait for the model.
"""

from __future__ import annotations

import ctypes
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import apsw
import numpy as np

from server.errors import KmsError
from server.index.embed.model import DIM, LOADING, Embedder, ModelNotReady

RRF_K = 60
MAX_LIMIT = 50
DEPTH = 50  # how many notes each list contributes to the fusion
MIN_SIMILARITY = 0.2  # below this a "semantic match" is noise (MiniLM puts unrelated text at ~0-0.15)
EXCERPT_CHARS = 320
# A keyword hit that holds only some of the query's words is weaker evidence than one with all of them:
# its RRF share is scaled, so a paraphrase's semantic match is not pushed down by notes sharing "out".
RELAXED_WEIGHT = 0.7
SHRINK_AFTER = 2_000  # chunks loaded by one refresh past which its connection's page cache is released
FIRST_CALL_WAIT_S = 3.0  # how long a session's first semantic call waits for a model still loading
# Past this many chunks the matrix is held projected on its PROJECTED_DIM principal directions (a third
# of the memory: 46 MB instead of 139 at 90k chunks) to pick candidates; the RERANK best are ranked by
# their exact cosine, read from the database. Smaller indexes keep every vector (exact, and small).
PROJECT_ABOVE = 20_000
PROJECTED_DIM = 128
RERANK = 512
BASIS_SAMPLE = 16_384  # rows the principal directions are computed from
APPROX_SLACK = 0.1  # a candidate's projected cosine is within this of its exact one, in practice
_FTS_SYNTAX = re.compile(r'["*:()^]|\b(?:AND|OR|NOT|NEAR)\b')
_CARD = "n.rid, n.id AS noteId, n.title, n.path, v.name AS vault, n.tags, n.updated_at AS updatedAt"


def _principal_basis(mat: np.ndarray) -> np.ndarray:
    """``(DIM, PROJECTED_DIM)`` orthonormal: the directions that keep most of the vectors' dot products
    (eigenvectors of ``mat.T @ mat``, uncentred: cosine is a dot product of unit vectors)."""
    sample = mat[:: max(1, len(mat) // BASIS_SAMPLE)]  # every k-th row: ~0.1 s instead of seconds at 90k rows
    _vals, vecs = np.linalg.eigh(sample.T @ sample)
    return np.ascontiguousarray(vecs[:, ::-1][:, :PROJECTED_DIM], dtype=np.float32)


class _Vectors(NamedTuple):
    """One consistent view of the index: swapped whole by a refresh, so a query never mixes two."""

    ids: np.ndarray  # chunk ids, ascending
    rids: np.ndarray
    vaults: np.ndarray
    mat: np.ndarray  # (n, DIM) float32; (n, PROJECTED_DIM) when projected
    basis: np.ndarray | None  # (DIM, PROJECTED_DIM) when projected
    q8: np.ndarray  # (n, DIM) int8 copies, when projected: the candidates' cosines
    scale: np.ndarray  # (n,) float32: row i is q8[i] * scale[i]


def _quantize(mat: np.ndarray, block: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 per row (a unit vector's components are small: ~1e-3 error on a cosine), a block
    of rows at a time so the float temporaries stay small."""
    q8 = np.empty(mat.shape, np.int8)
    scale = np.empty(len(mat), np.float32)
    for i in range(0, len(mat), block):
        part = mat[i : i + block]
        s = np.maximum(np.abs(part).max(axis=1), 1e-12).astype(np.float32) / 127
        q8[i : i + block] = np.round(part / s[:, None])
        scale[i : i + block] = s
    return q8, scale


def one_blas_thread() -> None:
    """numpy's OpenBLAS on one thread. A matrix-vector product is memory-bound, and OpenBLAS's second,
    spinning thread fought the ONNX threads and the keyword search for 2 cores: 8 ms on one thread,
    20 ms on two, for the 90k-chunk product. Set through the library itself (the environment variable
    only counts before numpy is imported); a BLAS without the call (Accelerate) is left alone."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            libs = {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return
    for path in sorted(libs):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(1)
                break


def _project(mat: np.ndarray, basis: np.ndarray, block: int = 2048) -> np.ndarray:
    """``mat @ basis`` a block of rows at a time: one big product makes OpenBLAS keep ~50 MB of buffers."""
    out = np.empty((len(mat), basis.shape[1]), np.float32)
    for i in range(0, len(mat), block):
        np.matmul(mat[i : i + block], basis, out=out[i : i + block])
    return out


class SemanticIndex:
    """Chunk vectors of one database in memory, plus the embedder that makes query vectors.

    Thread-safe: refreshes are serialised and swap in new arrays, so a concurrent query
    always sees a consistent (ids, rids, vaults, matrix) tuple. Each thread passes its own
    connection.
    """

    def __init__(self, embedder: Embedder, *, project_above: int | None = None) -> None:
        self.embedder = embedder
        self.project_above = PROJECT_ABOVE if project_above is None else project_above
        one_blas_thread()
        self._lock = threading.Lock()
        self._db: str | None = None
        self._gen = -1
        self._data = self._empty()
        self._pool: ThreadPoolExecutor | None = None

    def __len__(self) -> int:
        return len(self._data[0])

    def pool(self) -> ThreadPoolExecutor:
        """The worker that embeds queries alongside the keyword search (created on first use)."""
        if self._pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="kms-semantic")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    def refresh(self, conn: apsw.Connection) -> None:
        """Bring the matrix up to date with the chunks table (a no-op costs one row read)."""
        gen = next(conn.execute("SELECT gen FROM embed_generation WHERE id = 1"))[0]
        db = conn.filename
        if gen == self._gen and db == self._db:
            return
        with self._lock:
            if gen == self._gen and db == self._db:
                return
            old = self._data if db == self._db else self._empty()
            ids, rids, vaults, mat, basis = old.ids, old.rids, old.vaults, old.mat, old.basis
            # Chunks are only ever inserted (with AUTOINCREMENT ids) or deleted, never updated.
            live = np.fromiter((r[0] for r in conn.execute("SELECT id FROM chunks")), dtype=np.int64)
            keep = np.isin(ids, live)
            k = int(keep.sum())
            last = int(ids.max()) if len(ids) else 0
            top = int(live.max()) if len(live) else 0
            # Filled in place (no list of blobs, one copy of the kept rows): at 10k notes the
            # matrix is ~140 MB and a refresh must not need three of it.
            m = int(np.count_nonzero(live > last))
            out_ids, out_rids, out_vaults = np.empty(k + m, np.int64), np.empty(k + m, np.int64), np.empty(k + m,
                                                                                                        np.int64)
            for src, dst in ((ids, out_ids), (rids, out_rids), (vaults, out_vaults)):
                np.compress(keep, src, axis=0, out=dst[:k])
            fresh = np.empty((m, DIM), np.float32)
            j = 0
            for cid, rid, vid, blob in conn.execute(
                "SELECT c.id, c.rid, n.vault_id, e.vector FROM chunks c JOIN notes n ON n.rid = c.rid "
                "JOIN embeddings e ON e.hash = c.hash WHERE c.id > ? AND c.id <= ? ORDER BY c.id", (last, top)
            ):
                if j == m:  # cannot happen (ids are never reused); be safe anyway
                    break
                out_ids[k + j], out_rids[k + j], out_vaults[k + j] = cid, rid, vid
                fresh[j] = np.frombuffer(blob, dtype="<f4")
                j += 1
            fresh = fresh[:j]
            kept = np.compress(keep, mat, axis=0)
            q8, scale = old.q8, old.scale
            if basis is not None:
                q8, scale = np.compress(keep, q8, axis=0), np.compress(keep, scale)
            if basis is None:
                full = np.concatenate([kept, fresh]) if k else fresh
                if len(full) > self.project_above:  # big enough to hold projected (see PROJECT_ABOVE)
                    basis = _principal_basis(full)
                    q8, scale = _quantize(full)
                    full = _project(full, basis)
                out_mat = full
            else:
                out_mat = np.concatenate([kept, _project(fresh, basis)])
                fresh_q8, fresh_scale = _quantize(fresh)
                q8, scale = np.concatenate([q8, fresh_q8]), np.concatenate([scale, fresh_scale])
            n = k + j
            self._data = _Vectors(out_ids[:n], out_rids[:n], out_vaults[:n], out_mat, basis, q8, scale)
            self._gen, self._db = gen, db
            if j > SHRINK_AFTER:  # the scan filled this connection's page cache (32 MB) with vectors
                conn.execute("PRAGMA shrink_memory")  # now held in the matrix: give those pages back

    @property
    def projected(self) -> bool:
        return self._data.basis is not None

    @staticmethod
    def _empty() -> _Vectors:
        none = np.zeros(0, np.int64)
        return _Vectors(none, none, none, np.zeros((0, DIM), np.float32), None, np.zeros((0, DIM), np.int8),
                        np.zeros(0, np.float32))

    def _exact(self, rows: np.ndarray, query_vec: np.ndarray) -> np.ndarray:
        """Cosines of the query with these rows of a projected index, from their int8 copies (within ~1e-3
        of the float32 ones)."""
        d = self._data
        return (d.q8[rows].astype(np.float32) @ query_vec.astype(np.float32)) * d.scale[rows]

    def similarities(self, query_vec: np.ndarray, chunk_ids: list[int]) -> dict[int, float]:
        """Cosine of the query with each of these chunks (those in the matrix): a note's sections ranked."""
        d = self._data
        if not len(d.ids) or not chunk_ids:
            return {}
        want = np.asarray(chunk_ids, dtype=np.int64)
        pos = np.clip(np.searchsorted(d.ids, want), 0, len(d.ids) - 1)  # ids ascend: appended in id order
        found = d.ids[pos] == want
        if d.basis is not None:
            scores = self._exact(pos[found], query_vec)
        else:
            scores = d.mat[pos[found]] @ query_vec.astype(np.float32)
        return {int(c): float(v) for c, v in zip(want[found], scores, strict=True)}

    def best_notes(self, query_vec: np.ndarray, *, vault_id: int | None = None, depth: int = DEPTH,
                   min_similarity: float = MIN_SIMILARITY) -> list[tuple[int, int, float]]:
        """``(rid, chunk id, cosine)`` of the ``depth`` most similar notes, by each note's best chunk."""
        ids, rids, vaults, mat, basis = self._data[:5]
        if not len(ids):
            return []
        if basis is not None:
            return self._best_projected(query_vec, depth, min_similarity, vault_id)
        scores = mat @ query_vec.astype(np.float32)
        if vault_id is not None:
            scores = np.where(vaults == vault_id, scores, -2.0)
        # Notes have a handful of chunks each, so the top depth*8 chunks nearly always hold the
        # top depth notes; only when they do not is the whole list sorted.
        take = min(len(scores), depth * 8)
        top = np.argpartition(-scores, take - 1)[:take]
        ranked = top[np.argsort(-scores[top], kind="stable")]
        out = self._walk(scores, rids, ids, ranked, depth, min_similarity)
        if len(out) < depth and take < len(scores) and float(scores[top].min()) >= min_similarity:
            out = self._walk(scores, rids, ids, np.argsort(-scores, kind="stable"), depth, min_similarity)
        return out

    def _best_projected(self, query_vec: np.ndarray, depth: int, min_similarity: float,
                        vault_id: int | None) -> list[tuple[int, int, float]]:
        """The projected matrix picks candidates (a third of the bytes to multiply), their exact cosines
        (vectors from the database) rank them; more candidates while too few notes clear the bar."""
        ids, rids, vaults, mat, basis = self._data[:5]
        assert basis is not None
        approx = mat @ (query_vec.astype(np.float32) @ basis)
        if vault_id is not None:
            approx = np.where(vaults == vault_id, approx, -2.0)
        take = min(len(approx), max(depth * 8, RERANK))
        while True:
            top = np.argpartition(-approx, take - 1)[:take]
            exact = self._exact(top, query_vec)
            if vault_id is not None:
                exact = np.where(vaults[top] == vault_id, exact, -2.0)
            out = self._walk(exact, rids[top], ids[top], np.argsort(-exact, kind="stable"), depth, min_similarity)
            if len(out) >= depth or take == len(approx) or float(approx[top].min()) < min_similarity - APPROX_SLACK:
                return out
            take = min(len(approx), take * 4)

    @staticmethod
    def _walk(scores: np.ndarray, rids: np.ndarray, ids: np.ndarray, order: np.ndarray, depth: int,
              min_similarity: float) -> list[tuple[int, int, float]]:
        out: list[tuple[int, int, float]] = []
        seen: set[int] = set()
        for i in order:
            s = float(scores[i])
            if s < min_similarity:
                break
            rid = int(rids[i])
            if rid not in seen:
                seen.add(rid)
                out.append((rid, int(ids[i]), s))
                if len(out) == depth:
                    break
        return out


def keyword_hits(conn: apsw.Connection, query: str, limit: int, vault_id: int | None, *,
                 strict: bool = False) -> tuple[list[dict[str, Any]], bool]:
    """The BM25 list (``server.index.search``) and whether it was relaxed to any-word matching.

    The hybrid search takes it as ``kms_search`` gives it: when few notes hold every word, any
    word (stop words left out, see ``search.STOPWORDS``), so a note plain search ranks 4th is
    not lost below the semantic matches. ``strict`` keeps to notes with every word (benchmarks).
    A query that trips FTS5 syntax (``what's "x``) is retried as plain words instead of refused.
    """
    from server.index.search import build_match, search

    def run(q: str) -> dict[str, Any]:
        if strict:
            q = build_match(q)[0]  # quoted terms (or the query's own syntax): never relaxed
            if not q:
                return {"hits": []}
        return search(conn, q, limit, vault_id)

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
    cur = conn.execute(f"SELECT {_CARD} FROM notes n JOIN vaults v ON v.id = n.vault_id "
                       f"WHERE n.rid IN ({marks}) AND n.hidden_at IS NULL", rids)
    out = {}
    for row in cur:
        rid, note_id, title, path, vault, tags, updated = row
        out[rid] = {"noteId": note_id, "title": title, "path": path, "vault": vault,
                    "tags": tags.split() if tags else [], "updatedAt": updated}
    return out


def _keyword_only(conn: apsw.Connection, query: str, limit: int, vault_id: int | None,
                  reason: str) -> dict[str, Any]:
    """The fallback answer: the keyword hits, in the hybrid hit shape, saying why."""
    kw, relaxed = keyword_hits(conn, query, limit, vault_id)
    hits = [{"noteId": h["noteId"], "title": h["title"], "path": h["path"], "vault": h["vault"],
             "excerpt": h["excerpt"], "heading": None, "score": h["score"], "matchType": "keyword",
             "similarity": None, "tags": h["tags"], "updatedAt": h["updatedAt"]} for h in kw[:limit]]
    return {"query": query, "mode": "keyword-only", "reason": reason, "relaxed": relaxed, "hits": hits}


def semantic_search(conn: apsw.Connection, index: SemanticIndex, query: str, limit: int = 10,
                    vault_id: int | None = None, *, mode: str = "hybrid",
                    query_vec: np.ndarray | None = None) -> dict[str, Any]:
    """Hybrid (default) or ``mode="semantic"`` (embeddings only) search; hidden notes never appear.

    ``vault_id`` limits every part (keyword and embedding hits) to one vault; None = every vault.

    Hits: noteId, title, path, vault, excerpt (the best chunk with its heading, or the keyword
    snippet for a keyword-only match), heading, score (RRF), matchType (keyword / semantic /
    both), similarity (cosine of the best chunk, for semantic matches), tags, updatedAt.
    ``query_vec``: the query's embedding when the caller already has it (``recall`` reuses it).
    """
    if mode not in ("hybrid", "semantic"):
        raise KmsError("invalid-input", f"mode must be hybrid or semantic, not {mode!r}")
    if not query or not query.strip():
        raise KmsError("invalid-input", "the query is empty")
    limit = max(1, min(int(limit), MAX_LIMIT))

    embedder = index.embedder
    if not embedder.ready:
        reason = embedder.reason or f"the embedding model is {embedder.state}"
        return _keyword_only(conn, query, limit, vault_id, reason)
    index.refresh(conn)
    if not len(index):
        return _keyword_only(conn, query, limit, vault_id, "no notes are embedded yet (run `kms embed`)")
    # The model and the matrix product run in a worker thread while this thread runs the
    # keyword search on its own connection: both release the GIL, so on 2 cores the query
    # costs about max(keyword, embedding) instead of their sum.
    def nearest() -> list[tuple[int, int, float]]:
        vec = query_vec if query_vec is not None else embedder.embed_query(query)
        return index.best_notes(vec, vault_id=vault_id)

    semantic = index.pool().submit(nearest)
    try:
        kw, relaxed = keyword_hits(conn, query, DEPTH, vault_id) if mode == "hybrid" else ([], False)
    finally:
        failed: str | None = None
        try:
            sem = semantic.result()
        except ModelNotReady as exc:
            sem, failed = [], exc.reason
    if failed is not None:
        return _keyword_only(conn, query, limit, vault_id, failed)

    cards = _cards(conn, [rid for rid, _c, _s in sem])
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
        chunks = {cid: (heading, text) for cid, heading, text in
                  conn.execute(f"SELECT id, heading, text FROM chunks WHERE id IN ({marks})", wanted)}
    hits = []
    for h in ranked:
        cid = chunk_for.get(h["noteId"])
        heading = None
        if cid is not None and cid in chunks:
            heading, text = chunks[cid]
            h["excerpt"] = _excerpt(heading, text) or h.get("excerpt") or h["title"]
        hits.append({
            "noteId": h["noteId"], "title": h["title"], "path": h["path"], "vault": h["vault"],
            "excerpt": h.get("excerpt") or h["title"], "heading": heading, "score": round(h["score"], 5),
            "matchType": h["matchType"], "similarity": h.get("similarity"), "tags": h["tags"],
            "updatedAt": h["updatedAt"],
        })
    return {"query": query, "mode": mode, "hits": hits, **({"relaxed": True} if relaxed else {})}


class SemanticService:
    """What a long-running process (the MCP server) holds for semantic search.

    ``start()`` returns at once: the model loads in a background thread, and a background
    embedder (its own DB connection) embeds pending notes once the model is ready, then
    whenever ``notify_changed()`` is called (after a write tool or a watcher reindex) or every
    ``interval`` seconds. Until the model is ready, ``search`` answers keyword-only.
    """

    def __init__(self, db_path: str | Path, *, model_dir: str | Path | None = None, enabled: bool = True,
                 background_embedding: bool = True, interval: float = 30.0, threads: int | None = None,
                 download: bool = False, first_call_wait_s: float = FIRST_CALL_WAIT_S) -> None:
        from server.index.embed.pipeline import BackgroundEmbedder

        self.embedder = Embedder(model_dir, threads=threads, enabled=enabled, download=download)
        self.index = SemanticIndex(self.embedder)
        self.background = (BackgroundEmbedder(db_path, self.embedder, interval=interval,
                                              after_pass=self.index.refresh)
                           if background_embedding and enabled else None)
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

    def search(self, conn: apsw.Connection, query: str, limit: int = 10, vault_id: int | None = None,
               *, mode: str = "hybrid") -> dict[str, Any]:
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
        loading is waited for (bounded): onnxruntime aborts the process (SIGABRT) when the
        interpreter finalises under a session being built."""
        if self.background is not None and self._started:
            self.background.stop()
        self.index.close()
        if self._started and self.embedder.state == LOADING:
            self.embedder.wait(settle_s)
        return self.embedder.state != LOADING
