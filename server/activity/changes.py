"""Typed change records: what one write did to one note, and where that change is now.

Operations (``server.writes``) return one of these; provenance stores it (its kind in
``tool_invocations.change_kind``, its payload in the existing columns); revert and the
dashboard read it back with ``from_row`` and key on its type, never on a tool name, so a
new write tool that makes a known kind of change needs nothing here.

``locate`` is the one answer to "is the inserted text still there?": the dashboard's
detail pane shows it and revert acts on it, so they can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from server.errors import KmsError
from server.vault.markdown import Unclosed, frontmatter_span

TEXT_INSERTED = "text-inserted"
TEXT_REMOVED = "text-removed"
PROPERTIES_CHANGED = "properties-changed"
FILE_CREATED = "file-created"
FILE_DELETED = "file-deleted"
FILES_CHANGED = "files-changed"
KINDS = (TEXT_INSERTED, TEXT_REMOVED, PROPERTIES_CHANGED, FILE_CREATED, FILE_DELETED, FILES_CHANGED)


@dataclass(frozen=True)
class TextInserted:
    """``text`` was inserted at character ``offset`` of the new file text (BOM excluded)."""

    path: str
    offset: int
    text: str
    kind = TEXT_INSERTED


@dataclass(frozen=True)
class TextRemoved:
    """A revert took ``text`` out again at ``offset``."""

    path: str
    offset: int
    text: str
    kind = TEXT_REMOVED


@dataclass(frozen=True)
class PropertiesChanged:
    """Frontmatter keys went from ``before`` to ``after`` (JSON values, ``ABSENT`` for none).

    ``created_block`` is the whole frontmatter block when the note had none (written at offset 0).
    """

    path: str
    before: dict[str, Any]
    after: dict[str, Any]
    created_block: str | None = None
    kind = PROPERTIES_CHANGED


@dataclass(frozen=True)
class FileCreated:
    """A new note: exactly ``text``, whose file bytes hash to ``hash``."""

    path: str
    text: str
    hash: str
    kind = FILE_CREATED


@dataclass(frozen=True)
class FileDeleted:
    """A revert deleted a note kms had created."""

    path: str
    hash: str
    kind = FILE_DELETED


@dataclass(frozen=True)
class FileChange:
    """One file of a ``FilesChanged``: its text went from ``before`` to ``after`` and it moved from
    ``path`` to ``new_path`` (None: it stayed). Stored as the one hunk that differs, so a revert
    rebuilds the exact old text from the exact new one (``undo``)."""

    path: str
    new_path: str | None
    offset: int  # where the hunk starts, the same in the old and the new text
    old: str  # the old text of the hunk (removed or replaced)
    new: str  # what the change left there
    hash_before: str  # sha256 of the file bytes before and after; "" when there was no file (created)
    hash_after: str  # ... or is none any more (deleted)
    hidden: bool = False  # a note agents cannot see: never named to one

    @property
    def now_path(self) -> str:
        return self.new_path or self.path

    def undo(self, text: str) -> str:
        """The text before the change, from the text it left."""
        return text[: self.offset] + self.old + text[self.offset + len(self.new) :]


def file_change(
    path: str,
    before: str,
    after: str,
    hash_before: str,
    hash_after: str,
    *,
    new_path: str | None = None,
    hidden: bool = False,
) -> FileChange:
    """The ``FileChange`` from ``before`` to ``after``: the common prefix and suffix are dropped."""
    limit = min(len(before), len(after))
    start = 0
    while start < limit and before[start] == after[start]:
        start += 1
    end = 0
    while end < limit - start and before[-1 - end] == after[-1 - end]:
        end += 1
    return FileChange(
        path,
        new_path,
        start,
        before[start : len(before) - end],
        after[start : len(after) - end],
        hash_before,
        hash_after,
        hidden,
    )


def whole_lines(change: FileChange, before: str) -> FileChange:
    """The same change with its hunk widened to whole lines (still exact: the widening is text both
    versions share). An edit records this, so that "is it still there" looks for whole lines, not for the
    few characters that differ (``survives``)."""
    start = before.rfind("\n", 0, change.offset) + 1
    end = change.offset + len(change.old)
    nl = before.find("\n", end)
    tail = before[end : nl + 1 if nl >= 0 else len(before)]
    head = before[start : change.offset]
    return FileChange(
        change.path,
        change.new_path,
        start,
        head + change.old + tail,
        head + change.new + tail,
        change.hash_before,
        change.hash_after,
        change.hidden,
    )


@dataclass(frozen=True)
class FilesChanged:
    """Text replaced or removed, and files moved, in one or more files as one unit (an edit, a
    rename rewriting links, a move, a trash). ``path`` is the note the call was about."""

    path: str
    files: tuple[FileChange, ...]
    kind = FILES_CHANGED


Change = TextInserted | TextRemoved | PropertiesChanged | FileCreated | FileDeleted | FilesChanged


def columns(change: Change | None) -> dict[str, Any]:
    """The provenance columns that hold ``change`` (``provenance.record`` keyword arguments)."""
    if change is None:
        return {}
    out: dict[str, Any] = {"change_kind": change.kind}
    if isinstance(change, TextInserted):
        out.update(inserted_text=change.text, insert_offset=change.offset)
    elif isinstance(change, FileCreated):
        out.update(inserted_text=change.text, insert_offset=0)
    elif isinstance(change, PropertiesChanged):
        out.update(props_before=change.before, props_after=change.after)
        if change.created_block:
            out.update(inserted_text=change.created_block, insert_offset=0)
    return out


def from_row(inv: dict[str, Any]) -> Change | None:
    """The change a provenance row recorded (None for a call that changed nothing)."""
    kind, path = inv.get("change_kind"), inv.get("path") or ""
    text, offset = inv.get("inserted_text"), inv.get("insert_offset")
    if kind == TEXT_INSERTED and text and offset is not None:
        return TextInserted(path, offset, text)
    if kind == FILE_CREATED:
        return FileCreated(path, text or "", inv.get("hash_after") or "")
    if kind == PROPERTIES_CHANGED:
        created = text if text and offset == 0 else None
        return PropertiesChanged(path, inv.get("props_before") or {}, inv.get("props_after") or {}, created)
    if kind == TEXT_REMOVED:
        return TextRemoved(path, offset or 0, text or "")
    if kind == FILE_DELETED:
        return FileDeleted(path, inv.get("hash_before") or "")
    if kind == FILES_CHANGED:
        return FilesChanged(path, tuple(inv.get("files") or ()))
    return None


def inserted(change: Change | None) -> tuple[int, str] | None:
    """(offset, text) of the text a change added to the note, if it added any."""
    if isinstance(change, TextInserted):
        return change.offset, change.text
    if isinstance(change, FileCreated) and change.text:
        return 0, change.text
    if isinstance(change, PropertiesChanged) and change.created_block:
        return 0, change.created_block
    return None


@dataclass(frozen=True)
class Located:
    """Where inserted text stands in a note's current text."""

    state: str  # present | moved | edited | ambiguous | none
    offset: int | None
    explanation: str

    @property
    def intact(self) -> bool:
        """Still there exactly once, as written: it can be shown and taken out again."""
        return self.state in ("present", "moved")


