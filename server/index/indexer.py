"""Keep the index in step with the files: scan, compare with the manifest, parse what changed.

The files are the truth and indexing only reads them. The manifest is the notes row itself
(mtime, size, content hash), so an unchanged vault costs one ``stat`` per file. A note is
removed only when its file is positively gone: a folder or file that cannot be read keeps
its notes. Rows are updated in place, so note ids and DB-only state (hidden stamps, and
everything keyed by note id) survive a full reindex; a new path whose content hash equals a
vanished note's is a rename and keeps that note's id.
"""

from __future__ import annotations

import gc
import hashlib
import json
import operator
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import apsw

from server.store.db import write_tx
from server.vault.parser import ParsedNote, parse_note
from server.vault.registry import Vault, list_vaults

Progress = Callable[[int, int], None]
PARALLEL_THRESHOLD = 400  # below this many files to parse, worker start-up costs more than it saves
BATCH = 100


@dataclass
class IndexReport:
    vault: str
    scanned: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    renamed: int = 0
    flagged: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.deleted + self.renamed


@dataclass
class FileRecord:
    """What a worker learns from one file (picklable, no DB access)."""

    path: str
    mtime_ns: int
    size: int
    content_hash: str
    error: str | None = None
    # ready-to-insert rows, prepared in the worker so the writing process only runs SQL
    values: dict | None = None  # notes columns (see _UPDATE_COLS) except indexed_at
    tags: list[str] = field(default_factory=list)
    keys: list[tuple[str, int]] = field(default_factory=list)  # (key, kind)
    links: list[tuple] = field(default_factory=list)  # links columns after (src_rid)
    headings: list[tuple] = field(default_factory=list)  # headings columns after (rid)
    unchanged: bool = False  # same bytes as indexed (see read_record's known_hash): nothing parsed

    @property
    def flagged(self) -> bool:
        return bool(self.values and self.values["fm_error"])


def new_note_id() -> str:
    return "n" + secrets.token_hex(6)


def title_of(relpath: str) -> str:
    name = relpath.rsplit("/", 1)[-1]
    return name[:-3] if name.lower().endswith(".md") else name


def scan(root: Path) -> tuple[dict[str, tuple[int, int]], list[str], list[str]]:
    """Walk a vault: ({relpath: (mtime_ns, size)}, unreadable folder prefixes, errors).

    Skips dot-folders and dot-files, non-Markdown files, symlinked folders, and symlinked
    files whose target leaves the vault.
    """
    root_real = os.path.realpath(root)
    files: dict[str, tuple[int, int]] = {}
    unreadable: list[str] = []
    errors: list[str] = []
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        try:
            with os.scandir(os.path.join(root, rel_dir) if rel_dir else root) as it:
                entries = list(it)
        except OSError as exc:
            unreadable.append(rel_dir)
            errors.append(f"{rel_dir or '.'}: cannot read folder ({exc.strerror})")
            continue
        for entry in entries:
            if entry.name.startswith("."):
                continue
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_symlink():
                    if entry.is_dir() or not entry.name.lower().endswith(".md"):
                        continue
                    target = os.path.realpath(entry.path)
                    if os.path.commonpath([root_real, target]) != root_real:
                        continue
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif entry.name.lower().endswith(".md") and entry.is_file():
                    st = entry.stat()
                    files[rel] = (st.st_mtime_ns, st.st_size)
            except OSError as exc:
                unreadable.append(rel)
                errors.append(f"{rel}: cannot stat ({exc.strerror})")
    return files, unreadable, errors


def read_record(root: str, relpath: str, mtime_ns: int, size: int, known_hash: str | None = None) -> FileRecord:
    """Read, hash and parse one file; never raises. A file whose hash is ``known_hash`` is not
    parsed again: the record comes back with ``unchanged`` set and no rows."""
    full = os.path.join(root, relpath)
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return FileRecord(relpath, mtime_ns, size, "", f"{relpath}: cannot read ({exc.strerror})")
    return record_of_bytes(relpath, mtime_ns, data, known_hash)


