"""The four guarded write operations: create, append, update_properties, insert_at.

Each one is a plain function over (conn, vault, note, input) that edits one file and
re-indexes it. They know nothing about MCP, rate limits or provenance rows
(``server.writes.guard`` adds those); they return a ``WriteOutcome`` whose ``result``
is what the agent sees and whose other fields are what provenance must record.

Safety rules every operation follows:

* Paths go through ``server.vault.paths``: nothing is written outside the vault.
* Optimistic concurrency: under a per-note lock the file is read, its sha256 (the
  version token ``notes.content_hash``) remembered, the new text computed and the
  hash checked again just before the atomic replace. A person's editor does not take
  kms's lock, so when the file changed meanwhile the edit is recomputed once on the
  fresh text; a second change is a ``conflict``. A caller-supplied ``version`` must
  match exactly (else ``conflict`` at once, with the current version).
* Only the requested text is added; every other byte, the BOM and the line endings
  stay as they were (inserted text is converted to the note's newline style).
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

import apsw

from server.config.allowlist import Allowlist
from server.errors import KmsError
from server.store.locks import file_lock
from server.vault import frontmatter
from server.vault.files import (
    PendingWrite,
    TextFormat,
    atomic_write,
    convert_newlines,
    decode,
    default_lock_dir,
    encode,
    file_stamp,
    read_stamp,
    sha256_hex,
    write_stamp,
)
from server.vault.paths import (
    NOTE_SUFFIX,
    ensure_folder,
    folder_key,
    locate_note,
    relpath_in_vault,
    resolve_folder,
    sanitize_title,
)
from server.vault.registry import Vault

if TYPE_CHECKING:
    from server.index.records import FileRecord

MAX_CREATE_BYTES = 100 * 1024
MAX_INSERT_BYTES = 50 * 1024
MAX_TAGS = 50
MAX_SEPARATOR_CHARS = 1_000
MAX_QUERY_CHARS = 1_000
POSITION_KINDS = ("afterHeading", "beforeHeading", "afterBlockContaining", "atLine")

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}#{1,6}(?:[ \t]|$)")
_SETEXT_UNDERLINE = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")


class WriteResult(TypedDict, total=False):
    """What the agent is told: the note and the blast radius of the write."""

    noteId: str | None
    title: str
    path: str
    vault: str
    bytesBefore: int
    bytesAfter: int
    linesAdded: int
    version: str  # sha256 of the new file bytes: pass it as ``version`` to the next write
    changed: bool
    indexWarning: str


@dataclass
class WriteOutcome:
    """A successful write: the agent-facing result plus what provenance records."""

    result: WriteResult
    inserted_text: str | None = None
    insert_offset: int | None = None  # character offset in the new file text (BOM excluded)
    props_before: dict[str, Any] | None = None
    props_after: dict[str, Any] | None = None
    hash_before: str | None = None
    hash_after: str | None = None


@dataclass
class Edit:
    """What a compute step wants: the whole new text and a description of the change."""

    new_text: str
    inserted_text: str | None = None
    insert_offset: int | None = None
    props_before: dict[str, Any] | None = None
    props_after: dict[str, Any] | None = None


@dataclass(frozen=True)
class NoteRef:
    """The index's view of the note being written."""

    id: str
    vault_id: int
    path: str
    title: str
    folder: str
    size_bytes: int = 0  # as last indexed: an empty file where this is > 0 is probably mid-save


# ----- lookups ----------------------------------------------------------------------------------


def lock_dir_for(conn: apsw.Connection) -> Path:
    """Lock files live next to the database: private to kms, shared by all its processes."""
    name = conn.filename
    return Path(name).parent / "locks" if name and name != ":memory:" else default_lock_dir()


def load_note(conn: apsw.Connection, ref: str) -> tuple[NoteRef, Vault]:
    """The visible note ``ref`` names (id, title or path) and its vault; ``not-found`` otherwise."""
    from server.index.notes import find_note
    from server.vault.registry import get_vault

    if not isinstance(ref, str) or not ref.strip():
        raise KmsError("invalid-input", "noteId is required")
    row = find_note(conn, ref)
    note = NoteRef(row["id"], row["vault_id"], row["path"], row["title"], row["folder"], row["size_bytes"])
    return note, get_vault(conn, row["vault_id"])


