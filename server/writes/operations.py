"""The guarded write operations: create, append, update_properties, insert_at.

Each one is a plain function over (write context, vault, note, input) that edits one file through
the compare-and-swap path (``server.writes.cas``) and returns a ``WriteOutcome``: what the
agent is told plus a typed change record (``server.activity.changes``). They know nothing
about MCP, rate limits or provenance rows (``server.writes.guard`` adds those). Where the
text goes is decided by ``server.writes.positions``.

Safety rules every operation follows: paths go through ``server.vault.paths`` (nothing is
written outside the vault); only the requested text is added, converted to the note's
newline style; every other byte, the BOM and the line endings stay as they were.
"""

from __future__ import annotations

import contextlib
import os
import re
import unicodedata
from functools import partial
from pathlib import Path
from typing import Any

import apsw

from server.activity.changes import FileCreated, PropertiesChanged, TextInserted
from server.errors import KmsError
from server.index.privacy import Rules, vault_rules
from server.index.records import record_of_bytes
from server.store.locks import file_lock
from server.vault import frontmatter
from server.vault.files import TextFormat, atomic_write, convert_newlines, encode, sha256_hex, write_failure
from server.vault.frontmatter_read import split_frontmatter
from server.vault.markdown import Unclosed, bare, frontmatter_span, line_count, split_lines
from server.vault.paths import (
    NOTE_SUFFIX,
    ensure_folder,
    folder_key,
    open_folder,
    real_relpath,
    relpath_in_vault,
    resolve_folder,
    same_folder,
    sanitize_title,
)
from server.vault.properties import RESERVED_KEYS, check_properties, normalize_tags
from server.vault.registry import Vault
from server.writes import once, reindex
from server.writes.cas import remove_created, write_note
from server.writes.context import Landed, NoteRef, WriteContext
from server.writes.crash_points import crash_point
from server.writes.limits import MAX_CREATE_BYTES, MAX_INSERT_BYTES, MAX_SEPARATOR_CHARS, MAX_TAGS, kb
from server.writes.outcome import Edit, WriteOutcome, WriteResult
from server.writes.positions import (
    after_section,
    blocks,
    find_heading,
    headings,
    insert_before_line,
    parse_position,
    writable_start,
)
from server.writes.reindex import Wrote
from server.writes.unit_journal import Entry


