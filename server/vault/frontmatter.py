"""Edit a note's YAML frontmatter without disturbing anything else.

People hand-format their frontmatter (comments, quoting, list style), so a
property update rewrites only the lines of the keys it changes: each top-level
key's line range comes from ruamel.yaml's round-trip loader, and only a changed
key is re-emitted (by ruamel, in the note's own list style); every other line
stays byte-identical and the body is never touched. When the layout is too
unusual to splice (flow mapping, complex keys) the whole mapping is re-dumped
with ruamel's round-trip dumper, which still keeps order, comments and quoting.

Either way the result is verified before anyone writes it: the new frontmatter
must parse with ruamel *and* PyYAML (so YAML 1.1 tools read it right too) *and* the
indexer's YAML 1.2 parser, untouched keys must hold the same values, changed keys
exactly the requested ones. Anything that does not parse safely in the first place
is refused with ``invalid-input``.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, SingleQuotedScalarString

from server.errors import KmsError
from server.vault import yaml12
from server.vault.files import convert_newlines
from server.vault.frontmatter_read import parse_frontmatter
from server.vault.markdown import Unclosed, frontmatter_span, split_lines

ABSENT: dict[str, bool] = {"__absent__": True}
_STR_TAG = "tag:yaml.org,2002:str"
_RESOLVER = pyyaml.resolver.Resolver()
try:
    _PyLoader: Any = pyyaml.CSafeLoader
except AttributeError:  # pragma: no cover
    _PyLoader = pyyaml.SafeLoader


# ----- plain values -----------------------------------------------------------------------------


def plain(value: Any) -> Any:
    """ruamel/PyYAML node values as plain Python (str, int, float, bool, None, list, dict, dates)."""
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, str):
        return str(value)
    if type(value).__name__ == "ScalarBoolean":
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, _dt.datetime):
        return _dt.datetime.fromisoformat(value.isoformat())
    if value is None or isinstance(value, _dt.date):
        return value
    return str(value)


def to_json(value: Any) -> Any:
    """JSON for provenance; what JSON cannot hold exactly (dates, NaN) is kept as a YAML snippet."""
    value = plain(value)
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"__yaml__": _dump_doc(CommentedMap(v=value))}
    if isinstance(value, list):
        return [to_json(v) for v in value]
    if isinstance(value, dict):
        return {k: to_json(v) for k, v in value.items()}
    return {"__yaml__": _dump_doc(CommentedMap(v=value))}


def from_json(value: Any) -> Any:
    """Inverse of ``to_json`` (used by revert to put a value back with its YAML type)."""
    if isinstance(value, dict) and set(value) == {"__yaml__"}:
        return _new_yaml().load(value["__yaml__"])["v"]
    if isinstance(value, list):
        return [from_json(v) for v in value]
    if isinstance(value, dict):
        return {k: from_json(v) for k, v in value.items()}
    return value


def canon(value: Any) -> str:
    """A comparison key that tells 1, 1.0, True and "1" apart."""
    return json.dumps(to_json(value), sort_keys=True, ensure_ascii=False)


# ----- YAML I/O ---------------------------------------------------------------------------------


def _new_yaml(seq: tuple[int, int, int] = (2, 4, 2)) -> YAML:
    y = YAML(typ="rt")
    y.preserve_quotes = True
    y.width = 1_000_000  # never fold a long value onto several lines
    y.allow_duplicate_keys = False
    y.indent(mapping=seq[0], sequence=seq[1], offset=seq[2])
    return y


def _dump_doc(data: Any, seq: tuple[int, int, int] = (2, 4, 2)) -> str:
    buf = io.StringIO()
    _new_yaml(seq).dump(data, buf)
    return buf.getvalue()


def _seq_style(yaml_lf: str) -> tuple[int, int, int]:
    """Reuse the note's block-list indentation (``tags:\\n  - a`` vs ``tags:\\n- a``); Obsidian's by default."""
    lines = yaml_lf.split("\n")
    for prev, line in zip(lines, lines[1:], strict=False):
        m = re.match(r"^( *)- ", line)
        if m and re.match(r"^[^\s#-][^#]*:\s*$", prev):
            off = len(m.group(1))
            return (2, off + 2, off)
    return (2, 4, 2)


def _needs_quotes(s: str) -> bool:
    """Would a YAML 1.1 reader (PyYAML: the indexer) read this plain scalar as something else?"""
    return _RESOLVER.resolve(pyyaml.ScalarNode, s, (True, False)) != _STR_TAG


def _yaml_str(s: str) -> Any:
    if "\n" in s:
        return DoubleQuotedScalarString(s)
    return SingleQuotedScalarString(s) if _needs_quotes(s) else s


def _yaml_value(value: Any, existing: Any = None) -> Any:
    """A request value as a ruamel node; a list keeps the flow/block style of the value it replaces."""
    if isinstance(value, list):
        seq = CommentedSeq(_yaml_value(v) for v in value)
        if isinstance(existing, CommentedSeq) and existing.fa.flow_style():
            seq.fa.set_flow_style()
        else:
            seq.fa.set_block_style()
        return seq
    if isinstance(value, str):
        return _yaml_str(value)
    return value


def _yaml_key(key: str) -> Any:
    return SingleQuotedScalarString(key) if _needs_quotes(key) else key


def load_both(yaml_text: str) -> tuple[CommentedMap, dict]:
    """Parse frontmatter with ruamel (round-trip) and PyYAML; refuse anything but a clean mapping."""
    lf = yaml_text.replace("\r\n", "\n")
    if "*" in lf:  # aliases: ruamel and PyYAML share what they point at, but the edit's checks walk it expanded
        try:
            yaml12.load_full(lf)
        except yaml12.TooManyAliases as e:  # a "billion laughs" would hold the call (and its memory) for hours
            raise KmsError("invalid-input", f"the note's frontmatter: {e.problem}; file unchanged") from None
        except yaml12.YamlError:
            pass  # the editors below judge the rest, as they always have
    try:
        rt = _new_yaml().load(lf)
    except Exception as e:  # ruamel raises many unrelated types
        first = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise KmsError("invalid-input", f"the note's frontmatter is not valid YAML ({first}); file unchanged") from e
    try:
        py = pyyaml.load(lf, Loader=_PyLoader)  # noqa: S506 - safe loader
    except pyyaml.YAMLError as e:
        raise KmsError("invalid-input", "the note's frontmatter does not parse safely; file unchanged") from e
    rt = CommentedMap() if rt is None else rt
    py = {} if py is None else py
    if not isinstance(rt, CommentedMap) or not isinstance(py, dict):
        raise KmsError("invalid-input", "the note's frontmatter is not a key/value mapping; file unchanged")
    return rt, py


# ----- the edit ---------------------------------------------------------------------------------


@dataclass
class PropsEdit:
    """The result of applying a property change to a note's text."""

    new_text: str
    before: dict[str, Any] = field(default_factory=dict)  # key -> old JSON value or ABSENT
    after: dict[str, Any] = field(default_factory=dict)  # key -> new JSON value or ABSENT
    created_block: str | None = None  # the whole frontmatter block, when there was none

    @property
    def changed(self) -> bool:
        return bool(self.after)


