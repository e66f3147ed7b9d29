"""Read a note's frontmatter: where it ends, what its YAML says, and its list properties as strings.

Frontmatter is read as YAML 1.2 (``server.vault.yaml12``: PyYAML's C parser with the 1.2 core
schema's meanings), as current tools (js-yaml 4, ruamel.yaml) read it: ``status: yes`` is the text
"yes", ``time: 10:30`` the text "10:30", ``on:`` the key "on" (PyYAML's own YAML 1.1 resolver made
them ``True``, the number 630 and the key ``True``). Alias expansion is bounded, so a "billion laughs"
note cannot exhaust memory. A repeated key keeps its last value. Until issue 37 yaml-rs (Rust) read
it; tests/data/frontmatter_yaml_rs.json keeps what it returned and the parity test holds the reader to
it. (Writing frontmatter is ``server.vault.frontmatter``.)
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterator
from typing import Any

from server.vault import markdown, yaml12


def split_frontmatter(text: str) -> tuple[str | None, str, int]:
    """Return (raw YAML or None, body, body offset); an unclosed block is no frontmatter."""
    try:
        span = markdown.frontmatter_span(text)
    except markdown.Unclosed:
        span = None
    if span is None:
        return None, text, 0
    return markdown.frontmatter_yaml(text, span), text[span.body_start :], span.body_start


def _jsonable(value: Any) -> Any:
    if value.__class__ is str:  # by far the most common: leave at once
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
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
        simple = yaml12.load_simple(raw, dates_as_text=True)  # most notes: JSON-ready as it comes
        if simple is not None:
            return simple, None
        data = yaml12.load_full(raw)
    except yaml12.ComplexKey:
        where = f" (frontmatter line {raw.count(chr(10), 0, raw.index('{{')) + 1})" if "{{" in raw else ""
        return None, "invalid YAML: a mapping used as a key (an unfilled template placeholder like {{date}}?)" + where
    except yaml12.YamlError as exc:
        where = "" if exc.line is None else f" (frontmatter line {exc.line})"
        return None, f"invalid YAML: {exc.problem}{where}"
    if data is None:
        return {}, None
    if not isinstance(data, dict):
        return None, f"frontmatter is a {type(data).__name__}, not a mapping"
    return _jsonable(data), None


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
