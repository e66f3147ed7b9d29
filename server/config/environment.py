"""The ``KMS_*`` environment in the settings' grammar: every variable kms knows (the settings' own and
``OTHER_ENV``), one setting's value read from it, a value written for it, and "did you mean"."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from server.config.env_names import OTHER_ENV
from server.config.schema import SETTINGS, setting
from server.config.values import parse_value


def env_text(value: Any) -> str:
    """A value as an environment variable carries it (flags as 1/0, lists comma-joined)."""
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(value)
    return "" if value is None else str(value)


LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def env_vars() -> dict[str, str]:
    """Every ``KMS_*`` variable kms knows -> its setting key, or '' for the other variables."""
    return {**{s.env: s.key for s in SETTINGS.values() if s.env}, **dict.fromkeys(OTHER_ENV, "")}


def suggest_env(name: str, limit: int = 3) -> list[str]:
    """Closest known variable names, for 'did you mean'."""
    # deferred: rapidfuzz only to suggest a name for an unknown variable
    from rapidfuzz import fuzz, process

    found = process.extract(name.upper(), list(env_vars()), scorer=fuzz.ratio, limit=limit)
    return [n for n, score, _ in found if score >= 70]


def env_value(key: str, env: Mapping[str, str]) -> tuple[bool, Any]:
    """(set?, typed value) of one setting's environment variable, parsed by ``parse_value``.

    An empty value counts as unset for switches and numbers (hosts write empty variables), and
    as the empty list / no path for globs and paths. Raises ``SettingValueError`` when invalid.
    """
    s = setting(key)
    raw = env.get(s.env) if s.env else None  # privacy rules: the settings file only
    if raw is None or (not raw.strip() and s.type in ("bool", "int")):
        return False, None
    return True, parse_value(key, raw)
