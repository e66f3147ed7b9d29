"""What a setting's value may be, one check per kind of value: each answers None, or why the value is
refused (the settings schema, ``server.config.schema``, names one for each key that needs it)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from server.config.allowlist import folder_glob_problem


def int_range(lo: int, hi: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if lo <= value <= hi else f"{value} is outside {lo}..{hi}"

    return check


def one_of(*choices: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        return None if value in choices else f"{value!r} is not one of {', '.join(choices)}"

    return check


def check_globs(value: Any) -> str | None:
    for pattern in value:
        problem = folder_glob_problem(pattern)
        if problem:
            return problem
    return None


def check_hide_folders(value: Any) -> str | None:
    for pattern in value:
        if pattern.startswith(("/", "~")) or re.match(r"^[A-Za-z]:", pattern) or "\\" in pattern:
            return f"{pattern!r}: use a vault-relative folder glob with '/' (such as 'journal/**')"
        if any(part in (".", "..") for part in pattern.split("/")) or pattern in ("/", "."):
            return f"{pattern!r}: '.' and '..' are not folder names (to hide a whole vault, remove it)"
    return None


def check_hide_tags(value: Any) -> str | None:
    for pattern in value:
        if not pattern.lstrip("#") or any(c.isspace() for c in pattern):
            return f"{pattern!r}: a tag or tag glob without spaces (such as 'private' or 'personal/*')"
    return None


def check_memory_folder(value: Any) -> str | None:
    if value is None:
        return None  # empty: agents keep no memory
    if any(c in value for c in "*?[]") or "," in value:
        return f"{value!r}: one plain folder, not a glob"
    problem = folder_glob_problem(value)
    if problem or value.strip() in ("/", "."):
        return problem or f"{value!r}: a folder inside the vault, not its root"
    return None


def check_capture_folder(value: Any) -> str | None:
    """Session notes always need a folder: '' does not turn capture off (capture.enabled does), so it is
    refused with the setting that does, not read as "no folder"."""
    if value is None:
        return "session notes need a folder; `kms config set capture.enabled off` turns session capture off"
    return check_memory_folder(value)


def check_key(value: Any) -> str | None:
    if value is not None and (not value.strip() or any(c.isspace() or c in ":#" for c in value)):
        return f"{value!r}: one frontmatter key, without spaces, ':' or '#'"
    return None
