"""YAML 1.2 core-schema meanings for plain and tagged scalars, the readers' limits and errors: what the simple
reader (``server.vault.yaml12``) and the full one (``server.vault.yaml12_full``) share, so that neither imports
the other's module back (the full reader, and PyYAML under it, is imported only for what the simple one
declines). The rules themselves are in ``yaml12``'s docstring."""

from __future__ import annotations

import datetime as _dt
import math
import re
from typing import Any

MAX_ALIAS_REPLAYS = 10_000  # values built again through aliases; frontmatter never comes near
MAX_DEPTH = 256  # lists and mappings inside each other (yaml-rs's bound too); what reads the result recurses

_CORE = "tag:yaml.org,2002:"

_NULLS = frozenset(("", "~", "null", "Null", "NULL"))
_TRUE = frozenset(("true", "True", "TRUE"))
_FALSE = frozenset(("false", "False", "FALSE"))
_INF = {".inf": math.inf, "+.inf": math.inf, "-.inf": -math.inf}
NUMERIC_START = frozenset("0123456789+-._")

_DEC = re.compile(r"[-+]?[0-9_]*[0-9][0-9_]*")
_BASED = re.compile(r"([-+]?)0(?:([xX])[0-9a-fA-F_]*|([oO])[0-7_]*|([bB])[01_]*)")
_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")
_DATE = re.compile(r"([0-9]{4})-([0-9]{2})-([0-9]{2})")
_DATETIME = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt \t]([0-9]{2}):([0-9]{2})(?::([0-9]{2})(?:\.([0-9]+))?)?"
    r"(?:[ \t]?(Z|([-+])([0-9]{1,2})(?::([0-9]{2}))?))?"
)


class YamlError(ValueError):
    """The text is not YAML kms can read: ``problem`` says why, ``line`` (1-based) where, when known."""

    def __init__(self, problem: str, line: int | None = None) -> None:
        super().__init__(problem if line is None else f"{problem} (line {line})")
        self.problem = problem
        self.line = line


class TooManyAliases(YamlError):
    """Aliases that expand past ``MAX_ALIAS_REPLAYS`` values: a "billion laughs", never a real note."""


class ComplexKey(YamlError):
    """A mapping or list used as a key: valid YAML, but no note means it (``date: {{date}}``, a template)."""

    def __init__(self) -> None:
        super().__init__("a mapping used as a key")


def _int(text: str) -> int | None:
    if _DEC.fullmatch(text):
        return int(text.replace("_", ""))
    m = _BASED.fullmatch(text)
    if m is None:
        return None
    digits = text[len(m.group(1)) + 2 :].replace("_", "")
    if not digits:
        return None
    value = int(digits, 16 if m.group(2) else 8 if m.group(3) else 2)
    return -value if m.group(1) == "-" else value


def _float(text: str) -> float | None:
    lower = text.lower()
    if lower in _INF:
        return _INF[lower]
    if lower == ".nan":
        return math.nan
    bare = text.replace("_", "")
    if bare[:1] in ("+", "-") and text[0] != bare[0]:  # ``_-1``: the sign comes first or the text is no number
        return None
    return float(bare) if _FLOAT.fullmatch(bare) else None


def _timestamp(text: str) -> _dt.date | None:
    m = _DATE.fullmatch(text)
    try:
        if m is not None:
            return _dt.date(int(m[1]), int(m[2]), int(m[3]))
        m = _DATETIME.fullmatch(text)
        if m is None:
            return None
        tz: _dt.tzinfo | None = None
        if m[8] == "Z":
            tz = _dt.UTC
        elif m[8]:
            hours, minutes = int(m[10]), int(m[11] or 0)
            if hours > 23 or minutes > 59:
                return None
            offset = _dt.timedelta(hours=hours, minutes=minutes)
            tz = _dt.timezone(-offset if m[9] == "-" else offset)
        micro = int(m[7][:6].ljust(6, "0")) if m[7] else 0
        return _dt.datetime(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(m[5]), int(m[6] or 0), micro, tz)
    except ValueError:  # not a calendar date or time (2023-02-29, 24:00): text
        return None


WORDS: dict[str, Any] = {**dict.fromkeys(_NULLS), **dict.fromkeys(_TRUE, True), **dict.fromkeys(_FALSE, False)}
MISS = object()  # (``WORDS.get(text, MISS)``: not one of the words)
_NUMBERS: dict[str, Any] = {}  # what numeric-looking texts resolved to: frontmatter repeats its dates and numbers
_NUMBERS_MAX = 4096  # entries (each text at most 40 characters): then it starts again


def resolve_plain(text: str) -> Any:
    """What an untagged, unquoted scalar means (the module docstring lists the forms)."""
    word = WORDS.get(text, MISS)
    if word is not MISS:
        return word
    if text[0] not in NUMERIC_START:
        return text
    known = _NUMBERS.get(text, MISS)
    if known is not MISS:
        return known
    number: Any = _int(text)
    if number is None:
        number = _float(text)
    if number is None and len(text) >= 10:
        number = _timestamp(text)
    value = text if number is None else number
    if len(text) <= 40:
        if len(_NUMBERS) >= _NUMBERS_MAX:
            _NUMBERS.clear()
        _NUMBERS[text] = value
    return value


def tagged_scalar(tag: str, text: str) -> Any:
    """A scalar under an explicit tag: the core ones must fit it (``!!int x`` is an error), others read as text."""
    if not tag.startswith(_CORE):
        return text
    name = tag[len(_CORE) :]
    value: Any
    if name == "int":
        value = _int(text)
    elif name == "float":
        value = _float(text)
        if value is None:
            whole = _int(text)
            value = None if whole is None else float(whole)
    elif name == "bool":
        value = True if text in _TRUE else False if text in _FALSE else None
    elif name == "null":
        if text in _NULLS:
            return None
        value = None
    elif name == "binary":  # kept as its text: a note's property is never bytes
        return text
    else:
        raise YamlError(f"Invalid tag: '!!{name}'")
    if value is None:
        raise YamlError(f"Invalid value '{text}' for '!!{name}' tag")
    return value
