"""One row of the settings table: ``Setting`` (key, type, default, environment variable, help) and the
``AUTO`` default marker. Its own module so the table's sections (``schema`` and
``schema_connections``) both build rows without importing each other."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

Source = Literal["default", "file", "env", "override"]
ValueType = Literal["bool", "int", "path", "globs", "text"]


class _Auto:
    """Default marker: on once a vault is registered (resolved at load time)."""

    def __repr__(self) -> str:
        return "auto"


AUTO: Any = _Auto()


@dataclass(frozen=True)
class Setting:
    """One key of the schema.

    ``validator`` checks a parsed value and returns an error message or None.
    ``parent`` names a switch that must also be on for this one to have an effect
    (turning the child on while the parent is off is allowed, but warned about).
    """

    key: str
    type: ValueType
    default: Any
    description: str
    env: str
    validator: Callable[[Any], str | None] | None = None
    parent: str | None = None
    valid: str = ""
    means: Callable[[Any], list[str]] | None = None  # what a value allows, in words (kms config list)

    @property
    def auto(self) -> bool:
        return self.default is AUTO

    def valid_values(self) -> str:
        if self.valid:
            return self.valid
        return {
            "bool": "true/false (also on/off, yes/no, 1/0)" + (", auto" if self.auto else ""),
            "int": "a whole number",
            "path": "a directory path ('' = platform default)",
            "globs": "folder globs such as 'inbox' (that folder and below) 'drafts/*' (the notes directly in drafts/)",
            "text": "a word ('' = none)",
        }[self.type]
