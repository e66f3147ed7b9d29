"""Read YAML as current tools do (YAML 1.2 core schema), on PyYAML's C parser: note frontmatter and ``dendron.yml``.

Why this module and not a YAML 1.2 library: kms read frontmatter with yaml-rs 0.1.6 (Rust), and a native
extension imported on a thread that then exits crashed the process at its next use on another thread (issue
37: ``kms mcp`` warms the write modules on a short-lived thread; the next write segfaulted). PyYAML is mature,
already a dependency, and its C parser (libyaml) has no such state; only its *resolver* is YAML 1.1, so kms
resolves plain scalars itself here, the way yaml-rs did (tests/data/frontmatter_yaml_rs.json holds what the
old reader returned, and tests/unit/test_frontmatter_parity.py keeps the two equal):

- ``yes``/``no``/``on``/``off``/``y``/``n`` are text; booleans are ``true``/``True``/``TRUE`` and the false ones;
  null is ``~``, ``null``, ``Null``, ``NULL`` or nothing; ``12:30`` is text (no base-60 numbers).
- integers: decimal (``010`` is ten: YAML 1.2 has no leading-zero octal), ``0o17``, ``0x1F``, ``0b101``, with
  an optional sign; floats: ``1.5``, ``.5``, ``1.``, ``1e3``, ``.inf``/``-.inf``, ``.nan``. Underscores are
  ignored inside numbers (``1_000``), as yaml-rs did.
- ``2024-01-01`` is a date and ``2024-01-01T10:20[:30[.f]][Z|±hh[:mm]]`` a datetime (a space or tab may stand
  for the ``T``), when they are real calendar values; otherwise text.
- no merge keys (``<<`` is an ordinary key), an unknown tag reads the value under it (``!foo 1`` is "1"), an
  alias to a node still being read is null, and aliases may not expand to more than ``MAX_ALIAS_REPLAYS``
  values (a "billion laughs" note is an error, not a full memory); lists and mappings nest at most
  ``MAX_DEPTH`` deep.
- where yaml-rs was laxer than YAML (a tab before a key, a control character, U+2028 inside a value) the text is
  an error now, and a byte-order mark before the first key is dropped, not kept in the key (the parity test
  lists these four). Inside ``[ ]``, libyaml reads an item opening with ``?`` or ``:`` (``[?x]``, ``[:x]``)
  or ending with ``:`` as YAML 1.1 does (a mapping, or an error), where yaml-rs read text. Some texts yaml-rs
  refused or failed on now read (a quoted text going on at the list's own indentation, a mapping key inside a
  mapping key that a repeated key replaces).

``load`` first tries ``load_simple``, a reader for the frontmatter almost every note has (``key: value``
lines, ``[a, b]`` lists and ``- item`` lists of plain or simply quoted values, template placeholders): the C
parser's events, built into values in Python, cost about four times what yaml-rs took; the simple reader keeps
the index's speed (docs/benchmarks.md). Anything else it declines, and ``load_full`` reads it.
"""

from __future__ import annotations

import datetime as _dt
import functools
import re
from typing import Any

from server.vault.yaml12_scalars import (
    MAX_ALIAS_REPLAYS,
    MAX_DEPTH,
    MISS,
    NUMERIC_START,
    WORDS,
    ComplexKey,
    TooManyAliases,
    YamlError,
    resolve_plain,
)

# what callers use, the limits and errors of ``yaml12_scalars`` among them
__all__ = [
    "MAX_ALIAS_REPLAYS",
    "MAX_DEPTH",
    "ComplexKey",
    "TooManyAliases",
    "YamlError",
    "load",
    "load_full",
    "load_simple",
]


def load_full(text: str) -> Any:
    """The whole YAML reader (``load`` tries the simple one first); raises ``YamlError``."""
    from server.vault.yaml12_full import load_events  # deferred: PyYAML only for what the simple reader declines

    return load_events(text)


# ----- the simple reader ------------------------------------------------------------------------------------