def _reindex(
    conn: apsw.Connection, vault: Vault, relpath: str, result: WriteResult, written: FileRecord | None = None
) -> str | None:
    """Update the index for the file just written. The write already happened, so an index
    failure is reported as a warning (the watcher or the next ``kms index`` heals it) rather
    than as an error an agent would retry (and so write twice)."""
    from server.index.indexer import reindex_file  # not at import: the dashboard imports this module

    try:
        return reindex_file(conn, vault, relpath, written)
    except Exception as e:  # noqa: BLE001 - see docstring
        result["indexWarning"] = f"written, but the index update failed: {e}"
        return None


# ----- text helpers -----------------------------------------------------------------------------


def split_lines(text: str) -> list[str]:
    """Lines with their endings; only ``\\n`` ends a line (``\\r\\n`` keeps its ``\\r``)."""
    parts = text.split("\n")
    out = [p + "\n" for p in parts[:-1]]
    if parts[-1]:
        out.append(parts[-1])
    return out


def _bare(line: str) -> str:
    return line.rstrip("\n").rstrip("\r")


def line_count(text: str) -> int:
    """``len(split_lines(text))`` without building the list."""
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _starts(lines: list[str]) -> list[int]:
    out, pos = [], 0
    for line in lines:
        out.append(pos)
        pos += len(line)
    return out


def check_content(content: Any, limit: int, *, allow_empty: bool = False) -> str:
    """Text an agent wants inserted: a string of at most ``limit`` UTF-8 bytes, no NUL."""
    if not isinstance(content, str):
        raise KmsError("invalid-input", "content must be a string")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise KmsError("invalid-input", "content is not valid Unicode (lone surrogate)") from e
    if size > limit:
        raise KmsError("invalid-input", f"content is {size} bytes; the limit is {limit // 1024} KB", limit=limit)
    if "\x00" in content:
        raise KmsError("invalid-input", "content contains a NUL character")
    if not allow_empty and not content.strip():
        raise KmsError("invalid-input", "content is empty")
    return content


def writable_start(text: str) -> int:
    """First line index agents may insert at: after the frontmatter and the AI summary block."""
    from server.vault import summary as summary_codec

    offset = frontmatter.body_offset(text)
    summary, rest = summary_codec.decode(text[offset:])
    if summary is not None:
        offset = len(text) - len(rest)
    # the index of the first line starting at or after ``offset`` (no list of lines needed)
    return text.count("\n", 0, offset) + (0 if offset == 0 or text[offset - 1] == "\n" else 1)


@dataclass(frozen=True)
class HeadingPos:
    level: int
    text: str
    line: int  # 0-based index of the heading's first line
    last: int  # 0-based index of its last line (setext underline)


def headings(text: str, title: str) -> list[HeadingPos]:
    """Headings as the indexer sees them (CommonMark: none inside code), with line positions."""
    from server.vault.parser import parse_note

    lines = split_lines(text)
    out: list[HeadingPos] = []
    for h in parse_note(text, title).headings:
        i = h.line - 1
        last = i
        if 0 <= i < len(lines) and not _ATX.match(_bare(lines[i])):
            j = i + 1  # setext: the heading ends at its underline
            while j < len(lines) and _bare(lines[j]).strip():
                if _SETEXT_UNDERLINE.match(_bare(lines[j])):
                    last = j
                    break
                j += 1
        out.append(HeadingPos(h.level, h.text, i, last))
    return out


def _norm_ws(s: str) -> str:
    return " ".join(s.split())


