"""Read every row still on the pages of a damaged SQLite file, without SQLite.

SQLite stops a query at the first damaged page, and its recovery API (``sqlite3_recover``,
``sqlite_dbpage``) is not in the APSW build kms uses (APSW 3.54: no ``recover``, no dbpage table).
So ``kms repair`` reads the file format itself (https://sqlite.org/fileformat2.html): each table's
b-tree is walked from its root page (named in ``sqlite_schema`` on page 1), a page that does not parse
is skipped with what hangs below it, and the cells of every leaf that parses are decoded. Table leaves
no walk reached (their parent page was damaged or cut off) are given to the one table whose columns
fit their records (count and declared types; fewer columns only when no table fits exactly); a leaf
two tables could own is left out. Pages on the free list
are never read, so deleted rows do not come back. The committed frames of a ``-wal`` beside the file
are read over the file's pages, as SQLite would.

Only what the schema needs for kms is supported: UTF-8 text, no auto-vacuum. The result is a dict per
table, keyed by rowid (or by primary key for a ``WITHOUT ROWID`` table), so salvages of two files (the
damaged one and a backup) merge by key.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

MAGIC = b"SQLite format 3\x00"
WAL_MAGIC = (0x377F0682, 0x377F0683)
TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR = 13, 5, 10, 2
GUESSED_PAGE_SIZES = (16384, 4096, 8192, 32768, 65536, 1024, 2048, 512)
Key = Any  # a rowid, or a primary key tuple


@dataclass
class TableShape:
    """How one table's rows are laid out in its records."""

    name: str
    root: int
    columns: list[str]  # in record order
    types: list[str]  # declared types, upper case, in record order
    rowid: bool  # a rowid table (else WITHOUT ROWID: an index b-tree, primary key columns first)
    alias: int | None  # the INTEGER PRIMARY KEY column, stored as NULL in the record
    key_len: int = 0  # WITHOUT ROWID: how many leading columns make the key


@dataclass
class Salvage:
    tables: dict[str, dict[Key, dict[str, Any]]] = field(default_factory=dict)
    pages: int = 0
    bad_pages: int = 0  # pages a walk reached that did not parse
    damaged: dict[str, int] = field(default_factory=dict)  # table -> its pages that could not be read
    orphans: int = 0  # leaves read without their parent, matched to a table by shape
    header_guessed: bool = False
    schema_read: bool = False


