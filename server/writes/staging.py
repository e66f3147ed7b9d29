"""Staging a write for the person's approval: what a call would do, without doing it, then exactly that.

The guard runs an operation twice when a call needs approval (``write.approval``):

1. with a ``Capture`` as its write context's mode (``WriteContext.staging``): every place that writes
   a file (``cas.write_note``, ``multifile.apply_plans``, ``operations.create``) computes the new bytes
   as usual, hands them to ``StagedFile`` and writes nothing (no file, no folder, no index row). The
   captured files are the diff the person sees.
2. once approved, with an ``Expected``: the same operation, for real, under the usual
   compare-and-swap, but each file must still be the bytes that were shown and must come out as the
   bytes that were approved; a note changed meanwhile answers ``conflict`` and nothing is written.

The write points ask ``WriteContext.capture`` and ``WriteContext.check_approved``; nothing here knows a tool.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from server.errors import KmsError
from server.vault.files import decode, sha256_hex

DIFF_MAX_CHARS = 20_000  # per file, in the pending row: the person reads it, the hashes decide


@dataclass(frozen=True)
class StagedFile:
    """One file a staged call would change: its bytes' hashes before and after, and the diff shown."""

    vault: str
    path: str
    new_path: str | None
    hash_before: str | None  # None: the file does not exist yet (a create)
    hash_after: str | None  # None: the file goes
    added: int
    removed: int
    diff: str
    hidden: bool = False

    def to_json(self) -> dict[str, Any]:
        return {
            "vault": self.vault,
            "path": self.path,
            "newPath": self.new_path,
            "hashBefore": self.hash_before,
            "hashAfter": self.hash_after,
            "added": self.added,
            "removed": self.removed,
            "diff": self.diff,
            "hidden": self.hidden,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> StagedFile:
        return cls(
            d["vault"],
            d["path"],
            d.get("newPath"),
            d.get("hashBefore"),
            d.get("hashAfter"),
            d.get("added", 0),
            d.get("removed", 0),
            d.get("diff", ""),
            d.get("hidden", False),
        )


def staged_file(
    vault: str,
    path: str,
    before: bytes | None,
    after: bytes | None,
    *,
    new_path: str | None = None,
    hidden: bool = False,
) -> StagedFile:
    """The ``StagedFile`` for ``before`` -> ``after`` (None: absent), with a unified diff of the text."""

    old = decode(before)[0] if before else ""
    new = decode(after)[0] if after else ""
    lines = list(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"a/{path}" if before is not None else "/dev/null",
            tofile=f"b/{new_path or path}" if after is not None else "/dev/null",
            n=2,
        )
    )
    added = sum(1 for x in lines if x.startswith("+") and not x.startswith("+++"))
    removed = sum(1 for x in lines if x.startswith("-") and not x.startswith("---"))
    text = "".join(x if x.endswith("\n") else x + "\n\\ No newline at end of file\n" for x in lines)
    if len(text) > DIFF_MAX_CHARS:
        text = text[:DIFF_MAX_CHARS] + f"\n… ({len(text) - DIFF_MAX_CHARS} more characters of diff)\n"
    return StagedFile(
        vault,
        path,
        new_path,
        sha256_hex(before) if before is not None else None,
        sha256_hex(after) if after is not None else None,
        added,
        removed,
        text,
        hidden,
    )


@dataclass
class Capture:
    """The files one previewed call would change, in the order it would change them."""

    files: list[StagedFile] = field(default_factory=list)

    def add(
        self,
        vault: str,
        path: str,
        before: bytes | None,
        after: bytes | None,
        *,
        new_path: str | None = None,
        hidden: bool = False,
    ) -> None:
        if before != after or (new_path and new_path != path):
            self.files.append(staged_file(vault, path, before, after, new_path=new_path, hidden=hidden))

    @property
    def lines(self) -> int:
        """Lines the call touches, both ways (``write.approval_lines`` compares with this)."""
        return sum(f.added + f.removed for f in self.files)


@dataclass(frozen=True)
class Expected:
    """The files a person approved: applying the call again must meet exactly these (``check``)."""

    files: dict[tuple[str, str], StagedFile]

    @classmethod
    def of(cls, files: Sequence[StagedFile]) -> Expected:
        return cls({(f.vault, f.path): f for f in files})

    def check(self, vault: str, path: str, before: bytes | None, after: bytes | None, *, hidden: bool = False) -> None:
        """``conflict`` unless this file is still what the person was shown and becomes what they approved."""
        staged = self.files.get((vault, path))
        name = "a note you cannot see" if hidden else repr(path)
        if staged is None:
            if before == after:
                return
            raise KmsError(
                "conflict",
                f"the approved change did not include {name}, which this call would now "
                "change too (the notes changed since); nothing was written",
                path=None if hidden else path,
            )
        now_before = sha256_hex(before) if before is not None else None
        now_after = sha256_hex(after) if after is not None else None
        if now_before != staged.hash_before or now_after != staged.hash_after:
            raise KmsError(
                "conflict",
                f"{name} changed since the change was shown for approval; nothing was written: read it again and retry",
                path=None if hidden else path,
            )


HOST_DIFF_LINES = 12  # the diff lines a host's dialog shows (the dashboard shows the whole diff)


def describe(tool: str, files: Sequence[StagedFile], *, diff_lines: int = HOST_DIFF_LINES) -> str:
    """What a staged call would do, as the host's dialog shows it to the person: the tool, each note with the
    lines it adds and removes, then the first lines of the diff. A hidden note is counted, never named or shown
    (the host is the agent's own process)."""
    added = sum(f.added for f in files)
    removed = sum(f.removed for f in files)
    head = [f"kms: {tool} wants to change {len(files)} note{'s' if len(files) != 1 else ''} (+{added} -{removed})"]
    shown: list[str] = []
    for f in files:
        if f.hidden:
            head.append(f"  a note you keep hidden from agents (+{f.added} -{f.removed})")
            continue
        moved = f" -> {f.new_path}" if f.new_path and f.new_path != f.path else ""
        verb = "new " if f.hash_before is None else "deleted " if f.hash_after is None else ""
        head.append(f"  {verb}{f.vault}:{f.path}{moved} (+{f.added} -{f.removed})")
        shown += [x for x in f.diff.splitlines() if not x.startswith(("---", "+++"))]
    body = shown[:diff_lines]
    more = len(shown) - len(body)
    tail = [f"… {more} more diff lines (the dashboard shows them all)"] if more > 0 else []
    return "\n".join([*head, "", *body, *tail]).rstrip()