def find_heading(heads: list[HeadingPos], query: Any) -> tuple[int, HeadingPos]:
    """The one heading ``query`` names ("Tasks" or "## Tasks"); exact text first, then any case."""
    if not isinstance(query, str) or not query.strip() or len(query) > MAX_QUERY_CHARS:
        raise KmsError("invalid-input", "heading must be a non-empty string")
    m = re.match(r"^\s*(#{1,6})\s+(.*)$", query)
    level, want = (len(m.group(1)), m.group(2)) if m else (None, query)
    want = _norm_ws(re.sub(r"\s+#+\s*$", "", want))
    pool = [(i, h) for i, h in enumerate(heads) if level is None or h.level == level]
    found = [(i, h) for i, h in pool if _norm_ws(h.text) == want]
    if not found:
        found = [(i, h) for i, h in pool if _norm_ws(h.text).casefold() == want.casefold()]
    if len(found) == 1:
        return found[0]
    show = found or list(enumerate(heads))
    candidates = [f"{'#' * h.level} {h.text} (line {h.line + 1})" for _, h in show[:30]]
    if not found:
        raise KmsError(
            "invalid-input",
            f"no heading {query!r} in the note; headings: {'; '.join(candidates) or 'none'}",
            candidates=candidates,
        )
    raise KmsError(
        "invalid-input",
        f"heading {query!r} matches {len(found)} headings; use '## Text' with the level or another position: "
        + "; ".join(candidates),
        candidates=candidates,
    )


def _section_last_line(lines: list[str], heads: list[HeadingPos], idx: int) -> int:
    """Last non-blank line of the section under heads[idx] (up to the next heading of same or higher level)."""
    h = heads[idx]
    end = len(lines)
    for other in heads[idx + 1 :]:
        if other.level <= h.level:
            end = other.line
            break
    j = end - 1
    while j > h.last and not _bare(lines[j]).strip():
        j -= 1
    return max(j, h.last)


def _blocks(lines: list[str], start: int) -> list[tuple[int, int]]:
    """Blocks (first, last line) from ``start``: paragraphs, single headings, whole fenced code."""
    out: list[tuple[int, int]] = []
    i, n = start, len(lines)
    while i < n:
        s = _bare(lines[i])
        if not s.strip():
            i += 1
            continue
        fence = _FENCE.match(s)
        if fence:
            mark = fence.group(1)
            j = i + 1
            while j < n and not re.match(rf"^ {{0,3}}{re.escape(mark[0])}{{{len(mark)},}}[ \t]*$", _bare(lines[j])):
                j += 1
            out.append((i, min(j, n - 1)))
            i = j + 1
            continue
        if _ATX.match(s):
            out.append((i, i))
            i += 1
            continue
        j = i
        while j + 1 < n:
            nxt = _bare(lines[j + 1])
            if not nxt.strip() or _FENCE.match(nxt) or _ATX.match(nxt):
                break
            j += 1
        out.append((i, j))
        i = j + 1
    return out


def _line_end(lines: list[str], starts: list[int], j: int) -> int:
    """Offset just before line j's line ending."""
    return starts[j] + len(_bare(lines[j]))


def _insert_before_line(text: str, lines: list[str], k: int, content: str, nl: str, pad: bool) -> tuple[int, str]:
    """(offset, inserted text) to put ``content`` as whole line(s) before line k (k == len: at the end).

    ``pad`` surrounds it with blank lines so it becomes its own Markdown block.
    """
    starts = _starts(lines)
    if k >= len(lines) and text and not text.endswith("\n"):
        # the last line has no newline: start a new line and keep "no trailing newline"
        return len(text), (nl + nl if pad else nl) + content
    pos = starts[k] if k < len(lines) else len(text)
    ins = content + nl
    if pad:
        if k > 0 and _bare(lines[k - 1]).strip():
            ins = nl + ins
        if k < len(lines) and _bare(lines[k]).strip():
            ins = ins + nl
    return pos, ins


# ----- the shared write path --------------------------------------------------------------------


QUIET_S = 0.05
MAX_SETTLE_S = 1.0
GIVE_UP_S = 5.0