class _File:
    """The file's pages, with a ``-wal``'s committed frames over them."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        head = self.data[:100]
        self.header_guessed = len(head) < 100 or not head.startswith(MAGIC)
        size = int.from_bytes(head[16:18], "big") if not self.header_guessed else 0
        size = 65536 if size == 1 else size
        if size < 512 or size & (size - 1):
            size = _guess_page_size(self.data)
            self.header_guessed = True
        self.page_size = size
        self.usable = size - (head[20] if not self.header_guessed else 0)
        self.wal = _wal_pages(Path(str(path) + "-wal"), size)
        self.count = max([len(self.data) // size, *self.wal])

    def page(self, n: int) -> bytes | None:
        if n in self.wal:
            return self.wal[n]
        if n < 1 or n * self.page_size > len(self.data):
            return None
        return self.data[(n - 1) * self.page_size : n * self.page_size]

    def freelist(self) -> set[int]:
        """Pages SQLite freed: read as far as the chain can be followed."""
        free: set[int] = set()
        first = self.page(1)
        trunk = int.from_bytes(first[32:36], "big") if first and not self.header_guessed else 0
        while trunk and trunk not in free:
            free.add(trunk)
            page = self.page(trunk)
            if page is None:
                break
            count = min(int.from_bytes(page[4:8], "big"), (self.usable - 8) // 4)
            free.update(int.from_bytes(page[8 + 4 * i : 12 + 4 * i], "big") for i in range(count))
            trunk = int.from_bytes(page[:4], "big")
        return free


def _wal_pages(wal: Path, page_size: int) -> dict[int, bytes]:
    """The newest committed image of each page in a ``-wal`` (frames after the last commit are ignored)."""
    try:
        data = wal.read_bytes()
    except OSError:
        return {}
    if len(data) < 32 or int.from_bytes(data[:4], "big") not in WAL_MAGIC:
        return {}
    if int.from_bytes(data[8:12], "big") != page_size:
        return {}
    salts = data[16:24]
    committed: dict[int, bytes] = {}
    pending: dict[int, bytes] = {}
    at = 32
    while at + 24 + page_size <= len(data):
        frame = data[at : at + 24]
        if frame[8:16] != salts:
            break
        pending[int.from_bytes(frame[:4], "big")] = data[at + 24 : at + 24 + page_size]
        if int.from_bytes(frame[4:8], "big"):  # a commit frame
            committed.update(pending)
            pending = {}
        at += 24 + page_size
    return committed


def _guess_page_size(data: bytes) -> int:
    """The page size under which the largest share of pages have a consistent b-tree page header (for a
    file whose header is gone)."""

    def looks_like_page(at: int, size: int) -> bool:
        kind, count = data[at], int.from_bytes(data[at + 3 : at + 5], "big")
        if kind not in (2, 5, 10, 13):
            return False
        hdr = 12 if kind in (2, 5) else 8
        content = int.from_bytes(data[at + 5 : at + 7], "big") or 65536
        first = int.from_bytes(data[at + hdr : at + hdr + 2], "big") if count else content
        return hdr + 2 * count <= min(content, first) and max(content, first) <= size and data[at + 7] <= 60

    def score(size: int) -> float:
        starts = range(size, len(data) - size + 1, size)
        return sum(looks_like_page(at, size) for at in starts) / max(len(starts), 1)

    scores = {size: score(size) for size in GUESSED_PAGE_SIZES}
    best = max(scores.values())  # a multiple of the true size scores as well (it sees every other page): the
    return min(size for size, got in scores.items() if got >= 0.9 * best)  # smallest that scores near the best


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(8):
        byte = buf[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | buf[at + 8], at + 9


def _record(payload: bytes) -> list[Any]:
    """Decode one record (raises on a malformed one)."""
    head_len, at = _varint(payload, 0)
    if head_len > len(payload):
        raise ValueError("record header past its payload")
    types = []
    while at < head_len:
        t, at = _varint(payload, at)
        types.append(t)
    body = head_len
    values: list[Any] = []
    for t in types:
        if t == 0:
            values.append(None)
        elif 1 <= t <= 6:
            width = (1, 2, 3, 4, 6, 8)[t - 1]
            values.append(int.from_bytes(payload[body : body + width], "big", signed=True))
            body += width
        elif t == 7:
            values.append(struct.unpack(">d", payload[body : body + 8])[0])
            body += 8
        elif t in (8, 9):
            values.append(t - 8)
        elif t >= 12:
            width = (t - 12) // 2
            chunk = payload[body : body + width]
            values.append(chunk.decode("utf-8") if t % 2 else chunk)
            body += width
        else:
            raise ValueError("reserved serial type")
        if body > len(payload):
            raise ValueError("record body past its payload")
    return values


class _Reader:
    def __init__(self, file: _File) -> None:
        self.f = file
        self.free = file.freelist()
        self.seen: set[int] = set()
        self.bad = 0

    def _payload(self, page: bytes, at: int, size: int, index: bool) -> bytes:
        """A cell's payload: its local part, then its overflow chain."""
        u = self.f.usable
        most = (u - 12) * 64 // 255 - 23 if index else u - 35
        if size <= most:
            return page[at : at + size]
        least = (u - 12) * 32 // 255 - 23
        local = least + (size - least) % (u - 4)
        local = local if local <= most else least
        out = bytearray(page[at : at + local])
        nxt = int.from_bytes(page[at + local : at + local + 4], "big")
        hops = 0
        while len(out) < size:
            over = self.f.page(nxt) if nxt not in self.free else None
            hops += 1
            if over is None or hops > self.f.count:
                raise ValueError("overflow chain broken")
            out += over[4:u]
            nxt = int.from_bytes(over[:4], "big")
        return bytes(out[:size])

    def cells(self, n: int) -> tuple[int, list[int], list[tuple[Key, list[Any]]]] | None:
        """(page type, child pages, (rowid or None, record) of each readable cell), None for a page that
        is not a b-tree page."""
        page = self.f.page(n)
        if page is None or n in self.free:
            return None
        base = 100 if n == 1 else 0
        kind = page[base]
        if kind not in (TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR):
            return None
        interior = kind in (TABLE_INTERIOR, INDEX_INTERIOR)
        hdr = base + (12 if interior else 8)
        count = int.from_bytes(page[base + 3 : base + 5], "big")
        if hdr + 2 * count > self.f.usable:
            return None
        children = [int.from_bytes(page[base + 8 : base + 12], "big")] if interior else []
        out: list[tuple[Key, list[Any]]] = []
        for i in range(count):
            at = int.from_bytes(page[hdr + 2 * i : hdr + 2 * i + 2], "big")
            if not hdr <= at < self.f.usable:
                continue
            try:
                if interior:
                    children.append(int.from_bytes(page[at : at + 4], "big"))
                    at += 4
                if kind == TABLE_INTERIOR:
                    continue  # only a rowid to divide by
                size, at = _varint(page, at)
                rowid = None
                if kind == TABLE_LEAF:
                    rowid, at = _varint(page, at)
                    rowid = rowid - (1 << 64) if rowid >= 1 << 63 else rowid
                out.append((rowid, _record(self._payload(page, at, size, kind != TABLE_LEAF))))
            except (IndexError, ValueError, UnicodeDecodeError, struct.error):
                continue  # one damaged cell: the others on the page are still read
        return kind, [c for c in children if c >= 1], out

    def walk(self, root: int, rowid: bool) -> Iterator[tuple[Key, list[Any]]]:
        """Every readable cell of the b-tree at ``root``; pages that do not parse are counted and skipped."""
        todo = [root]
        while todo:
            n = todo.pop()
            if n in self.seen:
                continue
            self.seen.add(n)
            got = self.cells(n)
            wanted = (TABLE_LEAF, TABLE_INTERIOR) if rowid else (INDEX_LEAF, INDEX_INTERIOR)
            if got is None or got[0] not in wanted:
                self.bad += 1
                continue
            todo.extend(got[1])
            yield from got[2]