def record_of_bytes(relpath: str, mtime_ns: int, data: bytes, known_hash: str | None = None) -> FileRecord:
    """The index record of a file's bytes (see ``read_record``); also for bytes kms is writing."""
    digest = hashlib.sha256(data).hexdigest()
    if digest == known_hash:
        return FileRecord(relpath, mtime_ns, len(data), digest, unchanged=True)
    try:
        text = data.decode("utf-8")
        bad_encoding = None
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")
        bad_encoding = "not valid UTF-8; undecodable bytes replaced in the index"
    parsed = parse_note(text, title_of(relpath))
    if bad_encoding:
        parsed.fm_error = f"{parsed.fm_error}; {bad_encoding}" if parsed.fm_error else bad_encoding
    rec = FileRecord(relpath, mtime_ns, len(data), digest)
    rec.values = _note_values(rec, parsed)
    rec.tags = parsed.tags
    rec.keys = _note_keys(relpath, parsed)
    rec.links = [
        (i, ln.target, ln.target_key, ln.heading, ln.block, ln.alias, ln.embed, ln.in_frontmatter, ln.line)
        for i, ln in enumerate(parsed.links)
    ]
    rec.headings = [(i, h.level, h.text, h.line) for i, h in enumerate(parsed.headings)]
    return rec