def _key_ranges(data: CommentedMap, lines: list[str]) -> dict[str, tuple[int, int]] | None:
    """Line range [start, end) of every top-level key, or None if the layout can't be spliced."""
    starts: list[tuple[int, str]] = []
    for key in data:
        if not isinstance(key, str):
            return None
        line, col = data.lc.key(key)
        if col != 0:
            return None
        starts.append((line, key))
    starts.sort()
    ranges: dict[str, tuple[int, int]] = {}
    for i, (line, key) in enumerate(starts):
        end = starts[i + 1][0] if i + 1 < len(starts) else len(lines)
        while end - 1 > line and (not lines[end - 1].strip() or lines[end - 1].startswith("#")):
            end -= 1  # comments and blank lines before the next key belong to it, not to this value
        ranges[key] = (line, end)
    return ranges


def apply_props(text: str, set_: dict[str, Any], remove: list[str], *, newline: str = "\n") -> PropsEdit:
    """Return the note text with properties set/removed (no change -> same text, ``changed`` False).

    ``set_`` values are plain request values (already checked by ``check_properties``)
    or, for revert, values from ``from_json``. Raises ``invalid-input`` (text unchanged)
    if the frontmatter can't be parsed safely or the edit can't be verified.
    """
    try:
        span = frontmatter_span(text)
    except Unclosed as e:
        raise KmsError("invalid-input", "the note starts with '---' but its frontmatter is never closed") from e
    yaml_text = text[span.open_end : span.close_start] if span else ""
    data, py_before = load_both(yaml_text)
    before: dict[str, Any] = {}
    after: dict[str, Any] = {}
    for key in remove:
        if key in data:
            before[key] = to_json(data[key])
            after[key] = ABSENT
    for key, value in set_.items():
        if key in data and canon(data[key]) == canon(value):
            continue
        before[key] = to_json(data[key]) if key in data else ABSENT
        after[key] = to_json(value)
    if not after:
        return PropsEdit(text)

    lf = yaml_text.replace("\r\n", "\n")
    seq = _seq_style(lf)
    lines = split_lines(yaml_text)
    try:
        ranges = _key_ranges(data, lines) if span else {}
    except Exception:  # noqa: BLE001 - merge keys and other exotica: fall back to a full re-dump
        ranges = None
    if ranges is not None:
        new_yaml = _splice(lines, ranges, data, set_, after, seq, newline)
    else:
        new_yaml = _redump(data, set_, after, seq, newline)
    if span:
        new_text = text[: span.open_end] + new_yaml + text[span.close_start :]
        created = None
    else:
        created = "---" + newline + new_yaml + "---" + newline
        new_text = created + text
    _verify(text, new_text, data, py_before, set_, after)
    return PropsEdit(new_text, before, after, created)