def _shape(name: str, root: int, sql: str) -> TableShape | None:
    """The record layout of a table, from its CREATE statement (run on an empty in-memory database)."""
    mem = apsw.Connection(":memory:")
    try:
        mem.execute(sql)
        info = list(mem.execute(f'PRAGMA table_info("{name}")'))
        without = bool(mem.execute("SELECT wr FROM pragma_table_list WHERE name = ?", (name,)).fetchall()[0][0])
    except (apsw.Error, IndexError):
        return None
    finally:
        mem.close()
    cols = [(r[1], (r[2] or "").upper(), r[5]) for r in info]
    if without:
        keys = sorted((c for c in cols if c[2]), key=lambda c: c[2])
        ordered = keys + [c for c in cols if not c[2]]
        return TableShape(name, root, [c[0] for c in ordered], [c[1] for c in ordered], False, None, len(keys))
    pks = [i for i, c in enumerate(cols) if c[2]]
    alias = pks[0] if len(pks) == 1 and cols[pks[0]][1] == "INTEGER" else None
    return TableShape(name, root, [c[0] for c in cols], [c[1] for c in cols], True, alias)


def _row(shape: TableShape, rowid: Key, values: list[Any]) -> tuple[Key, dict[str, Any]] | None:
    if len(values) > len(shape.columns) or (not shape.rowid and len(values) < shape.key_len):
        return None
    row = dict(zip(shape.columns, values, strict=False))  # a shorter record: columns added since take defaults
    if shape.alias is not None:
        row[shape.columns[shape.alias]] = rowid
    key = rowid if shape.rowid else tuple(values[: shape.key_len])
    return key, row