def check_content(content: Any, limit: int, *, allow_empty: bool = False) -> str:
    """Text an agent wants inserted: a string of at most ``limit`` UTF-8 bytes, no NUL."""
    if not isinstance(content, str):
        raise KmsError("invalid-input", "content must be a string")
    try:
        size = len(content.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise KmsError("invalid-input", "content is not valid Unicode (lone surrogate)") from e
    if size > limit:
        raise KmsError("invalid-input", f"content is {size} bytes; the limit is {kb(limit)}", limit=limit)
    if "\x00" in content:
        raise KmsError("invalid-input", "content contains a NUL character")
    if not allow_empty and not content.strip():
        raise KmsError("invalid-input", "content is empty")
    return content


def _inserted(note: NoteRef, text: str, pos: int, ins: str) -> Edit:
    """The edit that puts ``ins`` at character ``pos`` of ``text``, and its change record."""
    return Edit(text[:pos] + ins + text[pos:], TextInserted(note.path, pos, ins))


def check_note_folder(ctx: WriteContext, vault: Vault, note: NoteRef) -> None:
    """The session's reach (``WriteContext.check_write``) by the note's path and, for a symlinked note, by
    where it really lives: every operation on an existing note (here, ``edits``, ``memory``, ``link_ops``)
    checks it this one way, before computing anything."""
    ctx.place(vault, note.path)


_H1 = re.compile(r" {0,3}#[ \t]+(.+?)(?:[ \t]+#+)?[ \t]*")


def heading_title(content: str) -> str | None:
    """The text of the ``# H1`` the content starts with (after its frontmatter and blank lines), or None."""

    _raw, body, _offset = split_frontmatter(content.lstrip("\ufeff"))
    for line in body.splitlines():
        if line.strip():
            m = _H1.fullmatch(line)
            return m.group(1).strip() if m else None
    return None


def create(
    ctx: WriteContext,
    vault: Vault,
    *,
    title: str | None = None,
    content: str = "",
    tags: list[str] | None = None,
    folder: str | None = None,
) -> WriteOutcome:
    """Create a new note ``<folder>/<sanitised title>.md``; never overwrites (``already-exists``).

    ``tags`` go into the frontmatter ``tags:`` list (merged into frontmatter the
    content already has). The folder is created if missing, inside the vault only. With no
    ``title`` the content's leading ``# H1`` gives it (as an editor shows the note).
    """
    conn = ctx.conn
    if not title:
        title = heading_title(content or "")
        if not title:
            raise KmsError("invalid-input", "give a title, or start the content with a '# Title' heading")
    stem = sanitize_title(title)
    fkey = folder_key(folder)
    # where it really goes, symlinks followed, before any folder is made: a refusal leaves nothing behind
    ctx.check_write(vault, f"{fkey}/{stem}{NOTE_SUFFIX}" if fkey else stem + NOTE_SUFFIX)
    content = check_content(content if content is not None else "", MAX_CREATE_BYTES, allow_empty=True)
    tag_list = normalize_tags(tags, limit=MAX_TAGS) if tags else []
    text = convert_newlines(content, "\n").rstrip("\n")
    text = text + "\n" if text else ""
    if tag_list:
        text = _merge_tags(text, tag_list)
    elif text.startswith("---"):
        _refuse_reserved(text)
    data = encode(text)
    if len(data) > MAX_CREATE_BYTES + 4096:
        raise KmsError("invalid-input", f"the note would be {len(data)} bytes; the limit is {kb(MAX_CREATE_BYTES)}")

    name = stem + NOTE_SUFFIX
    refuse_private(conn, vault, f"{fkey}/{name}" if fkey else name)
    existing_folder = resolve_folder(vault.root, fkey)  # refuse before creating any folder
    if existing_folder.is_dir():
        _refuse_existing(vault, existing_folder, name)
    if (cap := ctx.capture) is not None:  # staged for approval: no folder, no file
        relpath = (
            relpath_in_vault(vault.root, existing_folder / name)
            if existing_folder.is_dir()
            else f"{fkey}/{name}"
            if fkey
            else name
        )
        cap.add(vault.name, relpath, None, data)
        return WriteOutcome(
            WriteResult(title=stem, path=relpath, vault=vault.name, changed=True),
            FileCreated(relpath, text, sha256_hex(data)),
        )
    folder_path = ensure_folder(vault.root, fkey)
    real_folder = relpath_in_vault(vault.root, folder_path)
    ctx.check_write(vault, name if real_folder in ("", ".") else f"{real_folder}/{name}")  # (swapped meanwhile?)
    ctx.check_approved(vault.name, relpath_in_vault(vault.root, folder_path / name), None, data)  # as shown
    with contextlib.ExitStack() as locks:
        locks.enter_context(file_lock(folder_path / name.casefold(), ctx.lock_dir))  # "A" and "a" race for one name
        _refuse_existing(vault, folder_path, name)
        journal = once.begin(ctx, [Entry(str(folder_path / name), b"", data, created=True)])
        try:
            _create_in_folder(vault, folder_path, real_folder, name, data)
        except BaseException:
            once.forget(journal)  # (nothing was made: ``_create_in_folder`` takes back what it made)
            raise
        crash_point("write.landed")
        once.hold_until_recorded(ctx, locks)
    relpath = relpath_in_vault(vault.root, folder_path / name)
    ctx.landed.append(Landed(vault, relpath, None, data))
    result = WriteResult(
        title=stem,
        path=relpath,
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=len(data),
        linesAdded=line_count(text),
        version=sha256_hex(data),
        changed=True,
        noteId=None,  # (the index gives it: ``reindex``)
    )
    undo = partial(remove_created, vault, folder_path, real_folder, name, data, ctx.lock_dir)
    reindex.note(ctx, Wrote(vault, relpath, None, result, then=[partial(once.recorded, ctx, journal)]), undo)
    digest = sha256_hex(data)
    return WriteOutcome(result, FileCreated(relpath, text, digest), hash_before=None, hash_after=digest)


def create_exact(ctx: WriteContext, vault: Vault, relpath: str, data: bytes) -> WriteOutcome:
    """Bring back a note that no longer exists, byte for byte, at ``relpath`` (a person's restore from the
    note's history): never over an existing file (``already-exists``); revertible as a create."""
    folder, _sep, name = relpath.rpartition("/")
    folder_path = ensure_folder(vault.root, folder_key(folder) if folder else "")
    real_folder = relpath_in_vault(vault.root, folder_path)
    with file_lock(folder_path / name.casefold(), ctx.lock_dir):
        _refuse_existing(vault, folder_path, name)
        _create_in_folder(vault, folder_path, real_folder, name, data)
    relpath = relpath_in_vault(vault.root, folder_path / name)
    ctx.landed.append(Landed(vault, relpath, None, data))
    text = data.decode("utf-8", "replace")
    digest = sha256_hex(data)
    result = WriteResult(
        title=name.rsplit(".", 1)[0],
        path=relpath,
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=len(data),
        linesAdded=line_count(text),
        version=digest,
        changed=True,
        noteId=None,  # (the index gives it: ``reindex``)
    )
    written = record_of_bytes(relpath, (folder_path / name).stat().st_mtime_ns, data, dialect=vault.rules)
    undo = partial(remove_created, vault, folder_path, real_folder, name, data, ctx.lock_dir)
    reindex.note(ctx, Wrote(vault, relpath, written, result), undo)
    return WriteOutcome(result, FileCreated(relpath, text, digest), hash_before=None, hash_after=digest)


def refuse_private(conn: apsw.Connection, vault: Vault, relpath: str, rules: Rules | None = None) -> None:
    """No note is written to a path a privacy path rule (``privacy.hide_folders``, ``.kmsignore``) hides:
    not by kms_create, nor moved or renamed there by an organize tool. The agent could not read it back,
    and names tried there would probe the hidden notes. ``rules`` saves reading them again per note.

    Judged by the name and by where the note would really be (``paths.real_relpath``): a symlinked folder into
    a hidden one (``drafts/portal -> ../journal``) is that folder under another name."""
    rules = rules or vault_rules(conn, vault.id, vault.root)
    has_path_rules = bool(rules.hide_folders or rules.kmsignore)  # (else no walk of the real path)
    if has_path_rules and (rules.path_reason(relpath) or rules.path_reason(_real_place(vault, relpath))):
        raise KmsError(
            "folder-denied",
            "that place is private (a privacy rule hides notes there): agents cannot write there; "
            "pick another folder or title",
            folder=relpath.rpartition("/")[0],
        )


def _real_place(vault: Vault, relpath: str) -> str:
    """Where ``relpath`` really is in the vault; the name itself when it leads outside (``check_write`` refuses
    that, with its own error)."""
    try:
        return real_relpath(vault.root, relpath)
    except KmsError:
        return relpath


def _create_in_folder(vault: Vault, folder_path: Path, real_folder: str, name: str, data: bytes) -> None:
    """Create ``name`` in the vault folder through a descriptor opened without following links,
    then check the folder is still where it was; if it was moved or swapped meanwhile, the new
    note is taken back (``conflict``): no interleaving leaves a file outside the vault."""
    dir_fd = open_folder(vault.root, real_folder)
    try:
        try:
            atomic_write(folder_path / name, data, create_only=True, dir_fd=dir_fd)
        except OSError as e:
            raise write_failure(e, name) from None
        except KmsError as e:
            if e.kind != "already-exists":
                raise
            raise KmsError(
                "already-exists",
                f"a note named {name!r} already exists in that folder",
                path=relpath_in_vault(vault.root, folder_path / name),
            ) from e
        if not same_folder(vault.root, real_folder, dir_fd):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
            raise KmsError(
                "conflict",
                f"the folder {real_folder!r} was moved or replaced while kms was creating "
                f"{name!r}; nothing was written, try again",
            )
    finally:
        os.close(dir_fd)


def _refuse_existing(vault: Vault, folder_path: Path, name: str) -> None:
    """Same title in the same folder, compared case-insensitively (macOS and Windows would clash).

    The answer names only what the agent asked for, never the existing file: it is the same for a
    note the agent can see and for one hidden from it, so a collision never tells which (or what)."""

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
                "a note with this name already exists in that folder (names match ignoring case); pick another title",
                path=name if folder == "." else f"{folder}/{name}",
            )


