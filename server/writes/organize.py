"""The organise operations: rename, move and trash a note, link-safe and as one unit.

A rename or move rewrites every link to the note in every note of its vault (the links the
index resolved to it, hidden notes included so the person's links keep working) in the
style each was written (``server.vault.links``), moves the file and keeps the note's id.
A rename adds the old title to ``aliases`` unless told not to. Trash moves the file into
the vault's ``.trash/`` (Obsidian's convention), keeping its path inside it, and leaves
links as they are. All files change together or none does (``server.writes.multifile``);
the change is one ``FilesChanged`` record, which revert undoes exactly.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import apsw

from server.activity.changes import FileChange, FilesChanged, file_change
from server.errors import KmsError
from server.store.db import rows
from server.vault import frontmatter
from server.vault.files import detect_newline
from server.vault.frontmatter_read import alias_list, parse_frontmatter, split_frontmatter
from server.vault.links import retarget, rewrite_links
from server.vault.paths import NOTE_SUFFIX, TRASH, folder_key, sanitize_title
from server.vault.registry import Vault
from server.writes import reindex
from server.writes.context import NoteRef, WriteContext
from server.writes.edits import blast_radius
from server.writes.multifile import apply_plans
from server.writes.operations import refuse_private
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.unit_files import FilePlan


def _linking(conn: apsw.Connection, note: NoteRef) -> list[dict[str, Any]]:
    """The other notes of its vault with a link the index resolved to ``note``: path and whether hidden.
    (A link from another vault resolves there first; kms never writes outside the note's vault. A Logseq
    block reference, ``((uuid))``, names no note, so a move or rename leaves it as it is.)"""
    return rows(
        conn,
        """
        SELECT DISTINCT n.path, n.hidden_at IS NOT NULL AS hidden FROM links l
        JOIN notes n ON n.rid = l.src_rid
        WHERE l.dst_rid = (SELECT rid FROM notes WHERE id = ?) AND n.vault_id = ? AND n.path != ?
          AND l.target NOT LIKE '((%'
        ORDER BY n.path""",
        (note.id, note.vault_id, note.path),
    )


def _with_alias(text: str, alias: str) -> str:
    """``text`` with ``alias`` added to its frontmatter ``aliases`` (unchanged if already there)."""
    raw, _body, _offset = split_frontmatter(text)
    fm, error = parse_frontmatter(raw)
    if error:
        raise KmsError("invalid-input", f"the note's frontmatter does not parse ({error}); pass keepAlias false")
    current = alias_list((fm or {}).get("aliases"))
    if alias.casefold() in (a.casefold() for a in current):
        return text
    return frontmatter.apply_props(text, {"aliases": [*current, alias]}, [], newline=detect_newline(text)).new_text


class Radius:
    """The blast radius of a unit, measured as each file's new text is computed (a file recomputed on a
    person's fresh save is measured again: the last computation is the one committed)."""

    def __init__(self) -> None:
        self.by_path: dict[str, tuple[int, int, int, int]] = {}  # bytes before, after, lines removed, added

    def measured(self, path: str, compute: Callable[[str], str]) -> Callable[[str], str]:
        def go(text: str) -> str:
            new = compute(text)
            self.by_path[path] = (len(text.encode("utf-8")), len(new.encode("utf-8")), *_line_radius(text, new))
            return new

        return go

    def fill(self, result: WriteResult, files: list[FileChange]) -> None:
        """Totals over the files that changed: files, bytes before and after, lines removed and added."""
        got = [self.by_path[f.path] for f in files if f.path in self.by_path]
        result["bytesBefore"], result["bytesAfter"] = sum(g[0] for g in got), sum(g[1] for g in got)
        result["linesRemoved"], result["linesAdded"] = sum(g[2] for g in got), sum(g[3] for g in got)
        result["filesChanged"] = len(files)


def _line_radius(before: str, after: str) -> tuple[int, int]:
    """(lines removed, lines added): the differing span widened to whole lines (cheap on a long note)."""
    if before == after:
        return 0, 0
    hunk = file_change("", before, after, "", "")
    start = before.rfind("\n", 0, hunk.offset) + 1
    end = hunk.offset + len(hunk.old)
    nl = before.find("\n", end)
    tail = (nl if nl >= 0 else len(before)) - end  # the rest of the last line, the same in both texts
    return blast_radius(before[start : end + tail], after[start : hunk.offset + len(hunk.new) + tail])


def _result(vault: Vault, note: NoteRef, files: list[FileChange], new_path: str, title: str) -> WriteResult:
    own = next((f for f in files if f.path == note.path), None)
    return WriteResult(
        noteId=note.id,
        title=title,
        path=new_path,
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=0,
        linesAdded=0,
        changed=bool(files),
        version=own.hash_after if own else "",
    )


