"""The settings file on disk: a round-trip TOML document (``tomlkit``, so the person's comments and layout
survive ``kms config set``) and the atomic write (temp file in the same folder, fsync, rename, mode 0600,
since custom servers may carry tokens)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from server.config.schema import SettingsFileError


def read_document(path: Path) -> Any:
    """The file as a round-trip ``tomlkit`` document (comments kept); SettingsFileError if unparsable."""
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