def _refuse_reserved(text: str) -> None:
    raw_span = None
    try:
        raw_span = frontmatter_span(text)
    except Unclosed:
        return
    if raw_span is None:
        return
    try:
        _rt, py = frontmatter.load_both(text[raw_span.open_end : raw_span.close_start])
    except KmsError:
        return  # the agent's own broken frontmatter: written as given, flagged by the indexer
    if any(str(k) in RESERVED_KEYS for k in py):
        raise KmsError("invalid-input", "the frontmatter key 'kms_provenance' is reserved for kms")


def _merge_tags(text: str, tags: list[str]) -> str:
    """Put ``tags`` into the content's frontmatter (creating it), after any tags it already has."""
    _refuse_reserved(text)
    existing: list[str] = []
    try:
        span = frontmatter_span(text)
    except Unclosed as e:
        raise KmsError("invalid-input", "content starts with '---' but its frontmatter is never closed") from e
    if span:
        _rt, py = frontmatter.load_both(text[span.open_end : span.close_start])
        old = py.get("tags")
        if isinstance(old, str):
            existing = [t for t in re.split(r"[,\s]+", old) if t]
        elif isinstance(old, list):
            existing = [str(t) for t in old if t is not None]
    merged = normalize_tags(existing + tags, limit=MAX_TAGS) if existing else tags
    return frontmatter.apply_props(text, {"tags": merged}, [], newline="\n").new_text


