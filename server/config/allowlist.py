"""Which vault folders agents may add content to (create, append, insert_at).

Globs match one path segment per pattern segment (``*`` never crosses a ``/``):
``drafts/*`` allows ``drafts/x`` but neither ``drafts`` nor ``drafts/x/y``, and
``drafts`` allows exactly ``drafts``. This is deliberately stricter than a
recursive glob so a person can see exactly where agent writes may land. The
vault root is ``""`` (also spelled ``.`` or ``/`` in a pattern). An empty list
allows every folder. ``update_properties`` is exempt: it never adds body text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from server.errors import KmsError


def folder_glob_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid folder glob, or None."""
    if not isinstance(pattern, str) or not pattern.strip():
        return "empty folder pattern"
    if pattern.strip() in ("/", "."):
        return None
    if "\\" in pattern:
        return f"{pattern!r}: use '/' between folders"
    if "," in pattern or pattern.splitlines() != [pattern]:  # they separate patterns in $KMS_WRITE_ALLOWLIST
        return f"{pattern!r}: one folder per pattern (',' and line breaks separate patterns)"
    if pattern.startswith("/") or re.match(r"^[A-Za-z]:", pattern) or pattern.startswith("~"):
        return f"{pattern!r}: use a vault-relative folder, not an absolute path"
    for part in pattern.strip("/").split("/"):
        if part in ("", ".", ".."):
            return f"{pattern!r}: empty, '.' or '..' folder names are not allowed"
        if "**" in part:
            return f"{pattern!r}: '**' is not supported; '*' matches one folder name, list each depth"
    return None


def normalize_folder_glob(pattern: str) -> str:
    """Trim whitespace and trailing slashes (``drafts/`` -> ``drafts``)."""
    pattern = pattern.strip()
    return pattern if pattern in ("/", ".") else pattern.rstrip("/")


def _norm(folder: str) -> str:
    f = folder.strip().strip("/")
    return "" if f == "." else f


class Allowlist:
    """An immutable set of single-segment folder globs; ``narrowed`` adds a second set a folder must also
    match (a service token's folders: they can only take away from ``write.allowlist``)."""

    def __init__(self, patterns: Iterable[str] | None = None, *, also: Allowlist | None = None) -> None:
        self.patterns: tuple[str, ...] = tuple(_norm(p) for p in (patterns or ()))
        self.also = also if also else None

    def narrowed(self, patterns: Iterable[str]) -> Allowlist:
        """This allowlist, and ``patterns`` too (no patterns: unchanged)."""
        extra = Allowlist(patterns)
        return (
            Allowlist(self.patterns, also=extra if self.also is None else self.also.narrowed(extra.patterns))
            if extra
            else self
        )

    def __bool__(self) -> bool:
        return bool(self.patterns) or self.also is not None

    def allows(self, folder: str) -> bool:
        """True if agents may write notes directly in ``folder`` (vault-relative, '' = root)."""
        if self.also is not None and not self.also.allows(folder):
            return False
        if not self.patterns:
            return True
        f = _norm(folder)
        segs = f.split("/") if f else []
        for pattern in self.patterns:
            psegs = pattern.split("/") if pattern else []
            if len(psegs) == len(segs) and all(fnmatchcase(s, p) for s, p in zip(segs, psegs, strict=True)):
                return True
        return False

    def check(self, folder: str, *, what: str = "folder") -> None:
        """Raise ``folder-denied`` naming the allowed folders."""
        if not self.allows(folder):
            if self.also is not None and not self.also.allows(folder):
                self.also.check(folder, what=what)  # (names the narrower list: the token's folders)
            shown = ", ".join(p or "(vault root)" for p in self.patterns)
            raise KmsError(
                "folder-denied",
                f"writing to {what} {folder or '(vault root)'!r} is not allowed; allowed folders: {shown}",
                folder=folder,
                allowed=list(self.patterns),
            )
