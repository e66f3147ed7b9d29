"""Embed the notes whose text changed since they were last embedded, in small resumable batches.

A note is pending when it is visible and has no ``note_embed_state`` row for its current
content hash, title and model. Each batch chunks its notes, embeds only the chunk hashes that
have no vector yet (sorted by length, see ``Embedder.embed_many``), and commits vectors, chunks
and state together. The model runs outside the write transaction, so the write lock is held for
milliseconds; a note that changed while its batch was being embedded is left pending.

Used by ``kms embed`` / ``kms index --embed`` (``embed_pending`` on the CLI's connection) and by
the MCP server (``BackgroundEmbedder``: a thread with its own connection, woken after writes).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import numpy as np

from server.index.embed.chunker import Chunk, chunk_note
from server.index.embed.model import MODEL_NAME, Embedder, EmbeddingStopped, ModelNotReady
from server.index.embed_pending import pending_count
from server.store.db import connect, write_tx

log = logging.getLogger(__name__)
Progress = Callable[["EmbedReport"], None]

_PENDING = """
SELECT n.rid, n.title, n.body, n.content_hash FROM notes n
LEFT JOIN note_embed_state s ON s.rid = n.rid
WHERE n.hidden_at IS NULL AND n.rid > ?
  AND (s.rid IS NULL OR s.content_hash != n.content_hash OR s.title != n.title OR s.model != ?)