def append(
    ctx: WriteContext,
    vault: Vault,
    note: NoteRef,
    *,
    content: str,
    heading: str | None = None,
    separator: str = "\n\n",
    version: str | None = None,
) -> WriteOutcome:
    """Add ``content`` at the end of the note, or at the end of the section under ``heading``.

    The text goes right after the last non-blank line (of the note or section),
    preceded by ``separator``; blank lines before the next heading and the note's
    trailing-newline convention are kept.
    """
    check_note_folder(ctx, vault, note)
    check_content(content, MAX_INSERT_BYTES)
    if not isinstance(separator, str) or len(separator) > MAX_SEPARATOR_CHARS or "\x00" in separator:
        raise KmsError("invalid-input", f"separator must be a string of at most {MAX_SEPARATOR_CHARS} characters")

    def compute(text: str, fmt: TextFormat) -> Edit:
        nl = fmt.newline
        body = convert_newlines(content, nl).rstrip("\r\n")
        pos, ins = after_section(text, note.title, heading, body, convert_newlines(separator, nl), nl)
        return _inserted(note, text, pos, ins)

    return write_note(ctx, vault, note, compute, version=version)


def insert_at(
    ctx: WriteContext,
    vault: Vault,
    note: NoteRef,
    *,
    content: str,
    position: dict[str, Any],
    version: str | None = None,
) -> WriteOutcome:
    """Insert ``content`` at one precisely named place.

    ``afterHeading``: after the heading's section content (up to the next heading of the
    same or a higher level), as ``kms_append`` with ``heading`` puts it (a blank line
    before, so successive inserts stay separate paragraphs); ``beforeHeading``: as whole
    lines right above the heading; ``afterBlockContaining``: as a block of its own after
    the paragraph (or code block) containing the text; ``atLine``: so that it starts at
    that line (1-based, file lines; not inside the frontmatter). Ambiguity is an error,
    never a guess.
    """
    check_note_folder(ctx, vault, note)
    check_content(content, MAX_INSERT_BYTES)
    kind, arg = parse_position(position)

    def compute(text: str, fmt: TextFormat) -> Edit:
        nl = fmt.newline
        body = convert_newlines(content, nl).rstrip("\r\n")
        if kind == "afterHeading":
            pos, ins = after_section(text, note.title, arg, body, nl + nl, nl)
            return _inserted(note, text, pos, ins)
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
        elif kind == "beforeHeading":
            heads = [h for h in headings(text, note.title) if h.line >= first]
            k = find_heading(heads, arg)[1].line
        else:
            needle = convert_newlines(arg, "\n")
            found = [b for b in blocks(lines, first) if needle in "\n".join(bare(x) for x in lines[b[0] : b[1] + 1])]
            if len(found) != 1:
                candidates = [f"line {a + 1}: {bare(lines[a]).strip()[:80]}" for a, _b in found[:30]]
                raise KmsError(
                    "invalid-input",
                    f"{arg!r} is in no block of the note"
                    if not found
                    else f"{arg!r} is in {len(found)} blocks; quote more text: " + "; ".join(candidates),
                    candidates=candidates,
                )
            k, pad = found[0][1] + 1, True
        pos, ins = insert_before_line(text, lines, k, body, nl, pad)
        return _inserted(note, text, pos, ins)

    return write_note(ctx, vault, note, compute, version=version)