def _relocate(
    ctx: WriteContext,
    vault: Vault,
    note: NoteRef,
    new_path: str,
    new_title: str,
    *,
    keep_alias: bool,
    rewrite: bool = True,
) -> WriteOutcome:
    if new_path == note.path:
        raise KmsError("invalid-input", f"the note is already at {note.path!r}")
    conn, max_files = ctx.conn, ctx.max_files
    ctx.check_write(vault, note.path)  # where it is and where it goes, each where it really is (symlinks)
    ctx.check_write(vault, new_path)
    refuse_private(conn, vault, new_path)  # as kms_create: the note would vanish from the agent
    linking = _linking(conn, note) if rewrite else []
    if 1 + len(linking) > max_files:
        raise KmsError(
            "too-broad",
            f"this would rewrite {len(linking)} linking notes besides the note itself "
            f"({1 + len(linking)} files); at most {max_files} per call (write.max_files_per_call). "
            "Nothing was changed.",
            count=1 + len(linking),
            limit=max_files,
        )
    new_target = retarget(note.path, new_path, exists=lambda rel: (vault.root / rel).is_file())
    alias = note.title if keep_alias and new_title != note.title else None
    alias_first = vault.rules.alias_first
    new_folder = new_path.rpartition("/")[0]

    def own(text: str) -> str:
        if rewrite:  # links to itself, and its own relative Markdown links when its folder changes
            text = rewrite_links(text, new_target, alias_first=alias_first, folder=note.folder, new_folder=new_folder)[
                0
            ]
        return _with_alias(text, alias) if alias else text

    def linked(path: str) -> Callable[[str], str]:
        folder = path.rpartition("/")[0]
        return lambda t: rewrite_links(t, new_target, alias_first=alias_first, folder=folder)[0]

    radius = Radius()
    plans = [FilePlan(note.path, radius.measured(note.path, own), new_path=new_path)]
    plans += [
        FilePlan(r["path"], radius.measured(r["path"], linked(r["path"])), hidden=bool(r["hidden"])) for r in linking
    ]
    files, unit = apply_plans(ctx, vault, plans)
    result = _result(vault, note, files, new_path, new_title)
    radius.fill(result, files)
    others = [f for f in files if f.path != note.path]
    result["linksRewritten"] = {
        "notes": [f.path for f in others if not f.hidden],
        "hiddenNotes": sum(f.hidden for f in others),
    }
    result["oldPath"] = note.path
    reindex.warn_into(ctx, unit, result)
    return WriteOutcome(result, FilesChanged(note.path, tuple(files)))


def _stem_path(folder: str, stem: str) -> str:
    return f"{folder}/{stem}{NOTE_SUFFIX}" if folder else f"{stem}{NOTE_SUFFIX}"


def rename(ctx: WriteContext, vault: Vault, note: NoteRef, *, title: str, keep_alias: bool = True) -> WriteOutcome:
    """Give the note a new title (file name), rewriting every link to it."""
    stem = sanitize_title(title)
    return _relocate(ctx, vault, note, _stem_path(note.folder, stem), stem, keep_alias=keep_alias)


def move(ctx: WriteContext, vault: Vault, note: NoteRef, *, folder: str) -> WriteOutcome:
    """Move the note to ``folder`` (same file name), rewriting every link written as a path."""
    fkey = folder_key(folder)
    if fkey.split("/")[0] == TRASH:
        raise KmsError("invalid-input", "use kms_trash to put a note in the trash")
    name = note.path.rpartition("/")[2]
    return _relocate(ctx, vault, note, f"{fkey}/{name}" if fkey else name, note.title, keep_alias=False)


def trash(ctx: WriteContext, vault: Vault, note: NoteRef) -> WriteOutcome:
    """Move the note into ``.trash/`` (its path kept inside); links to it stay and are reported."""
    ctx.check_write(vault, note.path)  # (``.trash/`` itself is checked by ``apply_plans``)
    linking = _linking(ctx.conn, note)
    radius = Radius()
    files, unit = apply_plans(
        ctx, vault, [FilePlan(note.path, radius.measured(note.path, lambda t: t), new_path=f"{TRASH}/{note.path}")]
    )  # .trash is not indexed
    result = _result(vault, note, files, f"{TRASH}/{note.path}", note.title)
    radius.fill(result, files)
    visible = [r["path"] for r in linking if not r["hidden"]]
    result["linksLeft"] = {"count": len(linking), "notes": visible, "hiddenNotes": len(linking) - len(visible)}
    result["oldPath"] = note.path
    reindex.warn_into(ctx, unit, result)
    return WriteOutcome(result, FilesChanged(note.path, tuple(files)))