def _snippet(key: str, value: Any, existing: Any, seq: tuple[int, int, int], newline: str) -> str:
    doc = CommentedMap()
    doc[_yaml_key(key)] = _yaml_value(value, existing)
    return convert_newlines(_dump_doc(doc, seq), newline)


def _splice(
    lines: list[str],
    ranges: dict[str, tuple[int, int]],
    data: CommentedMap,
    set_: dict[str, Any],
    after: dict[str, Any],
    seq: tuple[int, int, int],
    newline: str,
) -> str:
    """Re-emit only the changed keys' lines; new keys go after the last line of the mapping."""
    replace: dict[int, tuple[int, str]] = {}
    for key in after:
        if key in ranges:
            start, end = ranges[key]
            new = "" if after[key] == ABSENT else _snippet(key, set_[key], data[key], seq, newline)
            replace[start] = (end, new)
    out: list[str] = []
    i = 0
    while i < len(lines):
        if i in replace:
            end, new = replace[i]
            out.append(new)
            i = end
        else:
            out.append(lines[i])
            i += 1
    tail = "".join(out)
    if tail and not tail.endswith("\n"):
        tail += newline
    for key in after:
        if key not in ranges and after[key] != ABSENT:
            tail += _snippet(key, set_[key], None, seq, newline)
    return tail


def _redump(
    data: CommentedMap, set_: dict[str, Any], after: dict[str, Any], seq: tuple[int, int, int], newline: str
) -> str:
    """Fallback for layouts ``_splice`` can't handle: ruamel round-trip of the whole mapping."""
    for key in after:
        if after[key] == ABSENT:
            del data[key]
        else:
            data[key if key in data else _yaml_key(key)] = _yaml_value(set_[key], data.get(key))
    return "" if not data else convert_newlines(_dump_doc(data, seq), newline)


def _indexer_problems(yaml_text: str, set_: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The keys the index would read otherwise than requested (``server.vault.parser``, YAML 1.2)."""

    indexed, error = parse_frontmatter(yaml_text.replace("\r\n", "\n"))
    if indexed is None:
        return [f"the index's YAML reader: {error}"]
    problems = []
    for key, value in after.items():
        if value == ABSENT:
            if key in indexed:
                problems.append(key)
        elif _is_json(set_[key]) and indexed.get(key) != set_[key]:
            problems.append(key)
    return problems


def _is_json(value: Any) -> bool:
    """A value the index holds as itself (dates and other YAML-only types it holds as text)."""
    if isinstance(value, list):
        return all(_is_json(v) for v in value)
    return value is None or isinstance(value, bool | int | str) or (isinstance(value, float) and math.isfinite(value))


def _verify(
    old_text: str,
    new_text: str,
    old_rt: CommentedMap,
    old_py: dict,
    set_: dict[str, Any],
    after: dict[str, Any],
) -> None:
    """Both parsers must read the new frontmatter as exactly the old one plus the requested change."""
    old_span = frontmatter_span(old_text)
    new_span = frontmatter_span(new_text)
    assert new_span is not None
    old_body = old_text[old_span.body_start :] if old_span else old_text
    if new_text[new_span.body_start :] != old_body:
        raise KmsError("invalid-input", "internal check failed: the body would change; file unchanged")
    new_rt, new_py = load_both(new_text[new_span.open_end : new_span.close_start])
    untouched = [k for k in old_rt if str(k) not in after]
    problems = [str(k) for k in untouched if k not in new_rt or canon(new_rt[k]) != canon(old_rt[k])]
    problems += [str(k) for k in old_py if str(k) not in after and canon(new_py.get(k)) != canon(old_py[k])]
    for key, value in after.items():
        if value == ABSENT:
            if key in new_rt or key in new_py:
                problems.append(key)
        elif canon(new_rt.get(key)) != canon(set_[key]) or canon(new_py.get(key)) != canon(set_[key]):
            problems.append(key)
    problems += _indexer_problems(new_text[new_span.open_end : new_span.close_start], set_, after)
    if problems:
        raise KmsError(
            "invalid-input",
            "kms could not update the frontmatter without changing other values "
            f"({', '.join(sorted(set(problems)))}); file unchanged",
        )