def _stable_read(real: Path, note: NoteRef, lock_fd: int) -> bytes:
    """Read the note once nobody seems to be in the middle of saving it.

    Editors that save by truncate-then-write expose an empty (or, for big files, a
    half-written) file for a moment; if kms read that state and the editor stalled
    until kms's re-check, kms would "append" to the fragment and the editor's bytes
    would go to the replaced inode: the note's content lost. So a read counts only if
    the file did not change across it and its mtime is ``QUIET_S`` old; a version kms
    wrote itself (stamped in the lock file) needs no wait, so agents appending in turn
    are not slowed down. A file that never settles (someone saving continuously) is
    read after ``MAX_SETTLE_S`` if the read is consistent; an empty file the index
    knows as non-empty only once it has been empty that long. After ``GIVE_UP_S``
    the write is refused as a conflict.
    """
    started = time.monotonic()
    while True:
        try:
            st = os.stat(real)
        except FileNotFoundError:
            return _read(real, note)
        stamp = f"{st.st_ino} {st.st_mtime_ns} {st.st_size}"
        age = time.time() - st.st_mtime_ns / 1e9
        waited = time.monotonic() - started
        settled = age >= QUIET_S or age < -2.0  # far in the future: clock skew, not a save in progress
        if st.st_size == 0 and note.size_bytes > 0:  # emptied: on purpose long ago, or a save in progress?
            ready = age >= MAX_SETTLE_S
        else:
            ready = settled or waited >= MAX_SETTLE_S
        if ready or read_stamp(lock_fd) == stamp:
            raw = _read(real, note)
            if file_stamp(real) == stamp and len(raw) == st.st_size:
                return raw
            continue
        if waited >= GIVE_UP_S:
            raise KmsError(
                "conflict",
                "the note is being saved continuously by someone else; try again in a moment",
                noteId=note.id,
            )
        time.sleep(min(max(QUIET_S - age, 0.005), QUIET_S))


def _read(real: Path, note: NoteRef) -> bytes:
    try:
        with open(real, "rb") as f:
            return f.read()
    except FileNotFoundError as e:
        message = f"the file of note {note.path!r} is gone; re-index the vault"
        raise KmsError("not-found", message, noteId=note.id) from e
    except IsADirectoryError as e:
        raise KmsError("invalid-input", f"{note.path!r} is a folder, not a note") from e


def write_note(
    conn: apsw.Connection,
    vault: Vault,
    note: NoteRef,
    compute: Callable[[str, TextFormat], Edit],
    *,
    version: str | None = None,
    lock_dir: Path | None = None,
) -> WriteOutcome:
    """Read -> compute -> re-check -> atomic replace -> re-index, with optimistic concurrency."""
    from server.index.records import record_of_bytes  # not at import: the dashboard imports this module

    if version is not None and (not isinstance(version, str) or not re.fullmatch(r"[0-9a-f]{64}", version)):
        raise KmsError("invalid-input", "version must be the 64-hex content hash returned by kms_read")
    real, real_rel = locate_note(vault.root, note.path)
    with file_lock(real, lock_dir or lock_dir_for(conn)) as lock_fd:
        for _attempt in range(2):
            raw = _stable_read(real, note, lock_fd)
            before = sha256_hex(raw)
            if version is not None and before != version:
                raise KmsError(
                    "conflict",
                    "the note changed since that version was read; read it again and retry",
                    noteId=note.id,
                    currentVersion=before,
                    expectedVersion=version,
                )
            text, fmt = decode(raw)
            edit = compute(text, fmt)
            new_raw = raw if edit.new_text == text else encode(edit.new_text, fmt)
            if new_raw == raw:
                break
            with PendingWrite(real, new_raw) as pending:  # written; fsynced in the background...
                written = record_of_bytes(note.path, pending.mtime_ns, new_raw)  # ...while it is parsed
                if sha256_hex(_read(real, note)) != before:
                    continue  # someone outside kms saved the file meanwhile: recompute on the fresh text
                pending.commit()
                write_stamp(lock_fd, pending.stamp)
            break
        else:
            raise KmsError(
                "conflict",
                "the note kept changing while kms was writing it; read it again and retry",
                noteId=note.id,
                currentVersion=sha256_hex(_read(real, note)),
            )
    after = sha256_hex(new_raw)
    result = WriteResult(
        title=note.title,
        path=note.path,
        vault=vault.name,
        bytesBefore=len(raw),
        bytesAfter=len(new_raw),
        linesAdded=line_count(edit.new_text) - line_count(text),
        version=after,
        changed=new_raw != raw,
    )
    note_id = note.id
    if new_raw != raw:
        note_id = _reindex(conn, vault, note.path, result, written) or note.id
        if real_rel != note.path and real_rel.lower().endswith(NOTE_SUFFIX):
            _reindex(conn, vault, real_rel, result)  # the symlink's target is a note of its own
        pending.wait_durable()  # the folder's fsync ran while the index was updated
    result["noteId"] = note_id
    return WriteOutcome(
        result=result,
        inserted_text=edit.inserted_text if new_raw != raw else None,
        insert_offset=edit.insert_offset if new_raw != raw else None,
        props_before=edit.props_before,
        props_after=edit.props_after,
        hash_before=before,
        hash_after=after,
    )