def refuse_hiding(conn: apsw.Connection, vault: Vault, path: str, new_text: str) -> None:
    """An agent never hides a note: a change after which a privacy rule (``privacy.frontmatter_key``,
    ``visibility: private``, ``privacy.hide_tags``) would hide it is refused. Hiding is the person's choice,
    and an agent could not undo it (a hidden note does not exist for it). The rule is not named: the
    person's privacy settings are not an agent's to probe."""
    rec = record_of_bytes(path, 0, new_text.encode("utf-8"), dialect=vault.rules)
    v = rec.values or {}  # (always set for bytes without a known hash)
    rules = vault_rules(conn, vault.id, vault.root)
    if rules.reason(path, v.get("frontmatter"), v.get("tags") or "", None, rec.fm_raw):
        raise KmsError(
            "invalid-input",
            "that change would hide the note from agents (a privacy rule); only the person hides notes",
        )


def update_properties(
    ctx: WriteContext,
    vault: Vault,
    note: NoteRef,
    *,
    set: dict[str, Any] | None = None,  # noqa: A002 - the tool's argument name
    remove: list[str] | None = None,
    version: str | None = None,
) -> WriteOutcome:
    """Set and remove frontmatter properties; the body stays byte-identical.

    Follows the folder allowlist and a token's ``folder:`` scopes like every write: frontmatter holds
    the privacy key, ``aliases`` and ``tags``, so a property change outside them could hide a note or
    break links to it. Idempotent: values already in place change nothing and the file is not rewritten.
    """
    check_note_folder(ctx, vault, note)
    set_, remove_ = check_properties(set, remove, max_tags=MAX_TAGS)

    def compute(text: str, fmt: TextFormat) -> Edit:
        edit = frontmatter.apply_props(text, set_, remove_, newline=fmt.newline)
        if edit.changed:
            refuse_hiding(ctx.conn, vault, note.path, edit.new_text)
        change = PropertiesChanged(note.path, edit.before, edit.after, edit.created_block) if edit.changed else None
        return Edit(edit.new_text, change)

    return write_note(ctx, vault, note, compute, version=version)
