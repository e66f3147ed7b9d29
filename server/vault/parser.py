"""Parse one Markdown note the way Obsidian users write it.

A real Markdown parser (pyromark, CommonMark via pulldown-cmark) finds code, headings,
links and HTML, so ``#tags`` and ``[[links]]`` inside code are not tags or links. Parsing
never fails: bad frontmatter is reported in ``fm_error`` and the body is still indexed
(frontmatter is read by ``server.vault.frontmatter_read``; where code, links and headings lie in the body, by
``server.vault.body_ranges``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from server.vault import dialects, markdown
from server.vault import summary as summary_codec
from server.vault.body_ranges import MdLink, atx_headings, body_structure, in_ranges, merge_ranges, needs_parse
from server.vault.dialects import OBSIDIAN, Dialect
from server.vault.frontmatter_read import alias_list, parse_frontmatter, split_frontmatter, string_list, walk_strings
from server.vault.markdown import markdown_target
from server.vault.paths import name_key, strip_note_suffix

# Patterns start with a literal so the regex engine can skip ahead to it (a leading optional group or
# lookbehind makes it try a match at every position); the char before is checked by hand.
# The one wiki-link scanner (group 1: the inner text): the link rewriter (``server.vault.links``) and
# ``kms_link`` use it too, so all three see the same ``[[...]]``.
WIKILINK = re.compile(r"\[\[([^\[\]\n]+?)\]\]")
_TAG_BLOCKERS = frozenset("/#&:.[=\"'`\\-")
_TAG = re.compile(r"#([^\s#!-/:-@\[-\^`{-~][^\s!-,.:-@\[-\^`{-~]*)")
_DOTTED_TAG = re.compile(r"#([^\s#!-/:-@\[-\^`{-~][^\s!-,:-@\[-\^`{-~]*)")  # Dendron: #a.b whole
_URL = re.compile(r"\b[A-Za-z][A-Za-z0-9+.-]*://[^\s<>\"'`]+")
_BRACKET_TAG = re.compile(r"#\[\[([^\[\]\n]+?)\]\]")  # Logseq: #[[multi word]]
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_BLOCK_ID = re.compile(rf"^[ \t]*id::[ \t]*({_UUID})[ \t]*$", re.MULTILINE)  # Logseq: a block's own id
_BLOCK_REF = re.compile(rf"(\{{\{{embed[ \t]*)?\(\(({_UUID})\)\)")  # ((uuid)), {{embed ((uuid))}}
_PROPERTY = re.compile(r"([A-Za-z0-9_-]+)::[ \t]*(.*)")  # Logseq: key:: value
_CROSS_VAULT = "dendron://"
_DIGITS = re.compile(r"^[0-9/_-]+$")
_MD_LINK_HINT = re.compile(r"\][(:]")  # "](" or "]:": one pass over the body instead of two ``in`` scans


@dataclass
class Link:
    target: str
    target_key: str
    heading: str | None
    block: str | None
    alias: str | None
    embed: bool
    in_frontmatter: bool
    line: int
    alt_key: str | None = None  # a Markdown link's path as written, tried when the relative one is not found
    vault: str | None = None  # the vault an explicit cross-vault link names ([[dendron://vault/note]])


@dataclass
class Heading:
    level: int
    text: str
    line: int


@dataclass
class ParsedNote:
    title: str  # as the vault's tool shows it: the frontmatter title, else the file name's
    frontmatter: dict[str, Any] | None
    fm_error: str | None
    body: str  # frontmatter and summary block removed
    tags: list[str]
    aliases: list[str]
    links: list[Link]
    headings: list[Heading]
    summary: summary_codec.Summary | None
    body_offset: int = 0  # where the body starts in the file text (for line numbers)
    extra: dict[str, Any] = field(default_factory=dict)
    names: list[str] = field(default_factory=list)  # other names the note answers to (the file stem...)
    desc: str | None = None  # a searchable description (frontmatter desc/description)
    note_id: str | None = None  # the id the vault's tool gave it (Dendron frontmatter id)
    created: float | None = None  # epoch seconds, from the dialect's frontmatter dates
    updated: float | None = None
    block_ids: list[str] = field(default_factory=list)  # Logseq: the ids of its blocks (``id::`` lines)


def normalize_tag(tag: str) -> str:
    """Lower-case, no '#', no whitespace inside (a Logseq ``#[[multi word]]`` is ``multi-word``)."""
    tag = tag.strip().lstrip("#").strip().lower()
    return "-".join(tag.split()) if " " in tag or "\t" in tag else tag


def link_key(target: str) -> str:
    """The lookup key a wiki-link target resolves by: ``name_key``, no leading '/', no '.md'."""
    key = name_key(target.strip().replace("\\", "/").lstrip("/"))
    return strip_note_suffix(key)


def _make_link(
    match: re.Match[str], line: int, in_frontmatter: bool, own_title: str, alias_first: bool = False
) -> Link | None:
    inner = match.group(1).replace("\\|", "|")
    if alias_first and "|" in inner:
        alias, _, target_part = inner.partition("|")
    else:
        target_part, _, alias = inner.partition("|")
    vault = None
    if target_part.startswith(_CROSS_VAULT):
        vault, _, target_part = target_part[len(_CROSS_VAULT) :].partition("/")
        vault = vault.strip() or None
    heading = block = None
    if "#" in target_part:
        target_part, _, frag = target_part.partition("#")
        if frag.startswith("^"):
            block = frag[1:] or None
        else:
            heading = frag or None
    if "^" in target_part:
        target_part, _, block = target_part.partition("^")
    target = target_part.strip() or own_title
    if not target:
        return None
    return Link(
        target=target,
        target_key=link_key(target),
        heading=heading.strip() if heading else None,
        block=block.strip() if block else None,
        alias=alias.strip() or None,
        embed=match.start() > 0 and match.string[match.start() - 1] == "!",
        in_frontmatter=in_frontmatter,
        line=line,
        vault=vault,
    )


def _markdown_link(dest: str, folder: str, line: int, embed: bool, text: str) -> Link | None:
    found = markdown_target(dest, folder)
    if found is None:
        return None
    path, full, heading = found
    block = None
    if heading and heading.startswith("^"):
        block, heading = heading[1:] or None, None
    key = link_key(full)
    plain = not path.startswith(("./", "../"))  # Obsidian also reads it from the vault root, then by name
    return Link(
        target=path,
        target_key=key,
        heading=heading,
        block=block,
        alias=text or None,
        embed=embed,
        in_frontmatter=False,
        line=line,
        alt_key=link_key(path) if plain and link_key(path) != key else None,
    )


_ATX_CLOSING = re.compile(r"\s+#+\s*$")


def _heading_text(raw: str) -> str:
    lines = raw.strip().splitlines()
    if not lines:
        return ""
    first = lines[0].strip()
    if first.startswith("#"):
        text = first.lstrip("#").strip()
        return _ATX_CLOSING.sub("", text).strip() if text.endswith("#") else text
    return " ".join(s for ln in lines[:-1] if (s := ln.strip()))  # setext: the underline is the last line


def _logseq_properties(body: str) -> dict[str, Any]:
    """The page properties of a Logseq page: the ``key:: value`` lines it starts with."""
    props: dict[str, Any] = {}
    for line in body.lstrip("\n").splitlines():
        m = _PROPERTY.fullmatch(line.strip().removeprefix("- ").strip())
        if m is None:
            break
        key, value = m[1].lower(), m[2].strip()
        if key in ("tags", "alias", "aliases"):
            values = [
                v.strip().removeprefix("#").removeprefix("[[").removesuffix("]]").strip()
                for v in value.split(",")
                if v.strip()
            ]
            props[key] = [normalize_tag(v) for v in values] if key == "tags" else values
        else:
            props[key] = value
    return props


_SCALAR_LINE = re.compile(r"^(?P<key>[\w-]+)[ \t]*:[ \t]*(?P<q>['\"]?)(?P<v>[^'\"#\n]*?)(?P=q)[ \t]*(?:#.*)?$", re.M)


def _scalar_text(raw_fm: str | None, key: str) -> str | None:
    """A top-level frontmatter scalar as written (``0.10`` stays ``0.10``, not the number 0.1)."""
    for m in _SCALAR_LINE.finditer(raw_fm or ""):
        if m["key"] == key and m["v"].strip():
            return m["v"].strip()
    return None


def _inside_any(spans: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(a <= start and end <= b for a, b in spans)


@dataclass
class _Body:
    """A body and what the parser found in it, for the steps that read links and tags from its text."""

    text: str
    line_of: markdown.LineCounter
    code: list[tuple[int, int]]
    notags: list[tuple[int, int]]
    mdlinks: list[MdLink]
    heads: list[tuple[int, int, int]]  # (start, end, level) of each heading
    code_starts: list[int] = field(default_factory=list)
    notag_starts: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.code = merge_ranges(self.code)
        self.notags = merge_ranges(self.notags)
        self.code_starts = [s for s, _ in self.code]
        self.notag_starts = [s for s, _ in self.notags]

    def in_code(self, pos: int) -> bool:
        return bool(self.code) and in_ranges(self.code, self.code_starts, pos)


def parse_note(text: str, title: str, dialect: Dialect = OBSIDIAN, path: str | None = None) -> ParsedNote:
    """Parse a note's full text (BOM and CRLF tolerated) as ``dialect`` reads it.

    ``title``: the title the file name gives (links to the note itself name it); ``path``: the
    note's vault-relative path, which Markdown links are relative to (the vault root if None)."""
    if text.startswith("\ufeff"):
        text = text[1:]
    raw_fm, body, offset = split_frontmatter(text)
    frontmatter, fm_error = parse_frontmatter(raw_fm)
    fm_lines = text.count("\n", 0, offset)
    summary, body = summary_codec.decode(body)
    body_start_line = fm_lines + 1 + (text[offset:].count("\n") - body.count("\n") if summary else 0)
    folder = path.rsplit("/", 1)[0] if path and "/" in path else ""

    props = frontmatter
    if dialect.properties and "::" in body:
        found = _logseq_properties(body)
        if found:
            props = {**found, **(frontmatter or {})}
    tags, aliases, links = _property_parts(props, raw_fm, frontmatter, title, dialect)
    headings: list[Heading] = []
    unsorted = False  # Markdown links come after the wiki-links: put back in text order
    if "[" in body or "#" in body or "=" in body or "-" in body:
        parts = _structure(body, body_start_line)
        headings = [
            Heading(level=level, text=_heading_text(body[start:end]), line=parts.line_of(start))
            for start, end, level in parts.heads
        ]
        wiki_spans, alias_spans = _wiki_links(parts, title, dialect, folder, links)
        unsorted = _markdown_links(parts, wiki_spans, folder, links)
        unsorted = _block_refs(parts, dialect, links) or unsorted
        tags += _body_tags(parts, dialect, alias_spans)
    if unsorted:
        links.sort(key=lambda ln: (not ln.in_frontmatter, ln.line))
    shown, names, desc, note_id = _names(props, raw_fm, title, dialect)
    created, updated = dialects.note_dates(dialect, frontmatter)
    return ParsedNote(
        title=shown,
        frontmatter=props,
        fm_error=fm_error,
        body=body,
        tags=list(dict.fromkeys(t for t in tags if t and not _DIGITS.match(t))),  # first-seen order
        aliases=aliases,
        links=links,
        headings=headings,
        summary=summary,
        body_offset=offset,
        names=names,
        desc=desc,
        note_id=note_id,
        created=created,
        updated=updated,
        block_ids=[m.lower() for m in _BLOCK_ID.findall(body)] if dialect.properties and "id::" in body else [],
    )


def _property_parts(
    props: dict[str, Any] | None, raw_fm: str | None, frontmatter: dict[str, Any] | None, title: str, dialect: Dialect
) -> tuple[list[str], list[str], list[Link]]:
    """The tags, aliases and links the note's properties give (frontmatter, or Logseq's page properties)."""
    tags: list[str] = []
    aliases: list[str] = []
    links: list[Link] = []
    if not props:
        return tags, aliases, links
    for key in ("tags", "tag"):
        tags.extend(normalize_tag(t) for t in string_list(props.get(key)))
    for key in ("aliases", "alias"):
        aliases.extend(alias_list(props.get(key)))
    if raw_fm and "[[" in raw_fm:  # links written in properties: related: "[[Other]]"
        for s in walk_strings(frontmatter):
            for m in WIKILINK.finditer(s):
                link = _make_link(m, 1, True, title, dialect.alias_first)
                if link:
                    links.append(link)
    return tags, aliases, links


def _structure(body: str, first_line: int) -> _Body:
    """The body's code, no-tag ranges (links, bare URLs) and Markdown links; pyromark runs only when
    ``needs_parse`` says it could find any."""
    mdlinks: list[MdLink] = []
    heads: list[tuple[int, int, int]] = []
    code: list[tuple[int, int]] = []
    notags: list[tuple[int, int]] = []
    if needs_parse(body):
        code, notags, heads = body_structure(body, mdlinks if _MD_LINK_HINT.search(body) else None)
    else:
        heads = atx_headings(body)
    if "://" in body:  # a bare URL's fragment (https://host/page?q#part) is not a tag
        notags += _url_spans(body)
    return _Body(body, markdown.LineCounter(body, first_line), code, notags, mdlinks, heads)


_SCHEME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-")


def _url_spans(body: str) -> list[tuple[int, int]]:
    """The spans ``_URL.finditer`` gives, found from each ``://``: the search starts where the run of scheme
    characters before it starts (no match can start earlier), where ``finditer`` tries its leading ``\b``
    at every position of the body (20 times slower on the bench vault's notes with a URL)."""
    spans: list[tuple[int, int]] = []
    pos = 0
    while (colon := body.find("://", pos)) >= 0:
        start = colon
        while start > pos and body[start - 1] in _SCHEME_CHARS:
            start -= 1
        found = _URL.search(body, start)  # (its \b still sees the character before ``start``)
        if found is None:
            break
        spans.append(found.span())
        pos = found.end()
    return spans


def _wiki_links(
    parts: _Body, title: str, dialect: Dialect, folder: str, links: list[Link]
) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """The body's ``[[wiki-links]]`` outside code, into ``links``; returns their spans and those of the
    ones with an alias (``[[Target|#alias]]``: the alias part is never a tag)."""
    body = parts.text
    wiki_spans: list[tuple[int, int]] = []
    alias_spans: list[tuple[int, int]] = []
    if "[[" not in body:
        return wiki_spans, alias_spans
    refs = {}
    if dialect.ref_definitions and parts.mdlinks:  # [[note]] with a [note]: path.md definition
        refs = {label.lower(): dest for _s, _e, dest, label, _img in parts.mdlinks if label}
    for m in WIKILINK.finditer(body):
        if parts.in_code(m.start()):
            continue
        wiki_spans.append((m.start(), m.end()))
        if "|" in m.group(1):
            alias_spans.append((m.start(), m.end()))
        link = _make_link(m, parts.line_of(m.start()), False, title, dialect.alias_first)
        if link:
            dest = refs.get(m.group(1).lower()) if refs else None
            found_ref = markdown_target(dest, folder) if dest else None
            if found_ref is not None:
                link.alt_key, link.target_key = link.target_key, link_key(found_ref[1])
            links.append(link)
    return wiki_spans, alias_spans


def _markdown_links(parts: _Body, wiki_spans: list[tuple[int, int]], folder: str, links: list[Link]) -> bool:
    """The body's Markdown links and images to files of the vault, into ``links``; True if any."""
    body = parts.text
    added = False
    for start, end, dest, _label, image in parts.mdlinks:
        if wiki_spans and _inside_any(wiki_spans, start, end):
            continue  # [[note]] read by CommonMark as a reference to a [note]: definition
        text_start = body.find("[", start, end) + 1
        label = body[text_start : max(text_start, body.find("]", text_start, end))].strip()
        link = _markdown_link(dest, folder, parts.line_of(start), image, label)
        if link:
            links.append(link)
            added = True
    return added


def _block_refs(parts: _Body, dialect: Dialect, links: list[Link]) -> bool:
    """Logseq block references outside code (a link to the page holding the block), into ``links``."""
    body = parts.text
    if not (dialect.properties and "((" in body):
        return False
    added = False
    for m in _BLOCK_REF.finditer(body):
        if not parts.in_code(m.start()):
            ref = f"(({m.group(2).lower()}))"
            links.append(
                Link(
                    target=ref,
                    target_key=ref,
                    heading=None,
                    block=m.group(2).lower(),
                    alias=None,
                    embed=bool(m.group(1)),
                    in_frontmatter=False,
                    line=parts.line_of(m.start()),
                )
            )
            added = True
    return added


def _body_tags(parts: _Body, dialect: Dialect, alias_spans: list[tuple[int, int]]) -> list[str]:
    """The body's ``#tags`` (and Logseq's ``#[[multi word]]``) outside code, links and aliases."""
    body = parts.text
    tags: list[str] = []
    if dialect.bracket_tags and "#[[" in body:
        tags += [normalize_tag(m.group(1)) for m in _BRACKET_TAG.finditer(body) if not parts.in_code(m.start())]
    if "#" not in body:
        return tags
    alias_starts = [s for s, _ in alias_spans]
    for m in (_DOTTED_TAG if dialect.dotted_tags else _TAG).finditer(body):
        pos = m.start()
        if pos and (body[pos - 1].isalnum() or body[pos - 1] in _TAG_BLOCKERS or body[pos - 1] == "_"):
            continue
        if parts.in_code(pos) or (parts.notags and in_ranges(parts.notags, parts.notag_starts, pos)):
            continue
        if alias_spans and in_ranges(alias_spans, alias_starts, pos):
            continue
        tag = m.group(1).rstrip("/.")
        if tag and not _DIGITS.match(tag):
            tags.append(normalize_tag(tag))
    return tags


def _names(
    props: dict[str, Any] | None, raw_fm: str | None, title: str, dialect: Dialect
) -> tuple[str, list[str], str | None, str | None]:
    """The title shown (a frontmatter title, else the file's), the other names the note answers to, its
    description and the id its tool gave it."""
    shown, names = title, []
    fm_title = props.get("title") if props else None
    if isinstance(fm_title, int | float) and not isinstance(fm_title, bool):  # title: 0.119 (Dendron)
        fm_title = _scalar_text(raw_fm, "title") or str(fm_title)
    if isinstance(fm_title, str) and fm_title.strip() and fm_title.strip() != title:
        shown, names = fm_title.strip(), [title]
    desc = props.get("desc") or props.get("description") if props else None
    note_id = props.get("id") if props and dialect.id_names else None
    return (
        shown,
        names,
        desc.strip() if isinstance(desc, str) and desc.strip() else None,
        str(note_id).strip() if isinstance(note_id, str | int) and str(note_id).strip() else None,
    )