ORDER BY n.rid LIMIT ?
"""


@dataclass
class EmbedReport:
    notes: int = 0  # notes whose chunks were (re)written
    chunks: int = 0  # chunks those notes have now
    embedded: int = 0  # vectors computed by the model
    reused: int = 0  # chunks whose vector already existed
    skipped: int = 0  # notes that changed while being embedded (still pending)
    pending: int = 0  # pending notes left when the run ended
    seconds: float = 0.0
    stopped: bool = False  # should_stop() ended the run early
    errors: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


def embed_stats(conn: apsw.Connection) -> dict[str, int]:
    """Counts for ``kms model status`` / ``kms status``: embedded and pending notes, chunks, vectors."""
    one = lambda sql: int(next(conn.execute(sql))[0])  # noqa: E731
    return {
        "notes": one("SELECT count(*) FROM notes WHERE hidden_at IS NULL"),
        "embeddedNotes": one("SELECT count(*) FROM note_embed_state"),
        "pendingNotes": pending_count(conn),
        "chunks": one("SELECT count(*) FROM chunks"),
        "vectors": one("SELECT count(*) FROM embeddings"),
    }


def _chunk_all(
    embedder: Embedder, notes: list[tuple], should_stop: Callable[[], bool] | None = None
) -> list[list[Chunk]]:
    """Each note's chunks (a long note's tokenising takes a while: ``should_stop`` is asked between notes)."""
    out = []
    for _rid, title, body, _h in notes:
        if should_stop is not None and should_stop():
            raise EmbeddingStopped
        out.append(chunk_note(title, body, embedder.count_tokens))
    return out


def _store(
    conn: apsw.Connection,
    notes: list[tuple],
    chunked: list[list[Chunk]],
    vectors: dict[str, np.ndarray],
    report: EmbedReport,
) -> None:
    now = time.time()
    with write_tx(conn):
        conn.executemany(
            "INSERT OR IGNORE INTO embeddings(hash, vector, created_at) VALUES (?, ?, ?)",
            [(h, v.astype("<f4").tobytes(), now) for h, v in vectors.items()],
        )
        for (rid, title, _body, chash), chunks in zip(notes, chunked, strict=True):
            # (a note hidden while its batch was embedded is never stored: its chunks were purged)
            live = next(
                conn.execute("SELECT content_hash, title FROM notes WHERE rid = ? AND hidden_at IS NULL", (rid,)), None
            )
            if live is None or live[0] != chash or live[1] != title:
                report.skipped += 1
                continue
            new = [(c.ord, c.heading, c.hash, c.content, c.tokens) for c in chunks]
            old = [
                tuple(r)
                for r in conn.execute(
                    "SELECT ord, heading, hash, text, tokens FROM chunks WHERE rid = ? ORDER BY ord", (rid,)
                )
            ]
            if old != new:  # untouched rows keep their ids: no index refresh
                conn.execute("DELETE FROM chunks WHERE rid = ?", (rid,))
                conn.executemany(
                    "INSERT INTO chunks(rid, ord, heading, hash, text, tokens) VALUES (?, ?, ?, ?, ?, ?)",
                    [(rid, *row) for row in new],
                )
            conn.execute(
                "INSERT OR REPLACE INTO note_embed_state"
                "(rid, content_hash, title, model, chunks, embedded_at) VALUES (?, ?, ?, ?, ?, ?)",
                (rid, chash, title, MODEL_NAME, len(chunks), now),
            )
            report.notes += 1
            report.chunks += len(chunks)


def embed_batch(
    conn: apsw.Connection,
    embedder: Embedder,
    notes: list[tuple],
    report: EmbedReport,
    should_stop: Callable[[], bool] | None = None,
) -> None:
    """Chunk, embed what is new and store one batch of ``(rid, title, body, content_hash)`` rows
    (``EmbeddingStopped``: told to stop in the middle, nothing of it stored)."""
    chunked = _chunk_all(embedder, notes, should_stop)
    wanted: dict[str, Chunk] = {}
    for chunks in chunked:
        for c in chunks:
            wanted.setdefault(c.hash, c)
    known: set[str] = set()
    hashes = list(wanted)
    for i in range(0, len(hashes), 500):
        part = hashes[i : i + 500]
        marks = ",".join("?" * len(part))
        known.update(r[0] for r in conn.execute(f"SELECT hash FROM embeddings WHERE hash IN ({marks})", part))
    todo = [c for h, c in wanted.items() if h not in known]
    vectors: dict[str, np.ndarray] = {}
    if todo:
        mat = embedder.embed_many([c.text for c in todo], [c.tokens for c in todo], should_stop=should_stop)
        vectors = {c.hash: mat[i] for i, c in enumerate(todo)}
    report.embedded += len(todo)
    report.reused += sum(1 for cs in chunked for c in cs if c.hash not in vectors)
    _store(conn, notes, chunked, vectors, report)


def embed_pending(
    conn: apsw.Connection,
    embedder: Embedder | None = None,
    *,
    model_dir: str | Path | None = None,
    batch_notes: int = 32,
    max_notes: int | None = None,
    should_stop: Callable[[], bool] | None = None,
    progress: Progress | None = None,
) -> EmbedReport:
    """Embed pending notes in batches of ``batch_notes`` until none are left (one pass).

    Without an ``embedder`` (the CLI's ``kms embed`` / ``kms index --embed``) one is made for
    ``model_dir`` (the ``embed.model_dir`` setting; None = the usual search order) and loaded
    here. Raises ``ModelNotReady`` at once when the model is not usable; each committed batch
    survives an interruption, so a rerun resumes where it stopped. Small batches keep the
    background thread responsive; bigger ones sort more chunks by length (a little faster).
    """
    started = time.perf_counter()
    report = EmbedReport()
    if embedder is None:
        embedder = Embedder(model_dir)
        embedder.load()
    embedder.require_ready()
    last_rid = 0
    done = 0
    while True:
        if should_stop is not None and should_stop():
            report.stopped = True
            break
        take = batch_notes if max_notes is None else min(batch_notes, max_notes - done)
        if take <= 0:
            break
        notes = [tuple(r) for r in conn.execute(_PENDING, (last_rid, MODEL_NAME, take))]
        if not notes:
            break
        last_rid = notes[-1][0]
        try:
            embed_batch(conn, embedder, notes, report, should_stop)
        except EmbeddingStopped:
            report.stopped = True
            break
        done += len(notes)
        report.seconds = time.perf_counter() - started
        if progress is not None:
            progress(report)
    report.pending = pending_count(conn)
    report.seconds = time.perf_counter() - started
    return report


def embed_notes(conn: apsw.Connection, embedder: Embedder, note_ids: list[str]) -> EmbedReport:
    """Embed specific notes now if they are pending (e.g. right after a write tool)."""
    report = EmbedReport()
    if not note_ids:
        return report
    marks = ",".join("?" * len(note_ids))
    sql = _PENDING.replace("n.rid > ?", f"n.rid > ? AND n.id IN ({marks})")
    notes = [tuple(r) for r in conn.execute(sql, (0, *note_ids, MODEL_NAME, len(note_ids)))]
    if notes:
        embed_batch(conn, embedder, notes, report)
    return report


def prune_embeddings(conn: apsw.Connection) -> int:
    """Drop vectors no chunk uses any more; returns how many.

    Only sensible when nothing is pending: a note being re-embedded may need its old vectors
    back (an edit that was reverted), so ``kms embed`` calls this at the end of a complete run.
    """
    with write_tx(conn):
        conn.execute("DELETE FROM embeddings WHERE hash NOT IN (SELECT hash FROM chunks)")
        return conn.changes()


class BackgroundEmbedder:
    """A daemon thread that embeds pending notes with its own DB connection.

    It waits for the model (never polls it per batch: a failed model parks the thread until
    ``wake()`` after a ``reset()``), then runs ``embed_pending`` whenever woken (after a write
    or a watcher reindex) or every ``interval`` seconds, in small batches so the write lock
    and the CPU are never held for long.

    A wake is settled first: the pass starts once no other wake came for ``settle`` seconds (at
    most ``MAX_SETTLE_S`` after the first), so an agent appending to a note ten times in a row has
    it embedded once, after the burst, instead of competing with its own calls for the CPU.
    """

    MAX_SETTLE_S = 5.0

    def __init__(
        self,
        db_path: str | Path,
        embedder: Embedder,
        *,
        interval: float = 30.0,
        batch_notes: int = 8,
        after_pass: Callable[[apsw.Connection], None] | None = None,
        settle: float = 0.5,
    ) -> None:
        self.db_path = str(db_path)
        self.settle = settle
        self.after_pass = after_pass  # e.g. SemanticIndex.refresh: load new vectors off the query path
        self.embedder = embedder
        self.interval = interval
        self.batch_notes = batch_notes
        self.last_report: EmbedReport | None = None
        self.last_error: str | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="kms-embed-bg", daemon=True)
        self.idle = threading.Event()  # set whenever a pass finished with nothing pending

    def start(self) -> BackgroundEmbedder:
        self._thread.start()
        return self

    def wake(self) -> None:
        self.idle.clear()
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> bool:
        """Stop after the model run in progress (``embed_many`` asks between runs); whether the thread ended.
        One still in a model run must not be finalised under (onnxruntime aborts the process)."""
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def _run(self) -> None:

        conn = connect(self.db_path)
        try:
            while not self._stop.is_set():
                self._wake.clear()  # a wake() during the pass below triggers one more pass
                if self.embedder.ready:
                    try:
                        self.last_report = embed_pending(
                            conn, self.embedder, batch_notes=self.batch_notes, should_stop=self._stop.is_set
                        )
                        self.last_error = None
                        if self.after_pass is not None:
                            self.after_pass(conn)
                        if self.last_report.pending == 0:
                            self.idle.set()
                    except ModelNotReady as exc:
                        self.last_error = str(exc)
                    except Exception as exc:  # busy beyond the timeout, disk full, a bug: keep serving
                        self.last_error = f"{type(exc).__name__}: {exc}"
                        log.warning("background embedding failed: %s", self.last_error)
                elif self.embedder.state in ("not-loaded", "loading"):
                    self.embedder.wait(1.0)  # short, so stop() is prompt
                    continue
                if self._wake.wait(self.interval):
                    self._settle()
        finally:
            conn.close()

    def _settle(self) -> None:
        """Wait until the wakes stop for ``settle`` seconds (bounded), then let the next pass run."""
        deadline = time.monotonic() + self.MAX_SETTLE_S
        while self.settle > 0 and not self._stop.is_set() and time.monotonic() < deadline:
            self._wake.clear()
            if not self._wake.wait(min(self.settle, max(0.0, deadline - time.monotonic()))):
                break
