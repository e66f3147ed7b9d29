"""The settings' errors, which every front end shows to the person (the schema raises them; its grammar and
the settings file too)."""

from __future__ import annotations

from typing import Any


class SettingsError(ValueError):
    """Base class for every settings problem a front end should show to the person."""


class UnknownSettingError(SettingsError):
    """The key is not in the schema; ``suggestions`` are the closest known keys."""

    def __init__(self, key: str, suggestions: list[str]):
        self.key = key
        self.suggestions = suggestions
        hint = f" Did you mean: {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"Unknown setting '{key}'.{hint} (`kms config list` shows all keys.)")


class SettingValueError(SettingsError):
    """A value does not fit the key; ``valid`` says what would."""

    def __init__(self, key: str, value: Any, message: str, valid: str):
        self.key = key
        self.value = value
        self.problem = message
        self.valid = valid
        super().__init__(f"Invalid value for {key}: {message}. Valid values: {valid}")


class SettingsFileError(SettingsError):
    """The config file exists but cannot be parsed; we refuse to overwrite it."""