def _whole(text: str, ins: str, pos: int) -> bool:
    """Does the occurrence at ``pos`` still sit on the line boundaries it was written at?

    Otherwise a person extended the inserted text ("agent line" -> "agent line, edited") and
    taking it out would splice their words onto another line. Text that ends with a line
    break was inserted as whole lines, so it must still start a line; text that does not
    was appended at the end of a line, so it must still end one.
    """
    end = pos + len(ins)
    right = ins.endswith("\n") or end == len(text) or text[end] in "\r\n"
    left = not ins.endswith("\n") or ins.startswith(("\n", "\r\n")) or pos == 0 or text[pos - 1] == "\n"
    return right and left


def locate(change: Change | None, text: str) -> Located:
    """Where the text ``change`` inserted is in ``text`` now (found only whole, never guessed)."""
    found = inserted(change)
    if found is None:
        return Located("none", None, "this call inserted no text")
    off, ins = found
    if text[off : off + len(ins)] == ins and _whole(text, ins, off):
        return Located("present", off, "the inserted text is still there, unchanged")
    hits: list[int] = []
    i = text.find(ins)
    while i >= 0 and len(hits) < 2:
        if _whole(text, ins, i):
            hits.append(i)
        i = text.find(ins, i + 1)
    if len(hits) == 1:
        return Located("moved", hits[0], "the note changed around it; the inserted text is intact elsewhere")
    if hits:
        return Located(
            "ambiguous",
            None,
            "the note moved around the inserted text and it now occurs more than once; can't tell which",
        )
    return Located("edited", None, "the inserted text is no longer in the note (it was edited since)")


def _has_lines(text: str, chunk: str) -> bool:
    """Does ``chunk`` (whole lines) occur in ``text`` on line boundaries?"""
    i = text.find(chunk)
    while i >= 0:
        end = i + len(chunk)
        if (i == 0 or text[i - 1] == "\n") and (chunk.endswith("\n") or end == len(text) or text[end] in "\r\n"):
            return True
        i = text.find(chunk, i + 1)
    return False


def props_now(text: str, keys: Any) -> dict[str, Any] | None:
    """The JSON values of ``keys`` in the note's frontmatter now (``frontmatter.ABSENT`` for a key it
    lacks); None when the frontmatter does not parse. (YAML is loaded only here: the dashboard imports
    this module.)"""
    # deferred: the YAML reader and the note editor load at the first property check, not on the way to
    # tools/list (the MCP registry imports this module through the write outcomes)
    from server.vault import frontmatter

    try:
        span = frontmatter_span(text)
        current, _py = frontmatter.load_both(text[span.open_end : span.close_start] if span else "")
    except (Unclosed, KmsError):
        return None
    return {k: frontmatter.ABSENT if k not in current else frontmatter.to_json(current[k]) for k in keys}


def survives(change: Change | None, text: str) -> bool | None:
    """Is what ``change`` left still in the note's ``text``? False: a later save dropped it (the watcher
    flags the call ``overwritten``); None: nothing to look for, or no way to tell.

    Inserted text is looked for by ``locate``; an edit of one note (``kms_edit``: its hunk as whole lines)
    by the lines it wrote, or for a deletion by the lines it removed coming back; a property change by
    the values it set."""
    if inserted(change) is not None:
        state = locate(change, text).state
        return None if state == "none" else state != "edited"
    if isinstance(change, FilesChanged):
        if len(change.files) != 1 or change.files[0].new_path or change.files[0].path != change.path:
            return None  # a move, a rename or a unit of several files: not judged here
        f = change.files[0]
        if f.new:
            return _has_lines(text, f.new)
        return None if not f.old else not _has_lines(text, f.old)
    if isinstance(change, PropertiesChanged) and change.after:
        from server.vault.frontmatter import canon  # deferred: as in props_now (YAML off the tools/list path)

        now = props_now(text, change.after)
        if now is None:
            return None
        return all(canon(now[k]) == canon(v) for k, v in change.after.items())
    return None