def _check_note_folder(vault: Vault, note: NoteRef, allowlist: Allowlist | None) -> None:
    """Allowlist by the note's folder and, for a symlinked note, by where it really lives."""
    if not allowlist:
        return
    allowlist.check(note.folder)
    real_rel = locate_note(vault.root, note.path)[1]
    allowlist.check(real_rel.rpartition("/")[0])


# ----- operations -------------------------------------------------------------------------------


def create(
    conn: apsw.Connection,
    vault: Vault,
    *,
    title: str,
    content: str = "",
    tags: list[str] | None = None,
    folder: str | None = None,
    allowlist: Allowlist | None = None,
    lock_dir: Path | None = None,
) -> WriteOutcome:
    """Create a new note ``<folder>/<sanitised title>.md``; never overwrites (``already-exists``).

    ``tags`` go into the frontmatter ``tags:`` list (merged into frontmatter the
    content already has). The folder is created if missing, inside the vault only.
    """
    stem = sanitize_title(title)
    fkey = folder_key(folder)
    if allowlist:
        allowlist.check(fkey)
    content = check_content(content if content is not None else "", MAX_CREATE_BYTES, allow_empty=True)
    tag_list = frontmatter.normalize_tags(tags, limit=MAX_TAGS) if tags else []
    text = convert_newlines(content, "\n").rstrip("\n")
    text = text + "\n" if text else ""
    if tag_list:
        text = _merge_tags(text, tag_list)
    elif text.startswith("---"):
        _refuse_reserved(text)
    data = encode(text)
    if len(data) > MAX_CREATE_BYTES + 4096:
        raise KmsError("invalid-input", f"the note would be {len(data)} bytes; the limit is 100 KB")

    name = stem + NOTE_SUFFIX
    existing_folder = resolve_folder(vault.root, fkey)  # refuse before creating any folder
    if existing_folder.is_dir():
        _refuse_existing(vault, existing_folder, name)
    folder_path = ensure_folder(vault.root, fkey)
    real_folder = relpath_in_vault(vault.root, folder_path)
    if allowlist:
        allowlist.check("" if real_folder == "." else real_folder)
    lock_dir = lock_dir or lock_dir_for(conn)
    with file_lock(folder_path / name.casefold(), lock_dir):  # "A" and "a" race for one name
        _refuse_existing(vault, folder_path, name)
        try:
            atomic_write(folder_path / name, data, create_only=True)
        except KmsError as e:
            raise KmsError("already-exists", f"a note named {name!r} already exists in that folder",
                           path=relpath_in_vault(vault.root, folder_path / name)) from e
    relpath = relpath_in_vault(vault.root, folder_path / name)
    result = WriteResult(
        title=stem,
        path=relpath,
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=len(data),
        linesAdded=line_count(text),
        version=sha256_hex(data),
        changed=True,
    )
    result["noteId"] = _reindex(conn, vault, relpath, result)
    return WriteOutcome(result, inserted_text=text, insert_offset=0, hash_before=None, hash_after=sha256_hex(data))


