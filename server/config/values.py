"""A setting's values: text (the command line, an environment variable) into a typed, validated value
(``parse_value``), a typed value (as TOML reads it) checked (``validate_value``), and a value shown as the
settings file writes it (``format_value``). The settings themselves are ``schema``'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from server.config.allowlist import normalize_folder_glob
from server.config.schema import SettingValueError, setting
from server.config.setting_row import AUTO

_TRUE = {"1", "true", "yes", "on", "y", "t"}
_FALSE = {"0", "false", "no", "off", "n", "f"}


def parse_value(key: str, values: Sequence[str] | str) -> Any:
    """Turn CLI/env text into a typed, validated value (``AUTO`` for 'auto' on auto keys)."""
    s = setting(key)
    items = [values] if isinstance(values, str) else list(values)
    if s.type == "globs":  # several values and/or comma/newline separated (one list in one variable)
        flat = [p for item in items for line in item.splitlines() for p in line.split(",") if p.strip()]
        value: Any = list(dict.fromkeys(normalize_folder_glob(p) for p in flat))
    else:
        if len(items) != 1:
            raise SettingValueError(key, items, f"expected one value, got {len(items)}", s.valid_values())
        text = items[0].strip()
        if s.type == "bool":
            if s.auto and text.lower() == "auto":
                return AUTO
            try:
                value = parse_flag(text)
            except ValueError as e:
                raise SettingValueError(key, text, str(e), s.valid_values()) from None
        elif s.type == "int":
            try:
                value = int(text.replace("_", ""))
            except ValueError:
                raise SettingValueError(key, text, f"{text!r} is not a whole number", s.valid_values()) from None
        else:  # path, text
            value = text or None
    return validate_value(key, value)


def validate_value(key: str, value: Any) -> Any:
    """Check a typed value (as read from TOML) against the schema; return it normalized."""
    s = setting(key)
    if value is AUTO and s.auto:
        return value
    ok = {
        "bool": lambda v: isinstance(v, bool),
        "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
        "path": lambda v: v is None or isinstance(v, str),
        "text": lambda v: v is None or isinstance(v, str),
        "globs": lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
    }[s.type](value)
    if not ok:
        raise SettingValueError(key, value, f"{value!r} has the wrong type", s.valid_values())
    if s.type == "globs":
        value = list(dict.fromkeys(normalize_folder_glob(p) for p in value))
    if s.type in ("path", "text") and not value:
        value = None
    if s.validator:
        problem = s.validator(value)
        if problem:
            raise SettingValueError(key, value, problem, s.valid_values())
    return value


def format_value(value: Any) -> str:
    """Human text for a value, the same in the CLI and the TUI."""
    if value is AUTO:
        return "auto"
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "(not set)"
    if isinstance(value, list):
        return " ".join(value) if value else "(empty)"
    return str(value)


def parse_flag(text: str) -> bool:
    """A switch as the schema spells it (1/0, true/false, on/off, yes/no); ValueError otherwise."""
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"{text!r} is not a switch value")