# A line of simple frontmatter: ``key: value``, ``key:`` (a list follows, or nothing), ``- item`` or blank. The
# values hold only characters every YAML reader takes as they are: no tab, CR, control character, BOM or
# Unicode line separator (``load_full`` reads those, and tells what is wrong).
_CHAR = "[\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
_FIRST = "[\x21-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"  # not a space
# Characters outside these go to ``load_full``: tab, CR, control characters, BOM, Unicode line separators.
_NOT_SIMPLE_ASCII = re.compile("[^\n\x20-\x7e]")
_NOT_SIMPLE_TEXT = "[^\n\x20-\x7e\u00a0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"


@functools.cache
def _not_simple() -> re.Pattern[str]:
    """Compiled at the first non-ASCII frontmatter: its ranges take ~4 ms to compile, at every start."""
    return re.compile(_NOT_SIMPLE_TEXT)


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*(?: [A-Za-z0-9_-]+)*")
_TEXT_KEYS: set[str] = set()  # keys seen to be simple text (notes share their keys): no regex for them again
_TEXT_KEYS_MAX = 4096
_INDICATORS = frozenset("-?:,[]{}#&*!|>'\"%@`")
# An item of a ``[a, "b", 'c']`` list and its comma: quoted without escapes, or plain without quotes or brackets.
_FLOW_ITEM = re.compile(r" *(?:\"([^\"\\]*)\"|'([^']*)'|([^ ,\[\]{}\"'][^,\[\]{}\"']*?)) *(?:,|$)")
_DIGIT_OR_DOT = frozenset("0123456789.")
_DATES = (_dt.date, _dt.datetime)
_DECLINED = object()
_PLACEHOLDER = re.compile(r"\{\{ *[A-Za-z0-9_-]+ *\}\}")  # ``{{date}}``: a mapping keyed by a mapping
_PLACEHELD = object()


def _simple_plain(text: str) -> bool:
    """A plain scalar that means the same wherever it stands: no indicator first (``-5`` is a number, not an
    item), no ``: `` or `` #`` in it, no ``:`` last."""
    first = text[0]
    if first in _INDICATORS and not (first == "-" and len(text) > 1 and text[1] in _DIGIT_OR_DOT):
        return False
    return not (": " in text or " #" in text or text[-1] == ":")


def _as_text(value: Any) -> Any:
    return value.isoformat() if isinstance(value, _dt.date) else value


def _quoted(text: str) -> Any:
    """``"text"`` or ``'text'`` with no escape and no quote inside: its text, else ``_DECLINED``."""
    quote = text[0]
    body = text[1:-1]
    if len(text) < 2 or text[-1] != quote or quote in body or (quote == '"' and "\\" in body):
        return _DECLINED
    return body


def _plain_item(item: str, dates_as_text: bool) -> Any:
    """An item of a ``[ ]`` list: ``_simple_plain`` and ``resolve_plain``, inline (every tag list goes here)."""
    if not item:
        return _DECLINED
    first = item[0]
    if first in _INDICATORS and not (first == "-" and len(item) > 1 and item[1] in _DIGIT_OR_DOT):
        return _DECLINED
    if ": " in item or " #" in item or item[-1] == ":":
        return _DECLINED
    value = WORDS.get(item, MISS)
    if value is MISS:
        if first not in NUMERIC_START:
            return item
        value = resolve_plain(item)
    return value.isoformat() if dates_as_text and value.__class__ in _DATES else value


def _indicated(text: str, flow_list: bool, dates_as_text: bool) -> Any:
    """A value that starts with an indicator: a simply quoted text, a number like ``-5``, (where ``flow_list``)
    a ``[a, "b"]`` list of plain or simply quoted values; anything else is ``_DECLINED``."""
    first = text[0]
    if first == '"' or first == "'":
        return _quoted(text)
    if first == "-" and _simple_plain(text):
        return resolve_plain(text)
    if first == "{" and _PLACEHOLDER.fullmatch(text):
        return _PLACEHELD
    if not (flow_list and first == "[" and text[-1] == "]"):
        return _DECLINED
    inner = text[1:-1]
    if not inner.strip(" "):
        return []
    items = []
    if not ('"' in inner or "'" in inner or "[" in inner or "]" in inner or "{" in inner or "}" in inner):
        # ``[a, b]``: no item quoted, none a collection, so the commas split it
        parts = inner.split(",")
        if not parts[-1].strip(" "):  # ``[a, b,]``: a trailing comma ends the list
            parts.pop()
        for part in parts:
            value = _plain_item(part.strip(" "), dates_as_text)
            if value is _DECLINED:
                return _DECLINED
            items.append(value)
        return items
    at = 0
    for m in _FLOW_ITEM.finditer(inner):
        if m.start() != at:  # something between two items that is neither an item nor a comma
            return _DECLINED
        at = m.end()
        plain = m.group(3)
        if plain is None:
            items.append(m.group(1) if m.group(1) is not None else m.group(2))
            continue
        value = _plain_item(plain, dates_as_text)
        if value is _DECLINED:
            return _DECLINED
        items.append(value)
    return items if at == len(inner) else _DECLINED


