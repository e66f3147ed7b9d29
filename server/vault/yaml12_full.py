"""The full YAML reader of ``server.vault.yaml12``: libyaml's events (PyYAML's C parser) built into values.

A module of its own so that PyYAML (~12 ms to import) loads only when a frontmatter is more than the simple
reader takes (``yaml12.load_full`` imports it: a deferred import, docs/ARCHITECTURE.md). The meanings of
scalars, the errors and the bounds are ``yaml12``'s.
"""

from __future__ import annotations

from typing import Any

import yaml
from yaml.events import (
    AliasEvent,
    MappingEndEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
)

from server.vault.yaml12_scalars import (
    MAX_ALIAS_REPLAYS,
    MAX_DEPTH,
    ComplexKey,
    TooManyAliases,
    YamlError,
    resolve_plain,
    tagged_scalar,
)

_CORE = "tag:yaml.org,2002:"
_STR = _CORE + "str"


class _CollectionKey:
    """Where a mapping or list was used as a key (each one its own key, as none is ever read)."""


def _holds_collection_key(value: Any) -> bool:
    if isinstance(value, dict):
        return any(k.__class__ is _CollectionKey or _holds_collection_key(v) for k, v in value.items())
    if isinstance(value, list):
        return any(_holds_collection_key(v) for v in value)
    return False


class _Builder:
    """Builds Python values straight from libyaml's events. Not PyYAML's composer: it refuses an anchor
    defined twice, which YAML 1.2 allows (the later one counts, as yaml-rs read it); not its constructors:
    they are YAML 1.1. An alias gives the value its anchor holds (shared, not copied), and counts its size
    against ``MAX_ALIAS_REPLAYS``: what a reader of the result walks stays bounded."""

    def __init__(self, text: str) -> None:
        self.parser = yaml.CBaseLoader(text)
        self.complex = False  # a mapping or list was used as a key somewhere
        self._anchors: dict[str, tuple[Any, int]] = {}  # anchor -> (value, how many values it holds)
        self._open: set[str] = set()  # anchors whose collection is still being read
        self._replays = 0
        self._depth = 0

    def documents(self) -> list[Any]:
        parser = self.parser
        parser.get_event()  # the stream's start
        out = []
        while not parser.check_event(StreamEndEvent):
            parser.get_event()  # the document's start
            out.append(self.value()[0])
            parser.get_event()  # the document's end
        return out

    def value(self) -> tuple[Any, int]:
        """The next value and how many values it holds (itself included)."""
        event: Any = self.parser.get_event()  # checked by its class below (the stubs type it as the base Event)
        kind = event.__class__
        if kind is ScalarEvent:
            tag = event.tag
            if tag is None and event.implicit[0]:
                value: Any = resolve_plain(event.value)
            elif tag is None or tag == "!" or tag == _STR:
                value = event.value
            else:
                value = tagged_scalar(tag, event.value)
            if event.anchor is not None:
                self._anchors[event.anchor] = (value, 1)
            return value, 1
        if kind is AliasEvent:
            return self._alias(event)
        self._depth += 1
        if self._depth > MAX_DEPTH:
            line = None if event.start_mark is None else event.start_mark.line + 1
            raise YamlError(f"lists and mappings nested more than {MAX_DEPTH} deep", line)
        anchor = event.anchor
        if anchor is not None:
            self._open.add(anchor)
        size = 1
        if kind is SequenceStartEvent:
            items = []
            while not self.parser.check_event(SequenceEndEvent):
                item, n = self.value()
                items.append(item)
                size += n
            value = items
        else:
            mapping: dict[Any, Any] = {}
            while not self.parser.check_event(MappingEndEvent):
                key, n = self.value()
                if key.__class__ is list or key.__class__ is dict:  # an error only if it is still there at the
                    key, self.complex = _CollectionKey(), True  # end: a repeated key may replace its mapping
                item, m = self.value()
                mapping[key] = item
                size += n + m
            value = list(mapping) if event.tag == _CORE + "set" else mapping
        self.parser.get_event()  # the collection's end
        self._depth -= 1
        if anchor is not None:
            self._open.discard(anchor)
            self._anchors[anchor] = (value, size)
        return value, size

    def _alias(self, event: AliasEvent) -> tuple[Any, int]:
        name = event.anchor
        if name in self._open:  # an alias to a collection still being read (``&a [*a]``): null, as yaml-rs
            return None, 1
        if name not in self._anchors:
            line = None if event.start_mark is None else event.start_mark.line + 1
            raise YamlError(f"found unknown anchor {name!r}", line)
        value, size = self._anchors[name]
        self._replays += size
        if self._replays > MAX_ALIAS_REPLAYS:
            raise TooManyAliases(f"aliases expand to more than {MAX_ALIAS_REPLAYS} values")
        return value, size


def load_events(text: str) -> Any:
    """What ``text`` holds, read by libyaml; raises ``YamlError``."""
    if text and not text.endswith("\n"):  # the last line ends: ``a: |`` then ``  x`` is "x\n", as yaml-rs read it
        text += "\n"
    builder = _Builder(text)
    try:
        documents = builder.documents()
        # ``a: 1`` then ``---``: a list of documents, as yaml-rs read it (not a mapping)
        data = documents if len(documents) > 1 else documents[0] if documents else None
        if builder.complex and _holds_collection_key(data):
            raise ComplexKey
        return data
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        raise YamlError(str(exc.problem or exc.context), None if mark is None else mark.line + 1) from None
    except yaml.YAMLError as exc:  # the reader: a character YAML does not allow
        raise YamlError(str(exc).splitlines()[0]) from None
    except RecursionError:
        raise YamlError("nested too deeply") from None
    finally:
        builder.parser.dispose()