def _refuse_existing(vault: Vault, folder_path: Path, name: str) -> None:
    """Same title in the same folder, compared case-insensitively (macOS and Windows would clash)."""
    import unicodedata

    want = unicodedata.normalize("NFC", name).casefold()
    try:
        entries = os.listdir(folder_path)
    except FileNotFoundError:
        return
    for entry in entries:
        if unicodedata.normalize("NFC", entry).casefold() == want:
            folder = relpath_in_vault(vault.root, folder_path)
            raise KmsError(
                "already-exists",
                f"a note named {entry!r} already exists in that folder; append to it or pick another title",
                path=entry if folder == "." else f"{folder}/{entry}",
            )


def _refuse_reserved(text: str) -> None:
    raw_span = None
    try:
        raw_span = frontmatter.frontmatter_span(text)
    except frontmatter.Unclosed:
        return
    if raw_span is None:
        return
    try:
        _rt, py = frontmatter.load_both(text[raw_span.open_end : raw_span.close_start])
    except KmsError:
        return  # the agent's own broken frontmatter: written as given, flagged by the indexer
    if any(str(k) in frontmatter.RESERVED_KEYS for k in py):
        raise KmsError("invalid-input", "the frontmatter key 'kms_provenance' is reserved for kms")


def _merge_tags(text: str, tags: list[str]) -> str:
    """Put ``tags`` into the content's frontmatter (creating it), after any tags it already has."""
    _refuse_reserved(text)
    existing: list[str] = []
    try:
        span = frontmatter.frontmatter_span(text)
    except frontmatter.Unclosed as e:
        raise KmsError("invalid-input", "content starts with '---' but its frontmatter is never closed") from e
    if span:
        _rt, py = frontmatter.load_both(text[span.open_end : span.close_start])
        old = py.get("tags")
        if isinstance(old, str):
            existing = [t for t in re.split(r"[,\s]+", old) if t]
        elif isinstance(old, list):
            existing = [str(t) for t in old if t is not None]
    merged = frontmatter.normalize_tags(existing + tags, limit=MAX_TAGS) if existing else tags
    return frontmatter.apply_props(text, {"tags": merged}, [], newline="\n").new_text


def append(
    conn: apsw.Connection,
    vault: Vault,
    note: NoteRef,
    *,
    content: str,
    heading: str | None = None,
    separator: str = "\n\n",
    version: str | None = None,
    allowlist: Allowlist | None = None,
    lock_dir: Path | None = None,
) -> WriteOutcome:
    """Add ``content`` at the end of the note, or at the end of the section under ``heading``.

    The text goes right after the last non-blank line (of the note or section),
    preceded by ``separator``; blank lines before the next heading and the note's
    trailing-newline convention are kept.
    """
    _check_note_folder(vault, note, allowlist)
    check_content(content, MAX_INSERT_BYTES)
    if not isinstance(separator, str) or len(separator) > MAX_SEPARATOR_CHARS or "\x00" in separator:
        raise KmsError("invalid-input", f"separator must be a string of at most {MAX_SEPARATOR_CHARS} characters")

    def compute(text: str, fmt: TextFormat) -> Edit:
        nl = fmt.newline
        body = convert_newlines(content, nl).rstrip("\r\n")
        sep = convert_newlines(separator, nl)
        lines = split_lines(text)
        starts = _starts(lines)
        first = writable_start(text)
        if heading is not None:
            heads = [h for h in headings(text, note.title) if h.line >= first]
            idx, _h = find_heading(heads, heading)
            j = _section_last_line(lines, heads, idx)
        else:
            j = len(lines) - 1
            while j >= first and not _bare(lines[j]).strip():
                j -= 1
        if j < first and heading is None:
            pos, ins = _insert_before_line(text, lines, first, body, nl, pad=False)
        else:
            pos, ins = _line_end(lines, starts, j), sep + body
        return Edit(text[:pos] + ins + text[pos:], inserted_text=ins, insert_offset=pos)

    return write_note(conn, vault, note, compute, version=version, lock_dir=lock_dir)


