"""The dialect of a vault: the rules its own tool (Obsidian, Dendron, Foam, Logseq) reads notes by.

One home for them: the parser (``server.vault.parser``) asks a ``Dialect`` how to read tags, links,
titles and dates; the records (``server.index.records``) which names a note answers to; the
registry stores a vault's dialect (detected on ``kms vault add`` by ``detect``). Every rule is a
pure function of a note's path and text, so a worker process can apply it (the records' worker
processes get the ``Dialect`` pickled). A vault's is ``Vault.rules`` (``vaults.dialect``, m011; NULL for
a vault indexed before dialects: detected and re-parsed on its next index). A new rule is a field of
``Dialect`` and its use in the parser, nothing else.
"""

from __future__ import annotations

import datetime as _dt
import functools
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

from server.errors import KmsError
from server.vault import dendron
from server.vault.paths import strip_note_suffix


@dataclass(frozen=True)
class Dialect:
    """What differs between the tools; everything else (wiki-links, Markdown links, attachments,
    frontmatter ``title``/``tags``/``aliases``) is read the same in every dialect."""

    name: str
    alias_first: bool = False  # [[alias|target]] (Dendron) instead of [[target|alias]]
    dotted_tags: bool = False  # #a.b is one hierarchical tag (Dendron), not #a
    hierarchy: bool = False  # a.b.c.md is the child of a.b.md (Dendron)
    id_names: bool = False  # frontmatter `id` names the note, like kms's own ids (Dendron)
    epoch_ms_dates: bool = False  # created/updated are epoch milliseconds (Dendron)
    ref_definitions: bool = False  # [label]: path.md "Title" gives [[label]] its file (Foam)
    properties: bool = False  # `key:: value` lines are page properties (Logseq)
    bracket_tags: bool = False  # #[[multi word]] is one tag (Logseq)
    namespaces: bool = False  # a___b.md and a%2Fb.md are the page a/b (Logseq)
    cross_vault: bool = True  # [[dendron://vault/note]] names a note of another vault
    updated_keys: tuple[str, ...] = ("updated", "modified")  # frontmatter keys that date the last change
    created_keys: tuple[str, ...] = ("created", "date created", "created_at")  # frontmatter keys that date its start


OBSIDIAN = Dialect("obsidian")
DENDRON = Dialect("dendron", alias_first=True, dotted_tags=True, hierarchy=True, id_names=True, epoch_ms_dates=True)
FOAM = Dialect("foam", ref_definitions=True)
LOGSEQ = Dialect("logseq", properties=True, bracket_tags=True, namespaces=True, updated_keys=(), created_keys=())
DIALECTS: dict[str, Dialect] = {d.name: d for d in (OBSIDIAN, DENDRON, FOAM, LOGSEQ)}


def get(name: str | None) -> Dialect:
    """The dialect called ``name`` (None: obsidian, the dialect of a vault indexed before dialects)."""
    if name is None:
        return OBSIDIAN
    found = DIALECTS.get(name.strip().lower())
    if found is None:
        raise KmsError("invalid-input", f"unknown dialect {name!r}; one of: {', '.join(DIALECTS)}")
    return found


def detect(root: str | os.PathLike[str]) -> Dialect:
    """The dialect a vault's own files declare (``dendron.yml``, in the folder or in a workspace that lists
    the folder as a vault: ``server.vault.dendron.find``; ``logseq/config.edn``, ``.foam/`` or
    ``.vscode/foam.json``); obsidian otherwise."""
    base = Path(root)
    found = dendron.find(base)
    if found is not None and found.is_dendron:
        return DENDRON
    if (base / "logseq" / "config.edn").is_file():
        return LOGSEQ
    if (base / ".foam").is_dir() or (base / ".vscode" / "foam.json").is_file():
        return FOAM
    return OBSIDIAN


# --- names -----------------------------------------------------------------------------------------

_JOURNAL = re.compile(r"^(\d{4})[_-](\d{2})[_-](\d{2})$")


def _ordinal(day: int) -> str:
    suffix = "th" if 11 <= day % 100 <= 13 else {1: "st", 2: "nd", 3: "rd"}.get(day % 10, "th")
    return f"{day}{suffix}"


def stem_title(d: Dialect, relpath: str) -> tuple[str, list[str]]:
    """(the title a note's file name gives it, other names the file name gives it).

    Logseq: ``a___b.md`` and ``a%2Fb.md`` are the page ``a/b``; a journal ``journals/2024_01_15.md``
    is titled as Logseq shows it (``Jan 15th, 2024``) and also answers to ``2024-01-15``."""
    name = relpath.rsplit("/", 1)[-1]
    stem = strip_note_suffix(name)
    if not d.namespaces:
        return stem, []
    others: list[str] = []
    page = unquote(stem.replace("___", "/")) if ("___" in stem or "%" in stem) else stem
    if page != stem:
        others.append(stem)
    if relpath.startswith("journals/") and (m := _JOURNAL.match(stem)):
        try:
            day = _dt.date(int(m[1]), int(m[2]), int(m[3]))
        except ValueError:
            return page, others
        return f"{day:%b} {_ordinal(day.day)}, {day.year}", [*others, day.isoformat(), stem]
    return page, others


def parent(d: Dialect, title_stem: str) -> str | None:
    """The parent a hierarchical name has (Dendron ``a.b.c`` -> ``a.b``); None at the top or elsewhere."""
    if not d.hierarchy or "." not in title_stem:
        return None
    return title_stem.rsplit(".", 1)[0]


# --- dates -----------------------------------------------------------------------------------------


def _epoch(value: Any, ms: bool) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        seconds = value / 1000 if ms or value > 1e11 else float(value)
        return seconds if 0 < seconds < 1e10 else None
    if isinstance(value, str):
        return _iso_epoch(value)
    return None


@functools.lru_cache(maxsize=4096)  # a vault's notes share dates: a day's notes parse one string
def _iso_epoch(value: str) -> float | None:
    text = value.strip()
    if not text:
        return None
    if len(text) > 10:
        text = text.replace(" ", "T", 1)
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=_dt.UTC)
    return when.timestamp()


def note_dates(d: Dialect, frontmatter: dict[str, Any] | None) -> tuple[float | None, float | None]:
    """(created, updated) in epoch seconds from the frontmatter keys the dialect dates notes by."""
    if not frontmatter:
        return None, None
    found: list[float | None] = [None, None]
    for i, keys in enumerate((d.created_keys, d.updated_keys)):
        for k in keys:
            value = frontmatter.get(k)
            if value is not None and (t := _epoch(value, d.epoch_ms_dates)) is not None:
                found[i] = t
                break
    return found[0], found[1]
