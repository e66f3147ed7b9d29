"""Where agents may write notes (``write.allowlist``, a token's ``folder:`` scopes): one grammar, one home.

Each entry is a glob matched against a note's vault-relative path, one path segment per pattern segment
(``*``, ``?`` and ``[...]`` never cross a ``/``):

- an entry whose last segment has a wildcard names notes: ``drafts/*`` is every note directly in
  ``drafts/``, ``inbox/*/notes/*`` every note directly in ``inbox/<any>/notes/``, ``*`` every note in the
  vault root;
- an entry whose last segment is a plain name names a folder and everything below it: ``drafts`` is
  ``drafts/`` and all its subfolders (``drafts/plan.md`` names that one note);
- ``/`` or ``.`` is the vault root folder (its notes, not its subfolders: the same as ``*``).

An empty list allows every note. Every write follows it, frontmatter-only ones (``update_properties``,
``link``) too: frontmatter holds the privacy key, ``aliases`` and ``tags``. ``remember`` has the memory
folder as its own entry, ``capture`` the capture folder.

Before settings version 2 (``SETTINGS_VERSION``) an entry named the one folder a note's folder had to be
(``drafts/*`` meant the notes of ``drafts/x``, not of ``drafts``); ``from_folder_glob`` is that entry
in this grammar, so a settings file, a token or a session from before allows exactly what it did.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

from server.errors import KmsError

ROOT = "*"  # the vault root's own notes, as an entry
_WILD = re.compile(r"[*?\[]")


def folder_glob_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not a valid allowlist entry, or None."""
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
    for part in pattern.strip().rstrip("/").split("/"):
        if part in ("", ".", ".."):
            return f"{pattern!r}: empty, '.' or '..' folder names are not allowed"
        if "**" in part:
            return f"{pattern!r}: '**' is not supported; '*' matches one name, a plain folder name its subfolders"
        if UNCLOSED_SET.search(part):  # fnmatch would quietly read it as a literal '[': a folder nobody has
            return f"{pattern!r}: '[' opens a set of characters that no ']' closes"
    return None


UNCLOSED_SET = re.compile(r"\[(?![^\]]*\])")


def normalize_folder_glob(pattern: str) -> str:
    """Trim whitespace and trailing slashes (``drafts/`` -> ``drafts``)."""
    pattern = pattern.strip()
    return pattern if pattern in ("/", ".") else pattern.rstrip("/")


def _entry(pattern: str) -> str:
    """An entry as matched: the root's spellings are ``*``."""
    p = pattern.strip().strip("/")
    return ROOT if p in ("", ".") else p


def from_folder_glob(old: str) -> str:
    """The entry that allows exactly what ``old`` allowed under settings version 1 (a glob the note's
    folder had to match, segment for segment): the notes directly in the folders it matched."""
    p = old.strip().strip("/")
    return ROOT if p in ("", ".") else f"{p}/*"


def names_notes(pattern: str) -> bool:
    """True if the entry's last segment is a glob (it names notes at one depth, not a folder tree)."""
    return bool(_WILD.search(_entry(pattern).rpartition("/")[2]))


def entry_allows(pattern: str, path: str) -> bool:
    """True if entry ``pattern`` allows the note at vault-relative ``path``."""
    psegs = _entry(pattern).split("/")
    segs = path.strip("/").split("/")
    if names_notes(pattern):
        return len(psegs) == len(segs) and all(fnmatchcase(s, p) for s, p in zip(segs, psegs, strict=True))
    return len(psegs) <= len(segs) and all(fnmatchcase(s, p) for s, p in zip(segs, psegs, strict=False))


def describe(pattern: str) -> str:
    """What an entry allows, in words (``kms config list``, the docs)."""
    p = _entry(pattern)
    folder, _, last = p.rpartition("/")
    if p == ROOT:
        return "the notes directly in the vault root"
    if last == "*":
        return f"the notes directly in {folder}/" + (" (each * one folder name)" if _WILD.search(folder) else "")
    if names_notes(p):
        return f"the notes whose path matches {p} (each * within one name)"
    return f"{p}/ and every folder below it" + (" (each * one folder name)" if _WILD.search(p) else "")


