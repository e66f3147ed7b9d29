"""A note's properties (YAML frontmatter, Logseq ``key:: value`` page properties) as the index keeps them,
the one filter grammar over them, and the listing of the properties in use.

Rows (``note_props``, m027): one per value, a list property one per item; ``value`` is the text
lower-cased (dates as written: ISO dates compare in order as text), ``num`` the number when the value is
one. Nested mappings are left out. The values' text is also the FTS ``props`` column (below titles,
tags and body text in rank), so ``kms_search "evergreen"`` finds ``status: evergreen``.

Filter grammar (docs/properties.md), every filter must hold:

- ``key:value``: equals (case-insensitive; a list property: any item); ``key:"two words"`` quoted;
- ``key:a,b,c``: one of;
- ``key:*``: the note has the property (any value);
- ``key<v``, ``key<=v``, ``key>v``, ``key>=v``: numbers compared as numbers (``rating>=4``), anything else
  as text, so ISO dates compare by date (``due<2026-12-31``; a date-time value by its day);
- a leading ``-`` negates the filter (``-draft:*``: notes without ``draft``; ``-status:done``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import apsw

from server.errors import KmsError
from server.vault.scope import Vaults, VaultScope

MAX_FILTERS = 20
MAX_FILTER_CHARS = 500
MAX_VALUE_CHARS = 200  # a value longer than this is kept for search, not as a filterable row
GRAMMAR = (
    "key:value, key:a,b (one of), key:* (has it), key<value / key<=value / key>value / key>=value "
    "(numbers as numbers, ISO dates as dates), a leading - negates; e.g. status:evergreen, due<2026-12-31"
)
_FILTER = re.compile(r"^(?P<neg>-)?(?P<key>[^\s:<>=,\"-][^:<>=\"]*?)\s*(?P<op>:|<=|>=|<|>)\s*(?P<rest>.*)$", re.S)
PropRow = tuple[str, int, str, float | None]  # key, ord, value, num
_DAY = re.compile(r"\d{4}-\d{2}-\d{2}")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, str) and re.fullmatch(r"\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*", value):
        return float(value)
    return None


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    text = str(value).strip()
    return text or None


def property_rows(frontmatter: dict[str, Any] | None) -> list[PropRow]:
    """The rows of a note's properties (see the module's docstring)."""
    rows: list[PropRow] = []
    for key, raw in (frontmatter or {}).items():
        k = str(key).strip().lower()
        if not k:
            continue
        for i, item in enumerate(raw if isinstance(raw, list) else [raw]):
            text = _text(item)
            if text is not None and len(text) <= MAX_VALUE_CHARS:
                rows.append((k, i, text.lower(), _number(item)))
    return rows


def search_text(frontmatter: dict[str, Any] | None) -> str | None:
    """The FTS ``props`` column: every scalar value's text once (keys left out: they are not the topic)."""
    seen: dict[str, None] = {}
    for raw in (frontmatter or {}).values():
        for item in raw if isinstance(raw, list) else [raw]:
            text = _text(item)
            if text is not None:
                seen.setdefault(text, None)
    return " ".join(seen) or None


@dataclass(frozen=True)
class Filter:
    key: str
    op: str  # "=", "in", "exists", "<", "<=", ">", ">="
    values: tuple[str, ...]
    negated: bool = False

    def sql(self, rid: str = "n.rid") -> tuple[str, list[Any]]:
        """An SQL condition on the note whose rid is ``rid`` and its arguments."""
        args: list[Any] = [self.key]
        if self.op == "exists":
            cond = ""
        elif self.op in ("=", "in"):
            cond = f" AND p.value IN ({', '.join('?' * len(self.values))})"
            args += list(self.values)
        else:
            num = _number(self.values[0])
            if num is not None:
                cond = f" AND p.num {self.op} ?"
                args.append(num)
            elif _DAY.fullmatch(self.values[0]):  # a day compares with a date-time by its day (T10:00 is that day)
                cond = f" AND p.num IS NULL AND substr(p.value, 1, 10) {self.op} ?"
                args.append(self.values[0])
            else:
                cond = f" AND p.num IS NULL AND p.value {self.op} ?"
                args.append(self.values[0])
        exists = f"EXISTS (SELECT 1 FROM note_props p WHERE p.rid = {rid} AND p.key = ?{cond})"
        return (f"NOT {exists}" if self.negated else exists), args


