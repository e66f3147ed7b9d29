"""Reading files into index records: scan a vault, read, hash and parse each file.

Nothing here touches the database: a ``FileRecord`` carries ready-to-insert rows, so the
parsing runs in worker processes on a cold index (``read_all``) and the writing process
(``server.index.writer``) only runs SQL.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import os
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from server.index.properties import property_rows, search_text
from server.index.scripts import has_run
from server.index.scripts import index_tokens as cjk_tokens
from server.store.note_ids import carried_id
from server.vault.birth import birth_time
from server.vault.dialects import OBSIDIAN, Dialect, stem_title
from server.vault.files import is_leftover
from server.vault.paths import is_note_path, name_key, strip_note_suffix

if TYPE_CHECKING:
    from server.vault.parser import ParsedNote

Progress = Callable[[int, int], None]
PARALLEL_THRESHOLD = 400  # below this many files to parse, worker start-up costs more than it saves
BATCH = 100


@dataclass
class FileRecord:
    """What a worker learns from one file (picklable, no DB access)."""

    path: str
    mtime_ns: int
    size: int
    content_hash: str
    error: str | None = None
    # ready-to-insert rows, prepared in the worker so the writing process only runs SQL
    values: dict | None = None  # notes columns (see writer.UPDATE_COLS) except indexed_at
    tags: list[str] = field(default_factory=list)
    keys: list[tuple[str, int]] = field(default_factory=list)  # (key, kind)
    links: list[tuple] = field(default_factory=list)  # links columns after (src_rid)
    headings: list[tuple] = field(default_factory=list)  # headings columns after (rid)
    props: list[tuple] = field(default_factory=list)  # note_props columns after (rid): key, ord, value, num
    unchanged: bool = False  # same bytes as indexed (see read_record's known_hash): nothing parsed
    fm_raw: str | None = None  # the file's start when its frontmatter could not be parsed (privacy rules)
    data: bytes | None = None  # the file's bytes, for its history (``server.index.note_versions``)
    packed: bytes | None = None  # or those bytes compressed by a worker process (``read_all``'s ``history``)

    @property
    def flagged(self) -> bool:
        return bool(self.values and self.values["fm_error"])

    def set_mtime(self, mtime_ns: int) -> None:
        """The file's mtime, once known (bytes parsed before their temp file was made)."""
        old, self.mtime_ns = self.mtime_ns, mtime_ns
        if self.values is not None:
            self.values["mtime_ns"] = mtime_ns
            if self.values.get("updated_at") == old / 1e9:  # from the mtime, not a date the note gives
                self.values["updated_at"] = mtime_ns / 1e9


def title_of(relpath: str) -> str:
    return strip_note_suffix(relpath.rsplit("/", 1)[-1])


def scan(
    root: Path, attachments: list[str] | None = None, symlinks: set[str] | None = None
) -> tuple[dict[str, tuple[int, int]], list[str], list[str]]:
    """Walk a vault: ({relpath: (mtime_ns, size)}, unreadable folder prefixes, errors).

    Skips dot-folders and dot-files, non-Markdown files, symlinked folders, and symlinked
    files whose target leaves the vault. ``attachments``, when given, receives the paths of the
    other files (what ``![[pic.png]]`` may name); ``symlinks`` the notes that are symlinks (the scan
    knows it from its directory entries: ``read_record`` need not ask the file system again).
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
        prefix = f"{rel_dir}/" if rel_dir else ""
        for entry in entries:
            name = entry.name
            if name[0] == ".":
                if name.startswith(".kms-"):  # a temp file left by a killed writer: never indexed, removed
                    with contextlib.suppress(OSError):
                        if is_leftover(name, entry.stat(follow_symlinks=False).st_mtime, time.time()):
                            os.unlink(entry.path)
                continue
            rel = prefix + name
            try:
                if entry.is_symlink():
                    if entry.is_dir() or not is_note_path(name):
                        continue
                    target = os.path.realpath(entry.path)
                    if os.path.commonpath([root_real, target]) != root_real:
                        continue
                    if symlinks is not None:
                        symlinks.add(rel)
                if entry.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif is_note_path(name) and entry.is_file():
                    st = entry.stat()
                    files[rel] = (st.st_mtime_ns, st.st_size)
                elif attachments is not None and not entry.is_symlink() and entry.is_file(follow_symlinks=False):
                    attachments.append(rel)
            except OSError as exc:
                unreadable.append(rel)
                errors.append(f"{rel}: cannot stat ({exc.strerror})")
    return files, unreadable, errors


def read_record(
    root: str,
    relpath: str,
    mtime_ns: int,
    size: int,
    known_hash: str | None = None,
    dialect: Dialect = OBSIDIAN,
    symlink: bool | None = None,
) -> FileRecord:
    """Read, hash and parse one file; never raises. A file whose hash is ``known_hash`` is not
    parsed again: the record comes back with ``unchanged`` set and no rows. ``symlink``: whether the
    file is a symlink, when the caller's scan knows (None: asked here, one ``lstat``)."""
    full = os.path.join(root, relpath)
    try:
        with open(full, "rb") as fh:
            data = fh.read()
    except OSError as exc:
        return FileRecord(relpath, mtime_ns, size, "", f"{relpath}: cannot read ({exc.strerror})")
    rec = record_of_bytes(relpath, mtime_ns, data, known_hash, dialect)
    if rec.values is not None and rec.values.get("created") is None:  # a new note's createdAt (writer.insert)
        born = birth_time(full)
        rec.values["born"] = min(born, mtime_ns / 1e9) if born else mtime_ns / 1e9
    if rec.values is not None and (
        os.path.islink(full) if symlink is None else symlink
    ):  # privacy: it follows its target
        rec.values["link_to"] = os.path.relpath(os.path.realpath(full), os.path.realpath(root)).replace(os.sep, "/")
    return rec


