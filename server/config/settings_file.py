"""The settings file on disk: a round-trip TOML document (``tomlkit``, so the person's comments and layout
survive ``kms config set``) and the atomic write (temp file in the same folder, fsync, rename, mode 0600,
since custom servers may carry tokens).

The file's grammar is versioned (``settings_version``, a top-level key; a file without it is version 1).
``upgrade`` brings a document read from an older file to ``SETTINGS_VERSION``, the same way for the reader
(``load_settings``, in memory) and for every change (``settings._modify``, in the file), and says what
it changed, so nothing a person allowed before means something else now:

- 2: ``write.allowlist`` entries are globs over a note's path (``server.config.allowlist``); a version 1
  entry named the note's folder, so each becomes ``from_folder_glob`` of itself (``drafts`` ->
  ``drafts/*``, ``drafts/*`` -> ``drafts/*/*``, ``/`` -> ``*``).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from server.config.allowlist import from_folder_glob
from server.config.schema import SettingsFileError

SETTINGS_VERSION = 2
VERSION_KEY = "settings_version"


def file_version(doc: Any) -> int:
    """The grammar version a settings document was written in (1: no ``settings_version`` key)."""
    v = doc.get(VERSION_KEY, 1)
    return v if isinstance(v, int) and not isinstance(v, bool) else 1


def upgrade(doc: Any) -> list[str]:
    """Bring ``doc`` (a plain dict or a tomlkit document) to ``SETTINGS_VERSION`` in place; what changed."""
    notes: list[str] = []
    if file_version(doc) >= SETTINGS_VERSION:
        return notes
    table = doc.get("write")
    holders = [(table, "allowlist")] if isinstance(table, dict) else []
    holders.append((doc, "write.allowlist"))  # a quoted dotted key
    for holder, key in holders:
        old = holder.get(key)
        if isinstance(old, list) and all(isinstance(p, str) for p in old):
            new = list(dict.fromkeys(from_folder_glob(p) for p in old))
            holder[key] = new
            if old:
                notes.append(
                    f"write.allowlist {' '.join(old)} -> {' '.join(new)}: entries are globs over a note's path "
                    "now, so each allows exactly what it did (settings version 2)"
                )
    doc[VERSION_KEY] = SETTINGS_VERSION
    return notes


def read_document(path: Path) -> Any:
    """The file as a round-trip ``tomlkit`` document (comments kept); SettingsFileError if unparsable."""
    # deferred: tomlkit only when the file is edited, never to read it
    import tomlkit
    from tomlkit.exceptions import TOMLKitError

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
    except (OSError, UnicodeDecodeError) as e:
        raise SettingsFileError(f"Cannot read {path}: {e}") from e
    try:
        tomllib.loads(text)  # the reader's verdict, so a file kms cannot read is never rewritten
        return tomlkit.parse(text)
    except (tomllib.TOMLDecodeError, TOMLKitError) as e:
        raise SettingsFileError(f"Cannot read {path}: {e}") from e


def prune_in_place(doc: Any) -> None:
    """Drop tables an unset left empty, inside the document (its comments stay)."""
    for key in list(doc):
        value = doc[key]
        if isinstance(value, dict):
            prune_in_place(value)
            if not value:
                del doc[key]


def write_text(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
