"""The bytes of every note version kms keeps (docs/history.md): stored once per content hash, compressed.

A blob is one zstd frame. It stands alone, or it was compressed with the bytes of another blob (its
``base``) as a raw-content dictionary: a vault's *seed dictionary* (snippets of its notes, made on a cold
index) for a note's first version, the note's previous version for every later one, so a one-line edit
of a 6 KB note costs tens of bytes. ``depth`` bounds how many bases a read decompresses: a version whose
chain would pass ``MAX_DEPTH`` is compressed against the seed again. A blob another one is based on is
never deleted while that one lives: ``drop_blobs`` re-encodes the dependents first (``forget`` must
leave no byte of a purged note behind, even inside another note's delta).

Nothing here knows notes or settings: ``server.index.note_versions`` decides what is kept.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import apsw
import zstandard

from server.store.db import scalar

if TYPE_CHECKING:
    import zstandard

LEVEL = 3  # zstd's default: on note text within a few % of level 9's size at a fraction of its time
MAX_DEPTH = 16  # a read decompresses at most this many frames
SEED_NOTES = 64  # a seed dictionary: the start of this many notes, spread over the vault
SEED_BYTES_PER_NOTE = 4096
SEED_MIN_NOTES = 64  # fewer notes than this on a cold index: no seed (it would cost more than it saves)

_local = threading.local()  # a compressor is not to be shared between threads: each has its own few
_lock = threading.Lock()  # the read cache is the process's
# (database file, bid) -> bytes, the last few read (a chain's bases). A blob's bytes never change and its
# id is never used again (AUTOINCREMENT), so an entry stays true for as long as the blob lives.
_cache: OrderedDict[tuple[str, int], bytes] = OrderedDict()


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def make_seed(samples: Iterable[bytes]) -> bytes:
    """A seed dictionary from note texts: the first ``SEED_BYTES_PER_NOTE`` of each."""
    return b"".join(s[:SEED_BYTES_PER_NOTE] for s in samples)


def _zstd() -> Any:
    """zstandard, imported at the first version kept or read (not at a server's start)."""

    return zstandard


def _compressor(base: bytes | None) -> zstandard.ZstdCompressor:
    """A compressor with ``base`` as its dictionary, kept per thread for the few bases in use (the seed and a
    neighbour or two): keyed by the bytes object itself (the cache holds it, so its id is not reused), since
    hashing a 256 KB seed for every note cost more than compressing the note."""
    zs = _zstd()
    cache: OrderedDict[int, tuple[bytes | None, zstandard.ZstdCompressor]] | None = getattr(_local, "compressors", None)
    if cache is None:
        cache = _local.compressors = OrderedDict()
    key = id(base)
    found = cache.get(key)
    if found is None or found[0] is not base:
        made = (
            zs.ZstdCompressor(level=LEVEL, dict_data=zs.ZstdCompressionDict(base, dict_type=zs.DICT_TYPE_RAWCONTENT))
            if base
            else zs.ZstdCompressor(level=LEVEL)
        )
        found = cache[key] = (base, made)
        if len(cache) > 4:
            cache.popitem(last=False)
    else:
        cache.move_to_end(key)
    return found[1]


def compress(data: bytes, base: bytes | None = None) -> bytes:
    """One zstd frame of ``data``, with ``base`` as its dictionary when given (picklable inputs: the
    index's worker processes compress a cold index's first versions)."""
    return _compressor(base).compress(data)


def compress_many(datas: list[bytes], base: bytes | None = None) -> list[bytes]:
    """``compress`` of each of ``datas`` (the same frames), by zstd's own threads on every core in one call:
    a cold index's first versions, compressed after the vault became searchable (``server.index.cold``),
    cost the writing process no Python per note and the wall time of one core's share."""
    frames: list[bytes] = [b""] * len(datas)
    todo = [i for i, d in enumerate(datas) if d]  # (an empty input is refused by the batch call)
    if len(todo) > 1 and "multi_compress_to_buffer" in _zstd().backend_features:
        found = _compressor(base).multi_compress_to_buffer([datas[i] for i in todo], threads=-1)
        for at, i in enumerate(todo):
            frames[i] = found[at].tobytes()
        todo = []
    for i, d in enumerate(datas):
        if not d or i in todo:
            frames[i] = compress(d, base)
    return frames


def decompress(frame: bytes, base: bytes | None, size: int) -> bytes:
    zs = _zstd()
    if base:
        d = zs.ZstdDecompressor(dict_data=zs.ZstdCompressionDict(base, dict_type=zs.DICT_TYPE_RAWCONTENT))
    else:
        d = zs.ZstdDecompressor()
    return d.decompress(frame, max_output_size=max(size, 1))


def blob_id(conn: apsw.Connection, digest: str) -> int | None:
    row = conn.execute("SELECT bid FROM history_blobs WHERE hash = ?", (digest,)).fetchone()
    return None if row is None else int(row[0])


def blob_bytes(conn: apsw.Connection, bid: int) -> bytes:
    """The bytes of a blob (its bases decompressed first, the recent ones from a small cache)."""
    db = conn.filename
    with _lock:
        if (db, bid) in _cache:
            _cache.move_to_end((db, bid))
            return _cache[(db, bid)]
    chain: list[tuple[int, int | None, int, bytes]] = []
    at: int | None = bid
    while at is not None and (db, at) not in _cache:
        row = conn.execute("SELECT base, size, data FROM history_blobs WHERE bid = ?", (at,)).fetchone()
        if row is None:
            raise LookupError(f"history blob {at} is missing")
        chain.append((at, row[0], row[1], row[2]))
        at = row[0]
    data = _cache.get((db, at)) if at is not None else None
    if at is not None and data is None:  # dropped from the cache meanwhile (another thread): read again
        return _uncached(conn, bid)
    for this, base, size, frame in reversed(chain):
        data = decompress(frame, data if base is not None else None, size)
        _remember(conn, this, data)
    assert data is not None
    return data


def _uncached(conn: apsw.Connection, bid: int) -> bytes:
    row = conn.execute("SELECT base, size, data FROM history_blobs WHERE bid = ?", (bid,)).fetchone()
    if row is None:
        raise LookupError(f"history blob {bid} is missing")
    return decompress(row[2], _uncached(conn, row[0]) if row[0] is not None else None, row[1])


def _remember(conn: apsw.Connection, bid: int, data: bytes) -> None:
    key = (conn.filename, bid)
    with _lock:
        _cache[key] = data
        _cache.move_to_end(key)
        while len(_cache) > 32:
            _cache.popitem(last=False)


def forget_cached() -> None:
    """Drop the read cache (after a purge: nothing of a forgotten note stays in memory either)."""
    with _lock:
        _cache.clear()


def put_blob(
    conn: apsw.Connection,
    data: bytes,
    digest: str | None = None,
    *,
    neighbour: int | None = None,
    seed: int | None = None,
    packed: bytes | None = None,
    size: int | None = None,
) -> int:
    """Store ``data`` once (by its hash) and return its blob id. It is compressed against ``neighbour``
    (a blob of the same note) while that chain stays under ``MAX_DEPTH``, else against ``seed``.
    ``packed``: the bytes (``size`` of them) already compressed against ``seed`` by a worker process;
    ``data`` is then unused."""
    digest = digest or sha256_hex(data)
    if (known := blob_id(conn, digest)) is not None:
        return known
    base, depth = None, 1
    if packed is None and neighbour is not None:
        row = conn.execute("SELECT depth FROM history_blobs WHERE bid = ?", (neighbour,)).fetchone()
        if row is not None and row[0] < MAX_DEPTH:
            base, depth = neighbour, row[0] + 1
    if base is None and seed is not None:
        base, depth = seed, 1
    fresh = packed is None
    if packed is None:
        packed = compress(data, blob_bytes(conn, base) if base is not None else None)
    conn.execute(
        "INSERT INTO history_blobs(hash, base, depth, size, data) VALUES (?, ?, ?, ?, ?)",
        (digest, base, depth, len(data) if size is None else size, packed),
    )
    bid = conn.last_insert_rowid()
    if fresh:
        _remember(conn, bid, data)
    return bid


def put_packed(conn: apsw.Connection, frames: list[tuple[str, bytes, int]], seed: int | None) -> dict[str, int]:
    """``put_blob`` of many frames already compressed against ``seed`` (a cold index's first versions), each
    ``(hash, frame, size)``: the blob id of each hash, its frame stored once. A lookup and one insert for a
    whole batch of frames, where ``put_blob`` runs three statements for each."""
    found: dict[str, int] = {}
    for at in range(0, len(frames), 500):
        chunk = frames[at : at + 500]
        digests = list(dict.fromkeys(d for d, _f, _s in chunk))
        ask = f"SELECT hash, bid FROM history_blobs WHERE hash IN ({','.join('?' * len(digests))})"
        known = {str(h): int(b) for h, b in conn.execute(ask, digests)}
        new: dict[str, tuple] = {}
        for digest, frame, size in chunk:
            if digest not in known and digest not in new:
                new[digest] = (digest, seed, 1, size, frame)
        if new:
            conn.executemany(
                "INSERT INTO history_blobs(hash, base, depth, size, data) VALUES (?, ?, ?, ?, ?)", list(new.values())
            )
            known = {str(h): int(b) for h, b in conn.execute(ask, digests)}
        found.update(known)
    return found


def put_seed(conn: apsw.Connection, vault_id: int, seed: bytes) -> int:
    """Make ``seed`` the vault's seed dictionary (stored as a blob of its own, depth 0)."""
    digest = sha256_hex(seed)
    bid = blob_id(conn, digest)
    if bid is None:
        conn.execute(
            "INSERT INTO history_blobs(hash, base, depth, size, data) VALUES (?, NULL, 0, ?, ?)",
            (digest, len(seed), compress(seed)),
        )
        bid = conn.last_insert_rowid()
    conn.execute("INSERT OR REPLACE INTO history_dicts VALUES (?, ?)", (vault_id, bid))
    return bid


def seed_of(conn: apsw.Connection, vault_id: int) -> int | None:
    row = conn.execute("SELECT bid FROM history_dicts WHERE vault_id = ?", (vault_id,)).fetchone()
    return None if row is None else int(row[0])


def unused_blobs(conn: apsw.Connection) -> list[int]:
    """Blobs no version, no seed and no other blob needs any more."""
    return [
        int(r[0])
        for r in conn.execute(
            """SELECT b.bid FROM history_blobs b
               WHERE NOT EXISTS (SELECT 1 FROM history_versions v WHERE v.bid = b.bid)
                 AND NOT EXISTS (SELECT 1 FROM history_dicts d WHERE d.bid = b.bid)"""
        )
    ]


def drop_blobs(conn: apsw.Connection, doomed: Iterable[int]) -> int:
    """Delete these blobs; a blob still needed that was based on one of them is compressed again on its
    own (so nothing of a deleted blob survives in a delta). Returns the bytes freed."""
    doomed_set = set(doomed)
    if not doomed_set:
        return 0
    freed = 0
    for bid in sorted(doomed_set):
        deps: list[Any] = conn.execute("SELECT bid FROM history_blobs WHERE base = ?", (bid,)).fetchall()
        for (dep,) in deps:
            if dep in doomed_set:
                continue
            data = blob_bytes(conn, dep)
            conn.execute(
                "UPDATE history_blobs SET base = NULL, depth = 1, data = ? WHERE bid = ?", (compress(data), dep)
            )
            _fix_depths(conn, dep)
    for bid in sorted(doomed_set):
        row = conn.execute("SELECT length(data) FROM history_blobs WHERE bid = ?", (bid,)).fetchone()
        freed += row[0] if row else 0
        conn.execute("DELETE FROM history_blobs WHERE bid = ?", (bid,))
        with _lock:
            _cache.pop((conn.filename, bid), None)
    return freed


def _fix_depths(conn: apsw.Connection, bid: int) -> None:
    """Depths below a re-encoded blob only shrink: recount them (bounded by ``MAX_DEPTH``)."""
    frontier = [(bid, 1)]
    while frontier:
        at, depth = frontier.pop()
        deps: list[Any] = conn.execute("SELECT bid FROM history_blobs WHERE base = ?", (at,)).fetchall()
        for (dep,) in deps:
            conn.execute("UPDATE history_blobs SET depth = ? WHERE bid = ?", (depth + 1, dep))
            frontier.append((dep, depth + 1))


def stored_bytes(conn: apsw.Connection) -> int:
    """What the kept versions take in the database (their compressed frames)."""
    return int(scalar(conn, "SELECT coalesce(sum(length(data)), 0) FROM history_blobs"))


def scrub_seeds(conn: apsw.Connection, texts: Iterable[bytes]) -> int:
    """Take the start of each of ``texts`` out of every seed dictionary that holds it (a note forgotten for
    privacy leaves no snippet behind): the blobs based on such a seed are compressed again against the
    new one. Returns how many seeds changed."""
    snippets = [t[:SEED_BYTES_PER_NOTE] for t in texts if t]
    changed = 0
    seeds: list[Any] = conn.execute("SELECT vault_id, bid FROM history_dicts").fetchall()
    for vault_id, bid in seeds:
        seed = blob_bytes(conn, bid)
        new = seed
        for s in snippets:
            new = new.replace(s, b"")
        if new == seed:
            continue
        new_bid = put_seed(conn, vault_id, new)
        deps: list[Any] = conn.execute("SELECT bid FROM history_blobs WHERE base = ?", (bid,)).fetchall()
        for (dep,) in deps:
            data = blob_bytes(conn, dep)
            conn.execute(
                "UPDATE history_blobs SET base = ?, data = ? WHERE bid = ?", (new_bid, compress(data, new), dep)
            )
        conn.execute("DELETE FROM history_blobs WHERE bid = ?", (bid,))
        with _lock:
            _cache.pop((conn.filename, bid), None)
        changed += 1
    return changed
