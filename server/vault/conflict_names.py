"""Which file names are a sync tool's conflict copy of a note, and of which note.

When two machines change one file before they meet, each sync tool keeps the loser beside the winner
under a name of its own. Such a file is not a note (the index quarantines it: ``server.index.conflicts``);
this module only reads names. The names, as the tools write them:

- **Syncthing**: ``Note.sync-conflict-20261201-101500-ABCDEFG.md`` (date, time, the first 7 characters of
  the device id that lost).
- **Dropbox**: ``Note (Jane Doe's conflicted copy 2026-12-01).md``, ``Note (conflicted copy 2026-12-01).md``
  (a numbered ``(1)`` may follow the date), and its case and selective-sync clashes
  ``Note (Case Conflict).md``, ``Note (Selective Sync Conflict).md``.
- **Nextcloud** (and ownCloud): ``Note (conflicted copy 2026-12-01 101500).md`` (the time is what tells it
  from Dropbox's) and the older clients' ``Note_conflict-20261201-101500.md``.
- **git's conflict siblings**: ``Note.md.orig`` (a merge's backup) and ``git mergetool``'s
  ``Note_BACKUP_1234.md``, ``Note_BASE_1234.md``, ``Note_LOCAL_1234.md``, ``Note_REMOTE_1234.md``.
- **OneDrive** keeps the other side as ``Note-COMPUTERNAME.md``, the computer's name appended with a
  hyphen. Recognised: the names Windows gives a computer unless the person renames it, ``DESKTOP-`` + 7
  and ``LAPTOP-`` + 8 upper-case letters and digits (``Note-DESKTOP-AB12CD3.md``, a ``-2`` may follow),
  only in a vault whose sync is OneDrive and only when ``Note.md`` is beside it. Any other hyphenated
  suffix is a note's own name (``Plan-V2.md``, ``Plan-FINAL.md``): a computer with a name of its own
  (``JANES-PC``, a Linux client's host name) is given by a pattern (``{note}-JANES-PC.md``, below).
- **iCloud Drive** numbers the other side: ``Note 2.md``. Also a plain note name, so a copy only in a
  vault whose sync is iCloud and only when ``Note.md`` is beside it.
- **Google Drive** (Drive for desktop) keeps the other side as ``Note (1).md``. Also a plain note name,
  so a copy only in a vault whose sync is Google Drive and only when ``Note.md`` is beside it.
- **The person's own** (setting ``sync.conflict_patterns``): globs over a file name in which ``{note}``
  stands for the note's name without ``.md`` (``{note}.conflict-*.md``).

The unambiguous names are copies in every vault, whatever its recorded sync tool: a Syncthing copy in a
vault whose detection missed Syncthing is still not a note. A name is read in one regular-expression match
(``CopyNames.copy_of``), which is what keeps a cold index of 10,000 notes from noticing it
(docs/benchmarks.md, "Conflict copies").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from server.config.conflict_patterns import pattern_regex
from server.vault.paths import NOTE_SUFFIX

SYNCTHING = "syncthing"
DROPBOX = "dropbox"
NEXTCLOUD = "nextcloud"
ONEDRIVE = "onedrive"
ICLOUD = "icloud"
GOOGLE_DRIVE = "google-drive"
GIT_SIBLING = "git-sibling"
GIT_MERGE = "git-merge"  # a merge that did not go clean (no copy file: both sides are in the conflict row)
PATTERN = "pattern"
SOURCES = (SYNCTHING, DROPBOX, NEXTCLOUD, ONEDRIVE, ICLOUD, GOOGLE_DRIVE, GIT_SIBLING, GIT_MERGE, PATTERN)

_MD = r"(?P<ext>\.[mM][dD])"
# One alternation, each branch naming its tool: one match per file name (the cost of a cold index's check).
_UNAMBIGUOUS = re.compile(
    "|".join(
        (
            r"(?P<syncthing>(?P<s_stem>.+)\.sync-conflict-\d{8}-\d{6}(?:-[A-Z0-9]{7})?(?P<s_ext>\.[mM][dD]))",
            r"(?P<nextcloud>(?P<n_stem>.+?) \(conflicted copy (?:[^()]* )?\d{4}-\d{2}-\d{2} \d{6}\)"
            r"(?P<n_ext>\.[mM][dD]))",
            r"(?P<nextcloud_old>(?P<o_stem>.+)_conflict-\d{8}-\d{6}(?P<o_ext>\.[mM][dD]))",
            r"(?P<dropbox>(?P<d_stem>.+?) \((?:[^()]*'s )?conflicted copy(?: [^()]*?)?(?: \(\d+\))?\)"
            r"(?P<d_ext>\.[mM][dD]))",
            r"(?P<dropbox_case>(?P<c_stem>.+?) \((?:Case|Selective Sync) Conflict(?: \d+)?\)(?P<c_ext>\.[mM][dD]))",
            r"(?P<mergetool>(?P<m_stem>.+)_(?:BACKUP|BASE|LOCAL|REMOTE)_\d+(?P<m_ext>\.[mM][dD]))",
            r"(?P<orig>(?P<g_stem>.+\.[mM][dD])\.orig)",
        )
    )
)
_BRANCHES = (
    ("syncthing", SYNCTHING, "s"),
    ("nextcloud", NEXTCLOUD, "n"),
    ("nextcloud_old", NEXTCLOUD, "o"),
    ("dropbox", DROPBOX, "d"),
    ("dropbox_case", DROPBOX, "c"),
    ("mergetool", GIT_SIBLING, "m"),
    ("orig", GIT_SIBLING, "g"),
)
_ICLOUD = re.compile(rf"(?P<stem>.+) (?:[2-9]|[1-9]\d+){_MD}")
_GOOGLE_DRIVE = re.compile(rf"(?P<stem>.+) \([1-9]\d*\){_MD}")
# a Windows computer's own name, as Windows makes it up (the person may rename it: then a pattern says it)
_ONEDRIVE = re.compile(rf"(?P<stem>.+)-(?:DESKTOP-[A-Z0-9]{{7}}|LAPTOP-[A-Z0-9]{{8}})(?:-\d+)?{_MD}")


def _may_be_copy(name: str) -> bool:
    """A few substring tests every unambiguous copy name passes (ten times cheaper than the match that
    fails on an ordinary name: its ``.+`` branches backtrack)."""
    return "onflict" in name or "_B" in name or "_L" in name or "_R" in name or name.endswith(".orig")


def _numbered(relpath: str) -> bool:
    """``Name 2.md``: a space, then a number that does not start with 0 (iCloud's copies; ``Plan 01.md`` is not
    one of them)."""
    _head, space, number = relpath[:-3].rpartition(" ")
    return bool(space) and number.isdigit() and number[0] != "0"


@dataclass(frozen=True)
class CopyOf:
    """A conflict copy: which tool made it and the vault-relative path of the note it is a copy of."""

    source: str
    note: str


@dataclass(frozen=True)
class CopyNames:
    """How one vault's file names are read: its sync tools (``server.vault.sync_tools``), the person's
    patterns."""

    sync: frozenset[str] = frozenset()
    patterns: tuple[str, ...] = ()
    _compiled: tuple[re.Pattern[str], ...] = field(default=(), init=False, repr=False, compare=False)
    _beside: tuple[bool, bool, bool] = field(default=(False, False, False), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        compiled = []
        for p in self.patterns:
            try:
                compiled.append(pattern_regex(p))
            except ValueError:
                continue  # refused when set (validators): a hand-edited bad entry is skipped, not fatal
        object.__setattr__(self, "_compiled", tuple(compiled))
        object.__setattr__(self, "_beside", (ICLOUD in self.sync, GOOGLE_DRIVE in self.sync, ONEDRIVE in self.sync))

    def may_be_copy(self, relpath: str) -> bool:
        """Whether ``copy_of`` could find ``relpath`` a copy: a few substring tests of what the vault's rules
        look for (a person's own pattern: every name is asked). A cold index asks it of every file: 50k names
        in about 15 ms, where asking ``copy_of`` of each took 60."""
        if self._compiled or _may_be_copy(relpath):
            return True
        icloud, google_drive, onedrive = self._beside
        return (
            (icloud and _numbered(relpath))
            or (google_drive and relpath[-4:-3] == ")")
            or (onedrive and "TOP-" in relpath)
        )

    @classmethod
    def of(cls, sync: str | None, patterns: Iterable[str] = ()) -> CopyNames:
        return cls(frozenset(t for t in (sync or "").split(",") if t), tuple(patterns))

    def copy_of(self, relpath: str, exists: Callable[[str], bool]) -> CopyOf | None:
        """The note ``relpath`` is a conflict copy of, or None for a note (or any other file).
        ``exists(path)``: whether a note is at that vault-relative path (asked only for the names that are a
        copy only beside their note: iCloud's, Google Drive's and OneDrive's)."""
        folder, _sep, name = relpath.rpartition("/")
        prefix = f"{folder}/" if folder else ""
        m = _UNAMBIGUOUS.fullmatch(name) if _may_be_copy(name) else None
        if m is not None:
            for group, source, letter in _BRANCHES:
                if m.group(group) is not None:
                    ext = m.group(f"{letter}_ext") if letter != "g" else ""
                    return CopyOf(source, prefix + m.group(f"{letter}_stem") + (ext or ""))
        for rx in self._compiled:
            pm = rx.fullmatch(name)
            if pm is not None:
                return CopyOf(PATTERN, f"{prefix}{pm.group('stem')}{NOTE_SUFFIX}")
        if ICLOUD in self.sync and name[-4:-3].isdigit() and (im := _ICLOUD.fullmatch(name)) is not None:
            note = prefix + im.group("stem") + im.group("ext")
            if exists(note):
                return CopyOf(ICLOUD, note)
        if GOOGLE_DRIVE in self.sync and name[-4:-3] == ")" and (gm := _GOOGLE_DRIVE.fullmatch(name)) is not None:
            note = prefix + gm.group("stem") + gm.group("ext")
            if exists(note):
                return CopyOf(GOOGLE_DRIVE, note)
        if ONEDRIVE in self.sync and "TOP-" in name and (om := _ONEDRIVE.fullmatch(name)) is not None:
            note = prefix + om.group("stem") + om.group("ext")
            if exists(note):
                return CopyOf(ONEDRIVE, note)
        return None
