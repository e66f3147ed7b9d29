"""Edit a JSON-with-comments settings file in place: set or remove one member, keep every other byte.

Hosts such as VS Code, Zed and Gemini CLI allow ``//`` and ``/* */`` comments (and trailing commas) in
their settings files; rewriting the file through ``json.dump`` would drop the person's comments and
layout. So this scans the text once for where each value starts and ends, and splices only the member
kms owns. Anything that is not a JSON object after comments are stripped is refused, never guessed at.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

_WS = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.S)
_STRING = re.compile(r'"(?:[^"\\\n]|\\.)*"')
_SCALAR = re.compile(r"-?\d[\d.eE+-]*|true|false|null")


class JsoncError(ValueError):
    """The text is not a JSON object (with comments); says where."""


@dataclass
class Span:
    """Where one value sits in the text; for an object, its members by key (with the key's start)."""

    start: int
    end: int
    members: dict[str, tuple[int, Span]] = field(default_factory=dict)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text, self.pos = text, 0

    def fail(self, what: str) -> JsoncError:
        line = self.text.count("\n", 0, self.pos) + 1
        return JsoncError(f"{what} at line {line}")

    def skip(self) -> None:
        self.pos = _WS.match(self.text, self.pos).end()  # type: ignore[union-attr]

    def value(self) -> Span:
        self.skip()
        start, ch = self.pos, self.text[self.pos : self.pos + 1]
        if ch in ("{", "["):
            return self.container(ch)
        match = (_STRING if ch == '"' else _SCALAR).match(self.text, self.pos)
        if not match:
            raise self.fail("expected a value")
        self.pos = match.end()
        return Span(start, self.pos)

    def container(self, opener: str) -> Span:
        start, closer = self.pos, "}" if opener == "{" else "]"
        span = Span(start, start)
        self.pos += 1
        while True:
            self.skip()
            if self.text.startswith(closer, self.pos):
                self.pos += 1
                span.end = self.pos
                return span
            if opener == "{":
                key_start = self.pos
                key = _STRING.match(self.text, self.pos)
                if not key:
                    raise self.fail("expected a key")
                self.pos = key.end()
                self.skip()
                if not self.text.startswith(":", self.pos):
                    raise self.fail("expected ':'")
                self.pos += 1
                span.members[json.loads(key.group())] = (key_start, self.value())
            else:
                self.value()
            self.skip()
            if self.text.startswith(",", self.pos):
                self.pos += 1
            elif not self.text.startswith(closer, self.pos):
                raise self.fail(f"expected ',' or '{closer}'")


def parse(text: str) -> tuple[Any, Span]:
    """The document (comments and trailing commas allowed) and its spans; ``{}`` for an empty file."""
    if not text.strip():
        return {}, Span(0, 0)
    scanner = _Scanner(text)
    root = scanner.value()
    scanner.skip()
    if scanner.pos != len(text) or not text[root.start :].startswith("{"):
        raise scanner.fail("expected one JSON object")
    return json.loads(strip(text)), root


def strip(text: str) -> str:
    """Plain JSON: comments blanked out (strings untouched), trailing commas dropped."""
    out, pos = [], 0
    for match in re.finditer(
        r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|,(?=(?:\s|//[^\n]*|/\*.*?\*/)*[}\]])', text, re.S
    ):
        out.append(text[pos : match.start()])
        out.append(match.group() if match.group().startswith('"') else " ")
        pos = match.end()
    out.append(text[pos:])
    return "".join(out)


def _indent_at(text: str, pos: int) -> str:
    line_start = text.rfind("\n", 0, pos) + 1
    return re.match(r"[ \t]*", text[line_start:]).group()  # type: ignore[union-attr]


def set_member(text: str, path: tuple[str, ...], value: Any) -> str:
    """``text`` with ``path`` (object keys from the root) set to ``value``; parents made as needed."""
    _, span = parse(text)
    if not text.strip():
        doc: Any = value
        for key in reversed(path):
            doc = {key: doc}
        return json.dumps(doc, indent=2) + "\n"
    for depth, key in enumerate(path):
        if key in span.members:
            key_start, child = span.members[key]
            if depth == len(path) - 1 or not text[child.start :].startswith("{"):
                rest: Any = value
                for k in reversed(path[depth + 1 :]):
                    rest = {k: rest}
                indent = _indent_at(text, key_start)
                rendered = json.dumps(rest, indent=2).replace("\n", "\n" + indent)
                return text[: child.start] + rendered + text[child.end :]
            span = child
            continue
        rest = value
        for k in reversed(path[depth + 1 :]):
            rest = {k: rest}
        return _insert(text, span, key, rest)
    raise AssertionError("unreachable")


def _insert(text: str, obj: Span, key: str, value: Any) -> str:
    """A new member ``key: value`` as the last one of the object at ``obj``."""
    close = obj.end - 1
    inner_indent = _indent_at(text, obj.start) + "  "
    if obj.members:
        last = max(span.end for _, span in obj.members.values())
        scanner = _Scanner(text)
        scanner.pos = last
        scanner.skip()
        has_comma = text.startswith(",", scanner.pos)
        inner_indent = _indent_at(text, max(k for k, _ in obj.members.values()))
        at = scanner.pos + 1 if has_comma else last
        lead = "" if has_comma else ","
    else:
        at, lead = obj.start + 1, ""
    rendered = json.dumps(value, indent=2).replace("\n", "\n" + inner_indent)
    member = f"{lead}\n{inner_indent}{json.dumps(key)}: {rendered}"
    tail = text[at:close]
    if not obj.members or not tail.strip():
        return text[:at] + member + "\n" + _indent_at(text, obj.start) + text[close:]
    return text[:at] + member + text[at:]


def remove_member(text: str, path: tuple[str, ...]) -> tuple[str, bool]:
    """``text`` without the member at ``path`` (and its comma); ``(text, False)`` when it is not there."""
    _, span = parse(text)
    for key in path[:-1]:
        if key not in span.members:
            return text, False
        span = span.members[key][1]
    if path[-1] not in span.members:
        return text, False
    key_start, child = span.members[path[-1]]
    scanner = _Scanner(text)
    scanner.pos = child.end
    scanner.skip()
    if text.startswith(",", scanner.pos):  # a member follows: take this one's line and its comma
        line_start = text.rfind("\n", 0, key_start) + 1
        start = line_start if not text[line_start:key_start].strip() else key_start
        end = scanner.pos + 1
        if text.startswith("\n", _WS.match(text, end).start()) and start == line_start:  # type: ignore[union-attr]
            end = text.find("\n", end) + 1 if text[end : text.find("\n", end)].strip() == "" else end
        return text[:start] + text[end:], True
    before = text[:key_start].rstrip()  # the last member: take the comma before it (and its line's indent)
    start = len(before) - 1 if before.endswith(",") else len(before)
    return text[:start] + text[child.end :], True