def _fits(shape: TableShape, values: list[Any], exact: bool) -> bool:
    """Whether a record could be a row of ``shape``: as many columns (or, not ``exact``, fewer: a row
    written before columns were added), each value of its column's declared type."""
    if not shape.rowid or len(values) > len(shape.columns) or (exact and len(values) != len(shape.columns)):
        return False
    kinds = {"INTEGER": (int,), "TEXT": (str,), "BLOB": (bytes,), "REAL": (float, int)}
    for i, (value, declared) in enumerate(zip(values, shape.types, strict=False)):
        if value is None or declared not in kinds:
            continue
        if i == shape.alias or not isinstance(value, kinds[declared]):
            return False
    return True


def salvage(path: str | Path, tables: set[str] | None = None, fallback_schema: str | Path | None = None) -> Salvage:
    """Every row of ``tables`` (default all) that can still be read from the file at ``path``.
    ``fallback_schema``: a healthy database whose table shapes stand in when page 1 is unreadable
    (then only orphan leaves can be matched, by shape)."""
    file = _File(Path(path))
    reader = _Reader(file)
    result = Salvage(pages=file.count, header_guessed=file.header_guessed)
    shapes: list[TableShape] = []
    for _rowid, rec in reader.walk(1, rowid=True):
        if len(rec) >= 5 and rec[0] == "table" and isinstance(rec[3], int) and isinstance(rec[4], str):
            shape = _shape(str(rec[1]), rec[3], rec[4])
            if shape is not None:
                shapes.append(shape)
    result.schema_read = bool(shapes)
    if not shapes and fallback_schema is not None:
        conn = apsw.Connection(str(fallback_schema), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            named = conn.execute("SELECT name, sql FROM sqlite_schema WHERE type = 'table' AND sql IS NOT NULL")
            shapes = [s for n, sql in named.fetchall() if (s := _shape(str(n), 0, str(sql))) is not None]
        finally:
            conn.close()
    for shape in shapes:
        rows = result.tables.setdefault(shape.name, {})
        if shape.root < 1 or (tables is not None and shape.name not in tables):
            continue
        before = reader.bad
        for rowid, rec in reader.walk(shape.root, shape.rowid):
            found = _row(shape, rowid, rec)
            if found is not None:
                rows.setdefault(*found)
        if reader.bad > before:
            result.damaged[shape.name] = reader.bad - before
    _orphans(reader, shapes, result, tables)
    result.bad_pages = reader.bad
    return result


def _orphans(reader: _Reader, shapes: list[TableShape], result: Salvage, tables: set[str] | None) -> None:
    """Table leaves no walk reached, each given to the one table all its records fit (if just one does).
    Index leaves are not: an index entry can look just like a ``WITHOUT ROWID`` row."""
    for n in range(2, reader.f.count + 1):
        if n in reader.seen:
            continue
        got = reader.cells(n)
        if got is None or got[0] != TABLE_LEAF or not got[2]:
            continue
        owners = [s for s in shapes if all(_fits(s, rec, True) for _rowid, rec in got[2])]
        if not owners:  # rows older than a column added since
            owners = [s for s in shapes if all(_fits(s, rec, False) for _rowid, rec in got[2])]
        if len(owners) != 1 or (tables is not None and owners[0].name not in tables):
            continue
        result.orphans += 1
        rows = result.tables.setdefault(owners[0].name, {})
        for rowid, rec in got[2]:
            found = _row(owners[0], rowid, rec)
            if found is not None:
                rows.setdefault(*found)