def _parse_position(position: Any) -> tuple[str, Any]:
    if isinstance(position, dict):
        position = {k: v for k, v in position.items() if v is not None}  # a model dump with unset keys
    if not isinstance(position, dict) or len(position) != 1 or next(iter(position)) not in POSITION_KINDS:
        raise KmsError(
            "invalid-input",
            "position must be exactly one of {afterHeading: str}, {beforeHeading: str}, "
            "{afterBlockContaining: str}, {atLine: int}",
        )
    kind, arg = next(iter(position.items()))
    if kind == "atLine":
        if isinstance(arg, bool) or not isinstance(arg, int) or arg < 1:
            raise KmsError("invalid-input", "atLine must be a line number (1-based)")
    elif not isinstance(arg, str) or not arg.strip() or len(arg) > MAX_QUERY_CHARS:
        raise KmsError("invalid-input", f"{kind} must be a non-empty string of at most {MAX_QUERY_CHARS} characters")
    return kind, arg


def insert_at(
    conn: apsw.Connection,
    vault: Vault,
    note: NoteRef,
    *,
    content: str,
    position: dict[str, Any],
    version: str | None = None,
    allowlist: Allowlist | None = None,
    lock_dir: Path | None = None,
) -> WriteOutcome:
    """Insert ``content`` as whole lines at one precisely named place.

    ``afterHeading`` / ``beforeHeading``: right below / above the heading line;
    ``afterBlockContaining``: as a block of its own after the paragraph (or code
    block) containing the text; ``atLine``: so that it starts at that line (1-based,
    file lines; not inside the frontmatter). Ambiguity is an error, never a guess.
    """
    _check_note_folder(vault, note, allowlist)
    check_content(content, MAX_INSERT_BYTES)
    kind, arg = _parse_position(position)

    def compute(text: str, fmt: TextFormat) -> Edit:
        nl = fmt.newline
        body = convert_newlines(content, nl).rstrip("\r\n")
        lines = split_lines(text)
        first = writable_start(text)
        pad = False
        if kind == "atLine":
            last = len(lines) + 1
            if arg > last or arg - 1 < first:
                raise KmsError(
                    "invalid-input",
                    f"atLine {arg} is outside the writable lines {first + 1}..{last}"
                    + (" (lines before are frontmatter)" if first else ""),
                )
            k = arg - 1
        elif kind in ("afterHeading", "beforeHeading"):
            heads = [h for h in headings(text, note.title) if h.line >= first]
            _i, h = find_heading(heads, arg)
            k = h.last + 1 if kind == "afterHeading" else h.line
        else:
            needle = convert_newlines(arg, "\n")
            found = [
                b
                for b in _blocks(lines, first)
                if needle in "\n".join(_bare(x) for x in lines[b[0] : b[1] + 1])
            ]
            if len(found) != 1:
                candidates = [f"line {a + 1}: {_bare(lines[a]).strip()[:80]}" for a, _b in found[:30]]
                raise KmsError(
                    "invalid-input",
                    f"{arg!r} is in no block of the note" if not found
                    else f"{arg!r} is in {len(found)} blocks; quote more text: " + "; ".join(candidates),
                    candidates=candidates,
                )
            k, pad = found[0][1] + 1, True
        pos, ins = _insert_before_line(text, lines, k, body, nl, pad)
        return Edit(text[:pos] + ins + text[pos:], inserted_text=ins, insert_offset=pos)

    return write_note(conn, vault, note, compute, version=version, lock_dir=lock_dir)


def update_properties(
    conn: apsw.Connection,
    vault: Vault,
    note: NoteRef,
    *,
    set: dict[str, Any] | None = None,  # noqa: A002 - the tool's argument name
    remove: list[str] | None = None,
    version: str | None = None,
    lock_dir: Path | None = None,
) -> WriteOutcome:
    """Set and remove frontmatter properties; the body stays byte-identical.

    Exempt from the folder allowlist (it adds no body text). Idempotent: values
    already in place change nothing and the file is not rewritten.
    """
    set_, remove_ = frontmatter.check_properties(set, remove)

    def compute(text: str, fmt: TextFormat) -> Edit:
        edit = frontmatter.apply_props(text, set_, remove_, newline=fmt.newline)
        return Edit(
            edit.new_text,
            inserted_text=edit.created_block,
            insert_offset=0 if edit.created_block else None,
            props_before=edit.before,
            props_after=edit.after,
        )

    return write_note(conn, vault, note, compute, version=version, lock_dir=lock_dir)
