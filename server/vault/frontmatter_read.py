"""Read a note's frontmatter: where it ends, what its YAML says, and its list properties as strings.

Frontmatter is read as YAML 1.2 (yaml-rs, a Rust parser that passes the YAML test suite), as
current tools (js-yaml 4, ruamel.yaml) read it: ``status: yes`` is the text "yes", ``time: 10:30``
the text "10:30", ``on:`` the key "on" (PyYAML's YAML 1.1 made them ``True``, the number 630 and
the key ``True``). It is much faster than PyYAML's constructor, which was a large share of a cold
index's parsing (docs/benchmarks.md), and bounds alias expansion, so a "billion laughs" note cannot
exhaust memory. A repeated key keeps its last value, as before. On the 10k bench vault and the two
sample vaults both read every frontmatter the same. (Writing frontmatter is ``server.vault.frontmatter``.)
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from typing import Any

import yaml_rs

from server.vault import markdown


def split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """Return (raw YAML or None, body, body offset); an unclosed block is no frontmatter."""
    try:
        span = markdown.frontmatter_span(text)
    except markdown.Unclosed:
        span = None
    if span is None:
        return None, text, 0
    return markdown.frontmatter_yaml(text, span), text[span.body_start :], span.body_start


class _ComplexKey(ValueError):
    """``date: {{date}}`` is valid YAML 1.2 (a mapping keyed by a mapping), but no note means it."""


def _key(k: Any) -> str:
    if isinstance(k, frozenset | tuple):  # how yaml-rs gives a mapping or list used as a key
        raise _ComplexKey
    return str(k)


def _jsonable(value: Any) -> Any:
    if value.__class__ is str:  # by far the most common: leave at once
        return value
    if isinstance(value, dict):
        return {_key(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set):
        return [_jsonable(v) for v in value]
    if isinstance(value, _dt.date | _dt.datetime | _dt.time):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


def parse_frontmatter(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    if raw is None:
        return None, None
    if not raw.strip():
        return {}, None
    try:
        data = yaml_rs.loads(raw, duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.LastWins)
    except yaml_rs.YAMLDecodeError as exc:
        return None, f"invalid YAML: {_yaml_problem(str(exc))}"
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a panic in the Rust parser is a BaseException
        return None, f"invalid YAML: the parser failed ({type(exc).__name__})"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, f"frontmatter is a {type(data).__name__}, not a mapping"
    try:
        return _jsonable(data), None
    except _ComplexKey:
        where = f" (frontmatter line {raw.count(chr(10), 0, raw.index('{{')) + 1})" if "{{" in raw else ""
        return None, "invalid YAML: a mapping used as a key (an unfilled template placeholder like {{date}}?)" + where


_YAML_AT = re.compile(r"^YAML parse error at line (\d+), column \d+$")


def _yaml_problem(message: str) -> str:
    """yaml-rs says 'YAML parse error at line N, column C', a source excerpt, then the problem:
    keep the problem and the line, as one line."""
    lines = message.splitlines()
    at = _YAML_AT.match(lines[0]) if lines else None
    if at is None:
        return lines[0] if lines else "unreadable"
    return f"{lines[-1].strip()} (frontmatter line {at.group(1)})"


def string_list(value: Any) -> list[str]:
    """A list property as strings: a text splits on commas and spaces (``tags: a, b``)."""
    if value is None:
        return []
    if isinstance(value, str):
        return [p for p in re.split(r"[,\s]+", value) if p]
    if isinstance(value, list):
        out: list[str] = []
        for v in value:
            out.extend(string_list(v) if isinstance(v, str) else ([str(v)] if v is not None else []))
        return out
    return [str(value)]


def alias_list(value: Any) -> list[str]:
    """An alias property as strings: a text is one alias, spaces and all."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [str(v).strip() for v in value if v is not None and str(v).strip()]
    return [str(value)]


def walk_strings(value: Any) -> Iterator[str]:
    """Every text inside a frontmatter value (where ``related: \"[[Other]]\"`` links hide)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from walk_strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from walk_strings(v)
