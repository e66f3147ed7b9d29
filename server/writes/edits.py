"""``kms_edit``: replace or delete text in one note's body, all or nothing, under compare-and-swap.

An edit is a list of steps applied in order to the body (never the frontmatter, which
``kms_update_properties`` owns): ``replace`` (the old text must occur exactly once),
``replaceSection`` (a heading's content up to the next heading of the same or a higher
level), ``replaceBody`` (the whole body, as ``kms_read`` gives it) and ``prepend`` (after the
frontmatter and the summary block). Any step that cannot apply refuses the whole call and the
file is not touched. The version is required, so a whole-body replace never lands on a note
changed since it was read (``conflict``). The change is recorded as a ``FilesChanged`` (the one
hunk that differs), which revert undoes exactly.
"""

from __future__ import annotations

import difflib
from typing import Any

from server.activity.changes import FilesChanged, file_change, whole_lines
from server.errors import KmsError
from server.vault.files import TextFormat, convert_newlines
from server.vault.markdown import bare, body_offset, split_lines
from server.vault.registry import Vault
from server.writes.cas import write_note
from server.writes.context import NoteRef, WriteContext
from server.writes.limits import MAX_INSERT_BYTES, kb
from server.writes.operations import check_content, check_note_folder
from server.writes.outcome import Edit, WriteOutcome
from server.writes.positions import find_heading, headings, writable_start


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _occurrences(text: str, needle: str, start: int) -> list[int]:
    """Every start of ``needle`` in ``text[start:]``, overlapping ones too (so "exactly once" is exact)."""
    out: list[int] = []
    i = text.find(needle, start)
    while i >= 0:
        out.append(i)
        i = text.find(needle, i + 1)
    return out


def _replace(text: str, step: int, old: str, new: str) -> tuple[str, int]:
    start = body_offset(text)
    hits = _occurrences(text, old, start)
    if len(hits) != 1:
        lines = [_line_of(text, i) for i in hits[:50]]
        where = f" (lines {', '.join(map(str, lines))})" if hits else ""
        raise KmsError(
            "invalid-input",
            f"edit {step}: the old text occurs {len(hits)} times in the body{where}; "
            "it must occur exactly once: quote more of the surrounding text",
            edit=step,
            count=len(hits),
            lines=lines,
        )
    pos = hits[0]
    return text[:pos] + new + text[pos + len(old) :], _line_of(text, pos)


def _replace_section(text: str, title: str, step: int, heading: str, content: str, nl: str) -> tuple[str, int]:
    first = writable_start(text)
    heads = [h for h in headings(text, title) if h.line >= first]
    try:
        idx, head = find_heading(heads, heading)
    except KmsError as e:
        raise KmsError(e.kind, f"edit {step}: {e.message}", edit=step, **e.extra) from None
    lines = split_lines(text)
    end = next((h.line for h in heads[idx + 1 :] if h.level <= head.level), len(lines))
    a, b = head.last + 1, end  # the section's content lines [a, b)
    while a < b and not bare(lines[a]).strip():
        a += 1
    while b > a and not bare(lines[b - 1]).strip():
        b -= 1
    body = content.rstrip("\r\n")
    if a == b:  # an empty section: the content goes right under the heading, as its own block
        lead = nl if body else ""
        tail = nl if body and end < len(lines) and a == end else ""
        block = (lead + body + nl + tail) if body else ""
        a = b = head.last + 1
    else:
        block = body + nl if body else ""
    pos_a = sum(len(x) for x in lines[:a])
    pos_b = sum(len(x) for x in lines[:b])
    if block and pos_a == len(text) and text and not text.endswith("\n"):
        block = nl + block.rstrip("\r\n")
    elif b == len(lines) and lines and not lines[-1].endswith("\n") and block:
        block = block.rstrip("\r\n")  # the note ended without a line break: keep it so
    return text[:pos_a] + block + text[pos_b:], head.line + 1


def _prepend(text: str, content: str, nl: str) -> tuple[str, int]:
    lines = split_lines(text)
    k = writable_start(text)
    pos = sum(len(x) for x in lines[:k])
    if pos == len(text) and text and not text.endswith("\n"):
        return text + nl + content.rstrip("\r\n"), k + 2
    ins = content.rstrip("\r\n") + nl
    if k < len(lines) and bare(lines[k]).strip():
        ins += nl  # its own paragraph, not glued onto the first line of the body
    return text[:pos] + ins + text[pos:], k + 1