BINARY_SAMPLE = 8_192  # the bytes a file is judged by, as git and grep judge a binary file


def looks_binary(data: bytes, text: str) -> bool:
    """A NUL byte in the first 8 KiB, or undecodable bytes in more than a third of its characters."""
    head = data[:BINARY_SAMPLE]
    if b"\x00" in head:
        return True
    sample = text[:BINARY_SAMPLE]
    return "\ufffd" in sample and sample.count("\ufffd") * 3 > len(sample)


def record_of_bytes(
    relpath: str, mtime_ns: int, data: bytes, known_hash: str | None = None, dialect: Dialect = OBSIDIAN
) -> FileRecord:
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
    if looks_binary(data, text):  # an image or archive named .md: no tags, links or words from its bytes
        text, bad_encoding = "", "a binary file named .md (not text): indexed by its name only"
    stem, names = stem_title(dialect, relpath) if dialect.namespaces else (title_of(relpath), [])
    from server.vault.parser import parse_note  # deferred: a no-change index parses nothing

    parsed = parse_note(text, stem, dialect, relpath)
    if names:
        parsed.names = [*parsed.names, *names]
    if bad_encoding:
        parsed.fm_error = f"{parsed.fm_error}; {bad_encoding}" if parsed.fm_error else bad_encoding
    rec = FileRecord(relpath, mtime_ns, len(data), digest, data=data)
    rec.values = note_values(rec, parsed)
    if parsed.fm_error and parsed.frontmatter is None:
        rec.fm_raw = text[:16_384]
    rec.tags = parsed.tags
    rec.props = property_rows(parsed.frontmatter)
    rec.keys = _note_keys(relpath, parsed)
    rec.links = [
        (
            i,
            ln.target,
            ln.target_key,
            ln.heading,
            ln.block,
            ln.alias,
            ln.embed,
            ln.in_frontmatter,
            ln.line,
            ln.alt_key,
            ln.vault,
        )
        for i, ln in enumerate(parsed.links)
    ]
    rec.headings = [(i, h.level, h.text, h.line) for i, h in enumerate(parsed.headings)]
    return rec