def entries_meet(a: str, b: str) -> bool:
    """True if some note path is allowed by both entries (a token's ``folder:`` scope and a
    ``write.allowlist`` entry): a token whose folders meet no entry could never write, yet read as able to.

    A note lies at one depth (its path's names): a folder entry allows the notes below it (one name deeper
    at least), a notes entry exactly its own depth; at each depth both name, their globs must be able to
    match one name. Where a glob makes that unsure, the entries are taken to meet (never a false refusal)."""
    sa, sb = _entry(a).split("/"), _entry(b).split("/")
    na, nb = names_notes(a), names_notes(b)
    if na and nb:
        depth_ok = len(sa) == len(sb)
    elif na or nb:
        notes, tree = (sa, sb) if na else (sb, sa)
        depth_ok = len(notes) >= len(tree) + 1
    else:
        depth_ok = True
    return depth_ok and all(_names_meet(x, y) for x, y in zip(sa, sb, strict=False))


def _names_meet(x: str, y: str) -> bool:
    return bool(_WILD.search(x) or _WILD.search(y)) or x == y


def entry_for(path: str) -> str:
    """The narrowest entry that allows a note at ``path``: the notes directly in its folder."""
    folder = path.strip("/").rpartition("/")[0]
    return f"{folder}/*" if folder else ROOT


class Allowlist:
    """An immutable set of entries; ``narrowed`` adds a second set a note must also match (a service
    token's folders: they can only take away from ``write.allowlist``)."""

    def __init__(self, patterns: Iterable[str] | None = None, *, also: Allowlist | None = None) -> None:
        self.patterns: tuple[str, ...] = tuple(_entry(p) for p in (patterns or ()))
        self.also = also if also else None

    def narrowed(self, patterns: Iterable[str]) -> Allowlist:
        """This allowlist, and ``patterns`` too (no patterns: unchanged)."""
        extra = Allowlist(patterns)
        return (
            Allowlist(self.patterns, also=extra if self.also is None else self.also.narrowed(extra.patterns))
            if extra
            else self
        )

    def own_entry(self, folder: str) -> Allowlist:
        """``folder`` as the one entry instead of ``write.allowlist``'s (``remember``'s memory folder,
        ``capture``'s capture folder), a token's folders still applying: a token only takes away."""
        return Allowlist([folder], also=self.also)

    def __bool__(self) -> bool:
        return bool(self.patterns) or self.also is not None

    def reaches(self, entry: str) -> bool:
        """True if some note ``entry`` allows is one this allowlist allows too (empty: every one)."""
        return not self.patterns or any(entries_meet(entry, p) for p in self.patterns)

    def allows(self, path: str) -> bool:
        """True if agents may write the note at vault-relative ``path``."""
        if self.also is not None and not self.also.allows(path):
            return False
        return not self.patterns or any(entry_allows(p, path) for p in self.patterns)

    def check(self, path: str, *, hidden: bool = False, scope: str = "write.allowlist") -> None:
        """Raise ``folder-denied`` naming the entries there are and the one that would allow ``path``
        (a ``hidden`` note is named by its folder only)."""
        if self.also is not None and not self.also.allows(path):
            self.also.check(path, hidden=hidden, scope="the token's folder: scopes")
        if self.patterns and not any(entry_allows(p, path) for p in self.patterns):
            entries = "; ".join(f"{p} ({describe(p)})" for p in self.patterns)
            fix, folder = entry_for(path), path.strip("/").rpartition("/")[0]
            what = f"a note in {folder or '(vault root)'!r}" if hidden else f"the note {path!r}"
            raise KmsError(
                "folder-denied",
                f"writing {what} is not allowed by {scope}: {entries}. The entry {fix!r} would allow it "
                f"({describe(fix)})",
                **({} if hidden else {"path": path}),
                folder=folder,
                allowed=list(self.patterns),
                wouldAllow=fix,
            )
