"""What keeps a vault's folder in sync with other machines, told from the folder and where it is.

kms indexes one machine's copy; the tool under it decides how two machines' edits meet, which names its
conflict copies take (``server.vault.conflict_names``) and whether kms's own unasked writes should run here
(``sync.own_writes_here``). Looked for when a vault is added (``registry.add_vault``; a vault registered before
m053 at its next index, ``registry.settle_sync``) and kept with it (``vaults.sync``: a comma-separated list,
``''`` for none); ``kms vault set NAME sync=...`` corrects it. The signs, in the folder or a folder above it:

- ``git``: a ``.git`` folder or file (a work tree or a worktree's link);
- ``syncthing``: ``.stfolder`` (Syncthing's folder marker) or ``.stignore``;
- ``obsidian-sync``: ``.obsidian/sync.json``, or the core plugin ``sync`` turned on in
  ``.obsidian/core-plugins.json``;
- ``obsidian-git``: the plugin's folder ``.obsidian/plugins/obsidian-git``;
- ``nextcloud``: the desktop client's journal ``.sync_*.db`` / ``._sync_*.db`` (or ownCloud's ``.owncloudsync.log``);
- ``dropbox``: a folder ``Dropbox`` or ``Dropbox (Team)`` on the path, or ``.dropbox`` in it;
- ``onedrive``: a folder ``OneDrive``, ``OneDrive - Org`` or ``OneDrive-Personal`` (macOS) on the path;
- ``icloud``: ``Mobile Documents`` (macOS) or ``iCloudDrive`` / ``iCloud Drive`` (Windows) on the path;
- ``google-drive``: ``Google Drive``, ``My Drive`` or ``GoogleDrive-…`` (macOS) on the path.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from server.errors import KmsError

GIT = "git"
SYNCTHING = "syncthing"
OBSIDIAN_SYNC = "obsidian-sync"
OBSIDIAN_GIT = "obsidian-git"
NEXTCLOUD = "nextcloud"
DROPBOX = "dropbox"
ONEDRIVE = "onedrive"
ICLOUD = "icloud"
GOOGLE_DRIVE = "google-drive"
TOOLS = (GIT, SYNCTHING, OBSIDIAN_SYNC, OBSIDIAN_GIT, NEXTCLOUD, DROPBOX, ONEDRIVE, ICLOUD, GOOGLE_DRIVE)
NONE = "none"  # what ``kms vault set NAME sync=none`` says: nothing keeps it in sync

_NEXTCLOUD_JOURNAL = re.compile(r"\.?_?sync_[0-9a-fA-F]+\.db|\.owncloudsync\.log")
_PATH_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (DROPBOX, re.compile(r"Dropbox(?: \(.+\))?")),
    (ONEDRIVE, re.compile(r"OneDrive(?: - .+|-.+)?")),
    (ICLOUD, re.compile(r"Mobile Documents|iCloud ?Drive")),
    (GOOGLE_DRIVE, re.compile(r"Google Drive|My Drive|GoogleDrive-.+")),
)


def detect(root: Path) -> tuple[str, ...]:
    """The tools that keep ``root`` in sync, in ``TOOLS`` order (empty: none found)."""
    found: set[str] = set()
    root = Path(os.path.abspath(root))
    obsidian = root / ".obsidian"
    if (obsidian / "plugins" / "obsidian-git").is_dir():
        found.add(OBSIDIAN_GIT)
    if (obsidian / "sync.json").is_file() or _core_plugin_on(obsidian / "core-plugins.json", "sync"):
        found.add(OBSIDIAN_SYNC)
    for folder in (root, *root.parents):
        if os.path.lexists(folder / ".git"):
            found.add(GIT)
        if os.path.lexists(folder / ".stfolder") or os.path.lexists(folder / ".stignore"):
            found.add(SYNCTHING)
        if os.path.lexists(folder / ".dropbox"):
            found.add(DROPBOX)
        if _has_nextcloud_journal(folder):
            found.add(NEXTCLOUD)
    for part in root.parts:
        for tool, sign in _PATH_SIGNS:
            if sign.fullmatch(part):
                found.add(tool)
    return tuple(t for t in TOOLS if t in found)


def _has_nextcloud_journal(folder: Path) -> bool:
    try:
        with os.scandir(folder) as it:
            return any(
                e.name.startswith((".sync_", "._sync_", ".owncloud")) and _NEXTCLOUD_JOURNAL.fullmatch(e.name)
                for e in it
            )
    except OSError:
        return False


def _core_plugin_on(path: Path, plugin: str) -> bool:
    """Whether Obsidian's ``core-plugins.json`` turns ``plugin`` on (a list of the ones on, or, since Obsidian
    1.4, a map of each to true/false)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    if isinstance(data, dict):
        return data.get(plugin) is True
    return isinstance(data, list) and plugin in data


def parse(text: str) -> str:
    """What ``sync=`` may say: tools from ``TOOLS`` separated by commas, or ``none``; the stored form
    (``TOOLS`` order, ``''`` for none). ``invalid-input`` names the tools otherwise."""
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words == [NONE]:
        return ""
    unknown = [w for w in words if w not in TOOLS]
    if unknown or not words:
        raise KmsError(
            "invalid-input",
            f"sync={text!r}: say one or more of {', '.join(TOOLS)} (comma-separated), or none",
        )
    return ",".join(t for t in TOOLS if t in words)


def describe(stored: str | None) -> str:
    """A vault's sync as people read it: the tools, ``none``, or ``not looked yet``."""
    if stored is None:
        return "not looked yet"
    return stored.replace(",", ", ") if stored else NONE