@contextmanager
def gc_paused() -> Iterator[None]:
    """Bulk indexing makes millions of small objects and no reference cycles; the cycle collector
    would walk the growing heap again and again (unpickling the workers' records most of all).
    Process-wide, so only the outermost caller turns it back on."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


# What a worker does with a file's bytes for its history: False drops them (history off), None sends
# them back compressed on their own, bytes: compressed against that seed dictionary, True: sends them back
# as they are (a new vault's first index compresses them after it is searchable, ``server.index.cold``).
Keep = bytes | None | bool


def _read_batch(
    root: str,
    items: list[tuple[str, int, int]],
    dialect: Dialect = OBSIDIAN,
    keep: Keep = False,
    symlinks: Collection[str] | None = None,
) -> list[FileRecord]:
    # deferred: zstandard only for a bulk index that keeps versions; kms hook session-start loads the records
    from server.store.version_blobs import compress

    with gc_paused():
        out = [
            read_record(root, p, m, s, dialect=dialect, symlink=None if symlinks is None else p in symlinks)
            for p, m, s in items
        ]
        if keep is True:
            return out
        for rec in out:  # the bytes go back compressed (a third of them), and the workers compress in parallel
            if rec.data is not None and keep is not False:
                rec.packed = compress(rec.data, keep if isinstance(keep, bytes) else None)
            rec.data = None
        return out


def read_all(
    root: Path,
    items: list[tuple[str, int, int]],
    progress: Progress | None,
    dialect: Dialect = OBSIDIAN,
    keep: Keep = False,
    symlinks: Collection[str] | None = None,
) -> Iterable[FileRecord]:
    """Read and parse ``items``; ``keep``: what the worker processes do with the bytes for history
    (``Keep``; read in this process, the records keep their bytes); ``symlinks``: which of them are
    symlinks, as the scan found (None: each file is asked)."""
    total = len(items)
    done = 0
    workers = min(os.cpu_count() or 1, 4)  # the writer (this process) mostly waits on SQLite, not the GIL
    if total < PARALLEL_THRESHOLD or workers < 1:
        for p, m, s in items:
            yield read_record(str(root), p, m, s, dialect=dialect, symlink=None if symlinks is None else p in symlinks)
            done += 1
            if progress and done % 100 == 0:
                progress(done, total)
    else:
        # deferred: a process pool only for a bulk index; the write path and the dashboard import this module
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor

        batches = [items[i : i + BATCH] for i in range(0, total, BATCH)]
        links = [None if symlinks is None else {p for p, _m, _s in b if p in symlinks} for b in batches]
        # fork is cheap but unsafe in a process with other threads (locks held by them)
        ctx = multiprocessing.get_context("fork" if threading.active_count() == 1 else "spawn")
        with ProcessPoolExecutor(max_workers=workers, mp_context=ctx) as pool:
            n = len(batches)
            for batch in pool.map(_read_batch, [str(root)] * n, batches, [dialect] * n, [keep] * n, links):
                yield from batch
                done += len(batch)
                if progress:
                    progress(done, total)
    if progress:
        progress(total, total)


def _note_keys(relpath: str, parsed: ParsedNote) -> list[tuple[str, int]]:
    """What a link may name the note by: 1 its path, 2 its title and the file stem, 3 an alias,
    4 a shorter path ending (``[[folder/Note]]`` for ``a/folder/Note.md``), 5 the id its tool gave it,
    6 a block it holds (Logseq's ``((uuid))``: the key is written so, and no name can look like it)."""
    path_key = name_key(strip_note_suffix(relpath))
    keys = {(path_key, 1), (name_key(parsed.title), 2)}
    keys.update((name_key(n), 2) for n in parsed.names)
    keys.update((name_key(a), 3) for a in parsed.aliases)
    if path_key.count("/") > 1:
        parts = path_key.split("/")
        keys.update(("/".join(parts[i:]), 4) for i in range(1, len(parts) - 1))
    if parsed.note_id:
        keys.add((name_key(parsed.note_id), 5))
    keys.update((f"(({b}))", 6) for b in parsed.block_ids)
    return sorted(keys)


def estimate_tokens(size_bytes: int) -> int:
    """The token estimate agents are given (``tokenEstimate``): a quarter of the UTF-8 bytes."""
    return max(1, size_bytes // 4) if size_bytes else 0


_FM_JSON = json.JSONEncoder(ensure_ascii=False, default=str).encode  # once: json.dumps(**options) makes one a call


def folder_of(path: str) -> str:
    """A note's folder (``notes.folder``): '' at the vault's root."""
    return path.rsplit("/", 1)[0] if "/" in path else ""


def note_values(rec: FileRecord, p: ParsedNote) -> dict:
    folder = folder_of(rec.path)
    s = p.summary
    return {
        "path": rec.path,
        "folder": folder,
        "title": p.title,
        # what the FTS title column holds: the title, the other names, the description
        "search_title": " ".join((p.title, *p.names, *((p.desc,) if p.desc else ()))) if p.names or p.desc else None,
        "body": p.body,
        "tags": " ".join(p.tags),
        "search_props": search_text(p.frontmatter),  # the FTS props column
        "search_cjk": cjk_tokens(f"{p.title}\n{p.body}") if has_run(p.title) or has_run(p.body) else None,
        "aliases": json.dumps(p.aliases) if p.aliases else None,
        "frontmatter": _FM_JSON(p.frontmatter) if p.frontmatter is not None else None,
        "fm_error": p.fm_error,
        "summary_state": s.state if s else "none",
        "summary_hash": s.hash if s else None,
        "summary_text": s.text if s else None,
        "content_hash": rec.content_hash,
        "size_bytes": rec.size,
        "token_estimate": estimate_tokens(rec.size),
        "mtime_ns": rec.mtime_ns,
        "updated_at": p.updated if p.updated is not None else rec.mtime_ns / 1e9,
        "created": p.created,  # the note's own creation date, when its frontmatter gives one
        "link_to": None,  # the target's path when the file is a symlink (read_record)
        "hidden_rule": None,  # set by the indexer from the privacy rules
        "fm_id": travelling_id(p),  # what a new note's id is made from (``note_ids.new_note_id``), if it has one
    }


def travelling_id(p: ParsedNote) -> str | None:
    """The id a note carries in its own text, so on every machine: its dialect's (Dendron's ``id``), else a
    frontmatter ``id`` (a string or a number, at most 200 characters)."""
    if p.note_id:
        return p.note_id
    return carried_id(p.frontmatter.get("id")) if p.frontmatter else None