def _text_key(key: str) -> bool:
    """``title``, ``due date``: a key that is text as it stands (not ``true``, ``null``, ``_1``, ``a.b``)."""
    if key in _TEXT_KEYS:
        return True
    if not _KEY.fullmatch(key) or resolve_plain(key).__class__ is not str:
        return False
    if len(_TEXT_KEYS) >= _TEXT_KEYS_MAX:
        _TEXT_KEYS.clear()
    _TEXT_KEYS.add(key)
    return True


def load_simple(text: str, dates_as_text: bool = False) -> dict[str, Any] | None:
    """The mapping when ``text`` is simple frontmatter, else None: ``load_full`` reads it. Simple: every line is
    ``key: value``, ``key:`` (then ``- item`` lines, or nothing), ``- item`` or blank, each value a plain or
    simply quoted scalar, or a ``[a, b]`` list of plain ones. ``dates_as_text``: dates as ISO text (frontmatter's
    JSON form). Raises ``ComplexKey`` for a simple frontmatter with a template placeholder (``date: {{date}}``),
    as ``load_full`` does: templates are many notes in a vault. Written inline, one pass: this is every note's
    frontmatter at index time (bench/bench_yaml.py)."""
    if (_NOT_SIMPLE_ASCII if text.isascii() else _not_simple()).search(text) is not None:
        return None
    out: dict[str, Any] = {}
    items: list[Any] | None = None  # the list the ``- item`` lines under an empty ``key:`` build
    key = ""
    indent = -1
    placeheld: set[str] = set()  # the keys whose value holds a ``{{placeholder}}`` (a repeated key replaces it)
    text_keys, words, numeric = _TEXT_KEYS, WORDS, NUMERIC_START
    for line in text.split("\n"):
        if not line:
            continue
        first = line[0]
        if first == " " or first == "-":
            raw = line.lstrip(" ")
            if not raw:
                continue
            if raw[:2] != "- " or items is None:  # ``a: x`` then ``  - y``: a plain text going on, not a list
                return None
            if indent == -1:
                indent = len(line) - len(raw)
                out[key] = items
            elif len(line) - len(raw) != indent:
                return None
            raw = raw[2:].strip(" ")
            if not raw:
                return None
        else:
            key, colon, rest = line.partition(":")
            if not colon or (key not in text_keys and not _text_key(key)):
                return None
            raw = rest.strip(" ")
            if not raw:
                out[key], items, indent = None, [], -1
                placeheld.discard(key)
                continue
            if rest[0] != " ":  # ``a:b`` is one text, not a key and a value
                return None
            items = None
        if raw[0] in _INDICATORS:
            value = _indicated(raw, items is None, dates_as_text)
            if value is _DECLINED:
                return None
            if value is _PLACEHELD:
                placeheld.add(key)
        else:
            if ": " in raw or " #" in raw or raw[-1] == ":":
                return None
            value = words.get(raw, MISS)
            if value is MISS:
                value = raw if raw[0] not in numeric else resolve_plain(raw)
        if dates_as_text and value.__class__ in _DATES:
            value = value.isoformat()
        if items is None:
            out[key] = value
            if value is not _PLACEHELD:
                placeheld.discard(key)
        else:
            items.append(value)
    if placeheld:
        raise ComplexKey
    return out or None  # blank: no document, not an empty mapping (``load_full`` says so)


def load(text: str) -> Any:
    """What a YAML text holds (YAML 1.2 core, as the module docstring says); raises ``YamlError``."""
    simple = load_simple(text)
    return simple if simple is not None else load_full(text)