@contextmanager
def gc_paused() -> Iterator[None]:
    """Bulk indexing makes millions of small objects and no reference cycles; the cycle collector
    would walk the growing heap again and again (unpickling the workers' records ran 4x slower
    with it on). Process-wide, so only the outermost caller turns it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _read_batch(root: str, items: list[tuple[str, int, int]]) -> list[FileRecord]:
    with gc_paused():
        return [read_record(root, p, m, s) for p, m, s in items]


def _read_all(root: Path, items: list[tuple[str, int, int]], progress: Progress | None) -> Iterable[FileRecord]:
    total = len(items)
    done = 0
    workers = min(os.cpu_count() or 1, 4)  # the writer (this process) mostly waits on SQLite, not the GIL
    if total < PARALLEL_THRESHOLD or workers < 1:
        for p, m, s in items:
            yield read_record(str(root), p, m, s)
            done += 1
            if progress and done % 100 == 0:
                progress(done, total)
    else:
        import multiprocessing

        batches = [items[i : i + BATCH] for i in range(0, total, BATCH)]
        # fork is cheap but unsafe in a process with other threads (locks held by them)
        ctx = multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            for batch in pool.map(_read_batch, [str(root)] * len(batches), batches):
                yield from batch
                done += len(batch)
                if progress:
                    progress(done, total)
    if progress:
        progress(total, total)


def _note_keys(relpath: str, parsed: ParsedNote) -> list[tuple[str, int]]:
    path_key = relpath[:-3].lower() if relpath.lower().endswith(".md") else relpath.lower()
    keys = {(path_key, 1), (parsed.title.lower(), 2)}
    keys.update((a.lower(), 3) for a in parsed.aliases)
    return sorted(keys)


def _children(rec: FileRecord, rid: int, vault_id: int) -> tuple[list, list, list, list]:
    return (
        [(rid, t) for t in rec.tags],
        [(k, vault_id, rid, kind) for k, kind in rec.keys],
        [(rid, *ln) for ln in rec.links],
        [(rid, *h) for h in rec.headings],
    )


def _insert_children(conn: apsw.Connection, tags: list, keys: list, links: list, heads: list) -> None:
    conn.executemany("INSERT OR IGNORE INTO note_tags VALUES (?, ?)", tags)
    conn.executemany("INSERT OR IGNORE INTO note_keys VALUES (?, ?, ?, ?)", keys)
    conn.executemany("INSERT INTO links VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL)", links)
    conn.executemany("INSERT INTO headings VALUES (?, ?, ?, ?, ?)", heads)


# Each child table: its note column and the columns ``_children`` fills, in order.
_CHILD_TABLES = (
    ("note_tags", "rid", "rid, tag"),
    ("note_keys", "rid", "key, vault_id, rid, kind"),
    ("links", "src_rid", "src_rid, ord, target, target_key, heading, block, alias, embed, in_frontmatter, line"),
    ("headings", "rid", "rid, ord, level, text, line"),
)


def _write_children(conn: apsw.Connection, rid: int, vault_id: int, rec: FileRecord) -> tuple[set[str], bool]:
    """Bring the note's tags, keys, links and headings in line with ``rec``, rewriting only the tables
    whose rows changed (an edit to a note's text usually changes none: far fewer pages to commit).

    Returns the keys the note gained or lost (links naming them must be re-resolved) and whether its
    own links changed (they must be resolved again: rewritten rows start unresolved)."""
    new_rows = _children(rec, rid, vault_id)
    changed: list[bool] = []
    old_keys: set[tuple] = set()
    for (table, col, cols), rows in zip(_CHILD_TABLES, new_rows, strict=True):
        old = [tuple(r) for r in conn.execute(f"SELECT {cols} FROM {table} WHERE {col} = ? ORDER BY {cols}", (rid,))]
        if table == "note_keys":
            old_keys = set(old)
        same = old == sorted(set(rows) if table in ("note_tags", "note_keys") else rows)
        if not same:
            conn.execute(f"DELETE FROM {table} WHERE {col} = ?", (rid,))
        changed.append(not same)
    _insert_children(conn, *(rows if c else [] for rows, c in zip(new_rows, changed, strict=True)))
    return {k[0] for k in old_keys ^ set(new_rows[1])}, changed[2]


def _note_values(rec: FileRecord, p: ParsedNote) -> dict:
    folder = rec.path.rsplit("/", 1)[0] if "/" in rec.path else ""
    s = p.summary
    return {
        "path": rec.path,
        "folder": folder,
        "title": p.title,
        "body": p.body,
        "tags": " ".join(p.tags),
        "aliases": json.dumps(p.aliases) if p.aliases else None,
        "frontmatter": json.dumps(p.frontmatter, ensure_ascii=False, default=str)
        if p.frontmatter is not None
        else None,
        "fm_error": p.fm_error,
        "summary_state": s.state if s else "none",
        "summary_hash": s.hash if s else None,
        "summary_text": s.text if s else None,
        "content_hash": rec.content_hash,
        "size_bytes": rec.size,
        "token_estimate": max(1, rec.size // 4) if rec.size else 0,
        "mtime_ns": rec.mtime_ns,
        "updated_at": rec.mtime_ns / 1e9,
    }


_UPDATE_COLS = (
    "path, folder, title, body, tags, aliases, frontmatter, fm_error, summary_state, summary_hash, summary_text, "
    "content_hash, size_bytes, token_estimate, mtime_ns, updated_at, indexed_at"
).split(", ")
_update_values = operator.itemgetter(*_UPDATE_COLS)  # a values dict -> its _UPDATE_COLS, in order
_UPDATE_SQL = "UPDATE notes SET " + ", ".join(f"{c} = :{c}" for c in _UPDATE_COLS) + " WHERE rid = :rid"
_INSERT_SQL = (
    "INSERT INTO notes(id, vault_id, created_at, "
    + ", ".join(_UPDATE_COLS)
    + ") VALUES (:id, :vault_id, :created_at, "
    + ", ".join(f":{c}" for c in _UPDATE_COLS)
    + ")"
)


_FTS_INSERT = "INSERT INTO notes_fts(rowid, title, body, tags) VALUES (?, ?, ?, ?)"
_FTS_DELETE = (
    "INSERT INTO notes_fts(notes_fts, rowid, title, body, tags) "
    "SELECT 'delete', rid, title, body, tags FROM notes WHERE rid = ?"
)


def _update_note(conn: apsw.Connection, rid: int, values: dict) -> None:
    conn.execute(_FTS_DELETE, (rid,))
    conn.execute(_UPDATE_SQL, {**values, "rid": rid})
    conn.execute(_FTS_INSERT, (rid, values["title"], values["body"], values["tags"]))


def _insert_note(conn: apsw.Connection, values: dict) -> int:
    conn.execute(_INSERT_SQL, values)  # not RETURNING: an open RETURNING cursor halves insert speed
    rid = conn.last_insert_rowid()
    conn.execute(_FTS_INSERT, (rid, values["title"], values["body"], values["tags"]))
    return rid


class NewNotes:
    """New notes are inserted in batches: one ``executemany`` per table instead of a handful of
    statements per note is what keeps a cold index close to a bare FTS5 load."""

    SIZE = 256
    _COLS = ("rid", "id", "vault_id", "created_at", *_UPDATE_COLS)
    _SQL = f"INSERT INTO notes({', '.join(_COLS)}) VALUES ({', '.join('?' * len(_COLS))})"

    def __init__(self, conn: apsw.Connection, vault_id: int) -> None:
        self.conn = conn
        self.vault_id = vault_id
        self.pending: list[tuple[FileRecord, dict]] = []

    def add(self, rec: FileRecord, values: dict) -> list[tuple[int, FileRecord]]:
        self.pending.append((rec, values))
        return self.flush() if len(self.pending) >= self.SIZE else []

    def flush(self) -> list[tuple[int, FileRecord]]:
        """Insert what is pending (we hold the write lock, so max(rid) is ours to extend)."""
        if not self.pending:
            return []
        conn, vid = self.conn, self.vault_id
        first = (next(conn.execute("SELECT max(rid) FROM notes"))[0] or 0) + 1
        pending, self.pending = self.pending, []
        conn.executemany(
            self._SQL,
            [(first + i, new_note_id(), vid, v["indexed_at"], *_update_values(v))
             for i, (_rec, v) in enumerate(pending)],
        )
        conn.executemany(_FTS_INSERT, [(first + i, v["title"], v["body"], v["tags"])
                                       for i, (_rec, v) in enumerate(pending)])
        tags: list = []
        keys: list = []
        links: list = []
        heads: list = []
        for i, (rec, _v) in enumerate(pending):
            rid = first + i
            tags += [(rid, t) for t in rec.tags]
            keys += [(k, vid, rid, kind) for k, kind in rec.keys]
            links += [(rid, *ln) for ln in rec.links]
            heads += [(rid, *h) for h in rec.headings]
        _insert_children(conn, tags, keys, links, heads)
        return [(first + i, rec) for i, (rec, _v) in enumerate(pending)]


def delete_note_row(conn: apsw.Connection, rid: int) -> None:
    conn.execute(_FTS_DELETE, (rid,))
    conn.execute("DELETE FROM notes WHERE rid = ?", (rid,))


def _affected_keys(conn: apsw.Connection, rid: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM note_keys WHERE rid = ?", (rid,))]


def resolve_links(conn: apsw.Connection, keys: set[str] | None, src_rids: set[int] | None) -> None:
    """(Re)resolve links: all of them, or those unresolved, aimed at ``keys`` or from ``src_rids``.

    A link prefers a note in its own vault, then a path match, then a title, then an alias.
    """
    target = """
        UPDATE links SET dst_rid = (
            SELECT k.rid FROM note_keys k WHERE k.key = links.target_key
            ORDER BY (k.vault_id = (SELECT vault_id FROM notes n WHERE n.rid = links.src_rid)) DESC, k.kind, k.rid
            LIMIT 1)
    """
    if keys is None and src_rids is None:
        conn.execute(target)
        return
    if not keys and not src_rids:
        return  # nothing a link could resolve to has changed
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _affected_keys (key TEXT PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _affected_src (rid INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM _affected_keys")
    conn.execute("DELETE FROM _affected_src")
    conn.executemany("INSERT OR IGNORE INTO _affected_keys VALUES (?)", [(k,) for k in keys or ()])
    conn.executemany("INSERT OR IGNORE INTO _affected_src VALUES (?)", [(r,) for r in src_rids or ()])
    # Two indexed passes, not one OR: a link can only change target if its source changed or a note
    # that gained or lost one of the keys it names changed (this also resolves forward links).
    conn.execute(target + " WHERE src_rid IN (SELECT rid FROM temp._affected_src)")
    conn.execute(target + " WHERE target_key IN (SELECT key FROM temp._affected_keys)")


def _manifest(conn: apsw.Connection, vault_id: int) -> dict[str, tuple[int, int, int, str]]:
    return {
        path: (rid, mtime_ns, size, chash)
        for rid, path, mtime_ns, size, chash in conn.execute(
            "SELECT rid, path, mtime_ns, size_bytes, content_hash FROM notes WHERE vault_id = ?", (vault_id,)
        )
    }


def index_vault(
    conn: apsw.Connection, vault: Vault, *, full: bool = False, progress: Progress | None = None
) -> IndexReport:
    """Bring one vault's index up to date with its files (``full`` re-parses every file)."""
    started = time.perf_counter()
    report = IndexReport(vault=vault.name)
    if not vault.root.is_dir():
        report.errors.append(f"vault folder {vault.root} is missing or unreadable; index left as it was")
        return report
    files, unreadable, errors = scan(vault.root)
    report.errors.extend(errors)
    report.scanned = len(files)
    manifest = _manifest(conn, vault.id)
    todo: list[tuple[str, int, int]] = []
    for path, (mtime_ns, size) in files.items():
        known = manifest.get(path)
        if known and not full and known[1] == mtime_ns and known[2] == size:
            report.unchanged += 1
        else:
            todo.append((path, mtime_ns, size))

    gone: dict[str, tuple[int, str]] = {}  # path -> (rid, hash) of notes whose file is positively gone
    for path, (rid, _m, _s, chash) in manifest.items():
        if path in files:
            continue
        if any(u == "" or path == u or path.startswith(u + "/") for u in unreadable):
            continue
        if os.path.lexists(os.path.join(vault.root, path)):
            continue  # still there but not indexable now (e.g. permissions): keep it
        gone[path] = (rid, chash)
    if not todo and not gone:
        if not full:
            with write_tx(conn):
                conn.execute("UPDATE vaults SET last_indexed_at = ? WHERE id = ?", (time.time(), vault.id))
        report.seconds = time.perf_counter() - started
        return report

    keys: set[str] = set()
    srcs: set[int] = set()
    now = time.time()
    cold = not manifest
    with write_tx(conn), gc_paused():
        # re-read under the write lock: another process's watcher may have added, changed or
        # removed rows since the scan (inserting a path twice would break UNIQUE(vault_id, path))
        current = _manifest(conn, vault.id)
        if current != manifest:
            gone = {p: g for p, g in gone.items() if p in current and current[p][0] == g[0]}
            manifest = current
        by_hash: dict[str, list[str]] = {}
        for path, (_rid, chash) in gone.items():
            by_hash.setdefault(chash, []).append(path)
        new_notes = NewNotes(conn, vault.id)

        def inserted(done: list[tuple[int, FileRecord]]) -> None:
            if cold:
                return  # every link is resolved at the end anyway
            for rid, rec in done:
                keys.update(k for k, _kind in rec.keys)
                srcs.add(rid)

        for rec in _read_all(vault.root, todo, progress):
            if rec.error or rec.values is None:
                report.errors.append(rec.error or f"{rec.path}: unreadable")
                continue
            known = manifest.get(rec.path)
            if known and known[3] == rec.content_hash and not full:
                conn.execute(
                    "UPDATE notes SET mtime_ns = ?, updated_at = ? WHERE rid = ?",
                    (rec.mtime_ns, rec.mtime_ns / 1e9, known[0]),
                )
                report.unchanged += 1
                continue
            values = rec.values  # the record's own: filled in place
            values["indexed_at"] = now
            if rec.flagged:
                report.flagged += 1
            if known:
                rid = known[0]
                _update_note(conn, rid, values)
                report.updated += 1
            elif by_hash.get(rec.content_hash):
                old_path = by_hash[rec.content_hash].pop(0)
                rid = gone.pop(old_path)[0]
                _update_note(conn, rid, values)
                report.renamed += 1
            else:
                report.added += 1
                inserted(new_notes.add(rec, values))
                continue
            changed_keys, links_changed = _write_children(conn, rid, vault.id, rec)
            keys.update(changed_keys)
            if links_changed:
                srcs.add(rid)
        inserted(new_notes.flush())
        for _path, (rid, _h) in gone.items():
            keys.update(_affected_keys(conn, rid))
            delete_note_row(conn, rid)
            report.deleted += 1
        if full:
            conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('optimize')")
        resolve_links(conn, None if cold or full else keys, None if cold or full else srcs)
        conn.execute("UPDATE vaults SET last_indexed_at = ? WHERE id = ?", (time.time(), vault.id))
    report.seconds = time.perf_counter() - started
    return report


def index_all(
    conn: apsw.Connection, *, full: bool = False, vault: str | None = None, progress: Progress | None = None
) -> list[IndexReport]:
    vaults = [v for v in list_vaults(conn) if vault is None or v.name == vault]
    return [index_vault(conn, v, full=full, progress=progress) for v in vaults]


def reindex_file(conn: apsw.Connection, vault: Vault, relpath: str, written: FileRecord | None = None) -> str | None:
    """Index one file now (after a write, or a watcher event); return its note id, None if gone.

    ``written``: the record of the bytes kms itself just renamed into place (``record_of_bytes``,
    built while they were being fsynced), so the file is not read and parsed a second time.
    """
    st = None
    if written is None:
        full = vault.root / relpath
        try:
            st = full.stat()
        except FileNotFoundError:
            st = None
        if st is not None and not stat.S_ISREG(st.st_mode):
            return None  # a FIFO or device named *.md: opening it could block forever
        if st is not None:
            # the watcher echoing kms's own write: indexed already, so not even the write lock is taken
            # (taking it would make the next tool call wait for it)
            indexed = conn.execute(
                "SELECT id, mtime_ns, size_bytes, content_hash FROM notes WHERE vault_id = ? AND path = ?",
                (vault.id, relpath),
            ).fetchall()
            if indexed and indexed[0][1:3] == (st.st_mtime_ns, st.st_size):
                same = read_record(str(vault.root), relpath, st.st_mtime_ns, st.st_size, known_hash=indexed[0][3])
                if same.unchanged:  # (a same-size edit within one mtime tick is parsed again under the lock)
                    return indexed[0][0]
    with write_tx(conn):
        # looked up under the write lock: another process (a second server's watcher) may have
        # indexed this path a moment ago, and inserting it twice would violate UNIQUE(vault_id, path)
        row = next(
            iter(conn.execute(
                "SELECT rid, content_hash, mtime_ns, id FROM notes WHERE vault_id = ? AND path = ?", (vault.id, relpath)
            )),
            None,
        )
        if written is None and st is None:
            if row:
                keys = set(_affected_keys(conn, row[0]))
                delete_note_row(conn, row[0])
                resolve_links(conn, keys, set())
            return None
        # a touched file with the same bytes costs a hash, not a parse: only its mtime is followed
        known = row[1] if row else None
        if written is None:
            assert st is not None
            rec = read_record(str(vault.root), relpath, st.st_mtime_ns, st.st_size, known_hash=known)
        elif written.content_hash == known:
            rec = FileRecord(relpath, written.mtime_ns, written.size, written.content_hash, unchanged=True)
        else:
            rec = written
        if rec.unchanged and row:
            if row[2] != rec.mtime_ns:
                conn.execute(
                    "UPDATE notes SET mtime_ns = ?, updated_at = ? WHERE rid = ?",
                    (rec.mtime_ns, rec.mtime_ns / 1e9, row[0]),
                )
            return row[3]
        if rec.error or rec.values is None:
            return None
        values = {**rec.values, "indexed_at": time.time()}
        if row:
            rid = row[0]
            _update_note(conn, rid, values)
        else:
            values.update(id=new_note_id(), vault_id=vault.id, created_at=time.time())
            rid = _insert_note(conn, values)
        keys, links_changed = _write_children(conn, rid, vault.id, rec)
        resolve_links(conn, keys, {rid} if links_changed else set())
        return next(conn.execute("SELECT id FROM notes WHERE rid = ?", (rid,)))[0]