def _split_values(rest: str, text: str) -> tuple[str, ...]:
    out: list[str] = []
    for m in re.finditer(r'\s*(?:"((?:[^"]|"")*)"|([^,]*))\s*(?:,|$)', rest):
        if m.start() >= len(rest):
            break
        value = m.group(1).replace('""', '"') if m.group(1) is not None else (m.group(2) or "").strip()
        if not value:
            raise KmsError("invalid-input", f"{text!r}: an empty value; valid: {GRAMMAR}", filter=text)
        out.append(value.lower())
    return tuple(out)


def parse_filter(text: str) -> Filter:
    """One filter, or ``invalid-input`` saying what is valid."""
    if not isinstance(text, str) or not text.strip() or len(text) > MAX_FILTER_CHARS:
        raise KmsError("invalid-input", f"a property filter is 1-{MAX_FILTER_CHARS} characters; valid: {GRAMMAR}")
    m = _FILTER.match(text.strip())
    if m is None:
        raise KmsError("invalid-input", f"{text!r} is not a property filter; valid: {GRAMMAR}", filter=text)
    key, op, rest, neg = m["key"].strip().lower(), m["op"], m["rest"].strip(), bool(m["neg"])
    if not rest:
        raise KmsError("invalid-input", f"{text!r}: no value after {op!r}; valid: {GRAMMAR}", filter=text)
    if op == ":" and rest == "*":
        return Filter(key, "exists", (), neg)
    values = _split_values(rest, text)
    if op == ":":
        return Filter(key, "=" if len(values) == 1 else "in", values, neg)
    if len(values) != 1:
        raise KmsError("invalid-input", f"{text!r}: {op} compares with one value; valid: {GRAMMAR}", filter=text)
    return Filter(key, op, values, neg)


def parse_filters(texts: Sequence[str] | None) -> list[Filter]:
    if not texts:
        return []
    if len(texts) > MAX_FILTERS:
        raise KmsError("invalid-input", f"at most {MAX_FILTERS} property filters per call")
    return [parse_filter(t) for t in texts]


def filters_sql(filters: Sequence[Filter], rid: str = "n.rid") -> tuple[str, list[Any]]:
    """`` AND cond AND cond`` for a WHERE clause (empty when there is no filter) and its arguments."""
    parts, args = [], []
    for f in filters:
        sql, a = f.sql(rid)
        parts.append(sql)
        args += a
    return "".join(f" AND {p}" for p in parts), args


def passing_ids(conn: apsw.Connection, note_ids: Sequence[str], filters: Sequence[Filter]) -> set[str]:
    """Which of ``note_ids`` pass every filter."""
    if not note_ids:
        return set()
    cond, args = filters_sql(filters)
    marks = ", ".join("?" * len(note_ids))
    return {r[0] for r in conn.execute(f"SELECT n.id FROM notes n WHERE n.id IN ({marks}){cond}", (*note_ids, *args))}


def properties_in_use(
    conn: apsw.Connection, vault_id: Vaults = None, *, limit: int = 50, values: int = 5
) -> list[dict[str, Any]]:
    """The properties visible notes carry, most used first, each with its most common values."""
    scope, args = VaultScope.of(vault_id).sql()
    keys = conn.execute(
        f"""SELECT p.key, count(DISTINCT p.rid) AS notes, sum(p.num IS NOT NULL) AS numbers FROM note_props p
            JOIN notes n ON n.rid = p.rid WHERE n.hidden_at IS NULL{scope}
            GROUP BY p.key ORDER BY notes DESC, p.key LIMIT ?""",
        (*args, limit),
    ).fetchall()
    out = []
    for key, notes, numbers in keys:
        common = conn.execute(
            f"""SELECT p.value, count(DISTINCT p.rid) AS c FROM note_props p JOIN notes n ON n.rid = p.rid
                WHERE p.key = ? AND n.hidden_at IS NULL{scope} GROUP BY p.value ORDER BY c DESC, p.value LIMIT ?""",
            (key, *args, values),
        ).fetchall()
        out.append(
            {
                "key": key,
                "notes": notes,
                "numeric": bool(numbers),
                "values": [{"value": v, "notes": c} for v, c in common],
            }
        )
    return out
