"""The chunk vectors in memory (``SemanticIndex``) and the nearest notes to a query vector.

Up to ``PROJECT_ABOVE`` chunks, one float32 matrix and an exact matrix-vector product per query.
Past it the float32 matrix would dominate the server's memory and each query's time, so it is held
on its 128 principal directions (a third of the floats) to pick the 512 best candidates, and int8
copies of the vectors (a quarter of the bytes) rank those by their cosine: less memory and a
quicker product, the same top notes (tests/unit/test_semantic.py; figures in docs/benchmarks.md).
Nothing to tune or rebuild: the directions are computed once, when the index first outgrows the
bound, and later chunks are projected onto them.
"""

from __future__ import annotations

import ctypes
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import apsw
import numpy as np

from server.index.embed.model import DIM, Embedder
from server.vault.scope import Vaults, VaultScope

DEPTH = 50  # how many notes each list contributes to the fusion
MIN_SIMILARITY = 0.2  # below this a "semantic match" is noise (MiniLM puts unrelated text at ~0-0.15)
SHRINK_AFTER = 2_000  # chunks loaded by one refresh past which its connection's page cache is released
# Past this many chunks the matrix is held projected on its PROJECTED_DIM principal directions (a third
# of the memory) to pick candidates; the RERANK best are ranked by their cosine from int8 copies (a
# quarter of the float32 bytes). Smaller indexes keep every float32 vector (exact, and small).
PROJECT_ABOVE = 20_000
PROJECTED_DIM = 128
RERANK = 512
BASIS_SAMPLE = 16_384  # rows the principal directions are computed from
APPROX_SLACK = 0.1  # a candidate's projected cosine is within this of its exact one, in practice


def _principal_basis(mat: np.ndarray) -> np.ndarray:
    """``(DIM, PROJECTED_DIM)`` orthonormal: the directions that keep most of the vectors' dot products
    (eigenvectors of ``mat.T @ mat``, uncentred: cosine is a dot product of unit vectors)."""
    sample = mat[:: max(1, len(mat) // BASIS_SAMPLE)]  # every k-th row: the cost stops growing with the index
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
    spinning thread fought the ONNX threads and the keyword search for the cores, which made the product
    slower on two threads than on one. Set through the library itself (the environment variable
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


def _scope_mask(vaults: np.ndarray, vault_id: Vaults) -> np.ndarray | None:
    """Which chunks the scope sees (None: every chunk, no mask to apply)."""
    scope = VaultScope.of(vault_id)
    return None if scope.ids is None else np.isin(vaults, np.array(scope.ids, dtype=vaults.dtype))


def _project(mat: np.ndarray, basis: np.ndarray, block: int = 2048) -> np.ndarray:
    """``mat @ basis`` a block of rows at a time: one big product makes OpenBLAS keep large buffers."""
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
            # Filled in place (no list of blobs, one copy of the kept rows): the matrix is the
            # server's largest object, and a refresh must not need three of it.
            m = int(np.count_nonzero(live > last))
            out_ids, out_rids, out_vaults = (
                np.empty(k + m, np.int64),
                np.empty(k + m, np.int64),
                np.empty(k + m, np.int64),
            )
            for src, dst in ((ids, out_ids), (rids, out_rids), (vaults, out_vaults)):
                np.compress(keep, src, axis=0, out=dst[:k])
            fresh = np.empty((m, DIM), np.float32)
            j = 0
            for cid, rid, vid, blob in conn.execute(
                "SELECT c.id, c.rid, n.vault_id, e.vector FROM chunks c JOIN notes n ON n.rid = c.rid "
                "JOIN embeddings e ON e.hash = c.hash WHERE c.id > ? AND c.id <= ? ORDER BY c.id",
                (last, top),
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
        return _Vectors(
            none, none, none, np.zeros((0, DIM), np.float32), None, np.zeros((0, DIM), np.int8), np.zeros(0, np.float32)
        )

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

    def best_notes(
        self,
        query_vec: np.ndarray,
        *,
        vault_id: Vaults = None,
        depth: int = DEPTH,
        min_similarity: float = MIN_SIMILARITY,
    ) -> list[tuple[int, int, float]]:
        """``(rid, chunk id, cosine)`` of the ``depth`` most similar notes, by each note's best chunk."""
        ids, rids, vaults, mat, basis = self._data[:5]
        if not len(ids):
            return []
        in_scope = _scope_mask(vaults, vault_id)
        if basis is not None:
            return self._best_projected(query_vec, depth, min_similarity, in_scope)
        scores = mat @ query_vec.astype(np.float32)
        if in_scope is not None:
            scores = np.where(in_scope, scores, -2.0)
        # Notes have a handful of chunks each, so the top depth*8 chunks nearly always hold the
        # top depth notes; only when they do not is the whole list sorted.
        take = min(len(scores), depth * 8)
        top = np.argpartition(-scores, take - 1)[:take]
        ranked = top[np.argsort(-scores[top], kind="stable")]
        out = self._walk(scores, rids, ids, ranked, depth, min_similarity)
        if len(out) < depth and take < len(scores) and float(scores[top].min()) >= min_similarity:
            out = self._walk(scores, rids, ids, np.argsort(-scores, kind="stable"), depth, min_similarity)
        return out

    def _best_projected(
        self, query_vec: np.ndarray, depth: int, min_similarity: float, in_scope: np.ndarray | None
    ) -> list[tuple[int, int, float]]:
        """The projected matrix picks candidates (a third of the bytes to multiply), their exact cosines
        (vectors from the database) rank them; more candidates while too few notes clear the bar."""
        ids, rids, _vaults, mat, basis = self._data[:5]
        assert basis is not None
        approx = mat @ (query_vec.astype(np.float32) @ basis)
        if in_scope is not None:
            approx = np.where(in_scope, approx, -2.0)
        take = min(len(approx), max(depth * 8, RERANK))
        while True:
            top = np.argpartition(-approx, take - 1)[:take]
            exact = self._exact(top, query_vec)
            if in_scope is not None:
                exact = np.where(in_scope[top], exact, -2.0)
            out = self._walk(exact, rids[top], ids[top], np.argsort(-exact, kind="stable"), depth, min_similarity)
            if len(out) >= depth or take == len(approx) or float(approx[top].min()) < min_similarity - APPROX_SLACK:
                return out
            take = min(len(approx), take * 4)

    @staticmethod
    def _walk(
        scores: np.ndarray, rids: np.ndarray, ids: np.ndarray, order: np.ndarray, depth: int, min_similarity: float
    ) -> list[tuple[int, int, float]]:
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
