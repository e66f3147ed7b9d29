"""Where a file of a unit moves to: the checks on its new path before anything is written.

Its own room because it only judges paths (inside the vault, the folder made, the name still free, a
case-only rename on a case-insensitive file system) and never touches a note's bytes, while
``server.writes.multifile`` reads, rewrites, moves and puts back the files of a unit.
"""

from __future__ import annotations

import os
from pathlib import Path

from server.errors import KmsError
from server.vault.paths import is_within
from server.vault.registry import Vault


def case_only(real: Path, dest: Path) -> bool:
    """A rename that changes only the case of the name (``dest`` may be the same file on a
    case-insensitive file system)."""
    return real != dest and str(real).casefold() == str(dest).casefold()


def destination(vault: Vault, new_path: str, real: Path, *, make: bool = True) -> Path:
    """Where a moving file goes: its folder made (inside the vault only; not with ``make`` False, which only
    checks), the name still free (or the file itself under another case, on a case-insensitive file system).
    ``new_path`` was built by kms (a checked folder and name, ``.trash/...``, or a recorded path)."""
    folder, _, name = new_path.rpartition("/")
    parent = vault.root.joinpath(*folder.split("/")) if folder else vault.root
    if not is_within(parent, vault.root):
        raise KmsError("invalid-input", f"{folder!r} leads outside the vault")
    if make:
        parent.mkdir(parents=True, exist_ok=True)
        if not is_within(parent, vault.root) or not parent.is_dir():
            raise KmsError("invalid-input", f"{folder!r} leads outside the vault or is not a folder")
    dest = parent / name
    if (dest.exists() or dest.is_symlink()) and not (case_only(real, dest) and same_file(real, dest)):
        raise KmsError("already-exists", f"{new_path!r} already exists", path=new_path)
    return dest


def same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False