def _replace_body(text: str, content: str, nl: str) -> tuple[str, int]:
    """The whole body (what kms_read gives as ``body``: after frontmatter and summary) becomes ``content``."""
    lines = split_lines(text)
    k = writable_start(text)
    pos = sum(len(x) for x in lines[:k])
    body = content.rstrip("\r\n")
    if not body:
        return text[:pos], k + 1
    lead = nl if pos and not text[:pos].endswith("\n") else ""
    return text[:pos] + lead + body + nl, k + 1


def blast_radius(before: str, after: str) -> tuple[int, int]:
    """(lines removed, lines added) between two texts, over the lines that differ."""
    a, b = before.splitlines(), after.splitlines()
    removed = added = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += i2 - i1
            added += j2 - j1
    return removed, added


def apply_edits(text: str, title: str, edits: list[dict[str, Any]], nl: str) -> tuple[str, list[dict[str, Any]]]:
    """The text after every step, in order, and where each one applied; ``invalid-input`` for the first
    step that cannot apply (nothing is written then)."""
    applied: list[dict[str, Any]] = []
    for step, e in enumerate(edits, 1):
        kind, arg = next(iter(e.items()))
        if kind == "replace":
            old = convert_newlines(arg["old"], nl)
            new = convert_newlines(arg["new"], nl)
            check_content(new, MAX_INSERT_BYTES, allow_empty=True)
            text, line = _replace(text, step, old, new)
        elif kind == "replaceBody":
            content = convert_newlines(check_content(arg, MAX_INSERT_BYTES, allow_empty=True), nl)
            text, line = _replace_body(text, content, nl)
        elif kind == "replaceSection":
            content = convert_newlines(check_content(arg["content"], MAX_INSERT_BYTES, allow_empty=True), nl)
            text, line = _replace_section(text, title, step, arg["heading"], content, nl)
        else:
            content = convert_newlines(check_content(arg, MAX_INSERT_BYTES), nl)
            text, line = _prepend(text, content, nl)
        applied.append({"edit": step, "kind": kind, "line": line})
    return text, applied


def _same_frontmatter(before: str, after: str) -> None:
    """The body's edits may not make, break or change a frontmatter block (kms_update_properties does)."""
    if before[: body_offset(before)] != after[: body_offset(after)]:
        raise KmsError(
            "invalid-input",
            "these edits would change the note's frontmatter; kms_edit edits the body "
            "only (use kms_update_properties for properties)",
        )


def edit(
    ctx: WriteContext,
    vault: Vault,
    note: NoteRef,
    *,
    version: str,
    edits: list[dict[str, Any]],
) -> WriteOutcome:
    """Apply ``edits`` to the note if it is still exactly ``version``; all or nothing."""
    if not version:
        raise KmsError("invalid-input", "version is required: pass the `version` kms_read returned")
    check_note_folder(ctx, vault, note)
    seen: dict[str, Any] = {}

    def compute(text: str, fmt: TextFormat) -> Edit:
        new_text, applied = apply_edits(text, note.title, edits, fmt.newline)
        _same_frontmatter(text, new_text)
        size = len(new_text.encode("utf-8")) - len(text.encode("utf-8"))
        if size > MAX_INSERT_BYTES:
            raise KmsError("invalid-input", f"the edits add {size} bytes; at most {kb(MAX_INSERT_BYTES)} per call")
        seen.update(before=text, after=new_text, applied=applied)
        return Edit(new_text, None)

    outcome = write_note(ctx, vault, note, compute, version=version)
    before, after = seen["before"], seen["after"]
    removed, added = blast_radius(before, after)
    outcome.result["linesRemoved"], outcome.result["linesAdded"] = removed, added
    outcome.result["edits"] = seen["applied"]
    if outcome.changed and outcome.hash_before and outcome.hash_after:
        outcome.change = FilesChanged(
            note.path,
            (
                whole_lines(  # (whole lines: see ``changes.survives``)
                    file_change(note.path, before, after, outcome.hash_before, outcome.hash_after), before
                ),
            ),
        )
    return outcome
