"""Rewrite the links of a note's text that point at a renamed or moved note.

The links rewritten are exactly the ones the parser (``server.vault.parser``) counts: every
``[[target]]`` form (``[[Title]]``, ``[[path/Title]]``, ``[[Title|alias]]``,
``[[Title#Heading]]``, ``[[Title#^block]]``, ``[[Title\\|alias]]`` in tables, embeds
``![[...]]``, Dendron's ``[[alias|target]]``) in the body outside code and the summary block,
and the ones written in frontmatter values; and every Markdown link ``[text](path)``, image
``![alt](path)`` and link reference definition ``[label]: path`` to a file of the vault. Only the
target part changes: the heading, block and alias parts, the spacing and the ``!`` stay exactly
as written; a Markdown destination keeps its style (relative to the linking note, or from the
vault root, or by name; percent-encoded or in angle brackets; with or without ``.md``; its anchor).
When the note itself moves, its own relative Markdown links to other files are made relative to
its new folder, so they keep naming the same files.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass
from urllib.parse import quote, unquote

from server.vault import summary as summary_codec
from server.vault.body_ranges import MdLink, body_structure, in_ranges, merge_ranges
from server.vault.frontmatter_read import split_frontmatter
from server.vault.markdown import SCHEME
from server.vault.parser import WIKILINK, link_key
from server.vault.paths import NOTE_SUFFIX, is_note_path, strip_note_suffix

_TARGET_END = re.compile(r"\\\||[|#^]")


# an inline destination at the end of a link's source: ](dest "title") or ](<dest>)
_INLINE_DEST = re.compile(
    r"\]\(\s*(<[^<>\n]*>|[^\s<>()]*(?:\([^\s()]*\)[^\s<>()]*)*)"
    r"(?:\s+(?:\"[^\"]*\"|'[^']*'|\([^()]*\)))?\s*\)$"
)
_REF_DEF = re.compile(r"^ {0,3}\[([^\]\n]+)\]:[ \t]*(<[^<>\n]*>|\S+)", re.M)


def _spans(text: str) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(start, end) of the inner text of every wiki-link the parser counts, and of every Markdown
    link destination (without angle brackets), in text order."""
    _raw, _body, offset = split_frontmatter(text)
    out: list[tuple[int, int]] = []
    dests: list[tuple[int, int]] = []
    if offset and "[[" in text[:offset]:
        out += [(m.start(1), m.end(1)) for m in WIKILINK.finditer(text, 0, offset)]
    region = text[offset:]
    _summary, rest = summary_codec.decode(region)
    start = offset + len(region) - len(rest)
    if "[" not in rest:
        return out, dests
    mdlinks: list[MdLink] = []
    code = merge_ranges(body_structure(rest, mdlinks)[0])
    starts = [s for s, _ in code]
    wiki: list[tuple[int, int]] = []
    for m in WIKILINK.finditer(rest):
        if not (code and in_ranges(code, starts, m.start())):
            wiki.append((m.start(), m.end()))
            out.append((start + m.start(1), start + m.end(1)))
    for a, b, _dest, label, _image in mdlinks:
        if label or any(w0 <= a and b <= w1 for w0, w1 in wiki):
            continue  # a reference: its definition is rewritten below
        dest = _INLINE_DEST.search(rest, a, b)
        if dest and dest.end() == b:
            d0, d1 = dest.span(1)
            if rest[d0:d1].startswith("<"):
                d0, d1 = d0 + 1, d1 - 1
            dests.append((start + d0, start + d1))
    if "]:" in rest:
        for m in _REF_DEF.finditer(rest):
            if not (code and in_ranges(code, starts, m.start())):
                d0, d1 = m.span(2)
                if rest[d0:d1].startswith("<"):
                    d0, d1 = d0 + 1, d1 - 1
                dests.append((start + d0, start + d1))
    return out, sorted(dests)


def rewrite_links(
    text: str,
    new_target: Callable[[str], str | None],
    *,
    alias_first: bool = False,
    folder: str = "",
    new_folder: str | None = None,
) -> tuple[str, int]:
    """``text`` with each link's target replaced by ``new_target(target as written)`` where that is
    not None; returns the new text and how many links changed.

    ``alias_first``: wiki-links are ``[[alias|target]]`` (Dendron). ``folder``: the linking note's
    folder (Markdown links are relative to it); ``new_folder``: where the note itself is going, when
    it moves. Markdown destinations are rewritten by ``new_target.markdown`` when it is a ``Retarget``.
    """
    wiki, dests = _spans(text)
    edits: list[tuple[int, int, str]] = []
    for a, b in wiki:
        inner = text[a:b]
        if alias_first and "|" in inner.replace("\\|", ""):
            a += inner.index("|") + 1
            inner = text[a:b]
        cut = _TARGET_END.search(inner)
        end = cut.start() if cut else len(inner)
        raw = inner[:end]
        target = raw.strip()
        if not target:
            continue  # [[#Heading]]: a link inside its own note
        new = new_target(target)
        if new is None or new == target:
            continue
        lead = raw[: len(raw) - len(raw.lstrip())]
        trail = raw[len(raw.rstrip()) :]
        edits.append((a, a + end, lead + new + trail))
    markdown = getattr(new_target, "markdown", None)
    if markdown is not None:
        for a, b in dests:
            new = markdown(text[a:b], folder, new_folder, text[a - 1 : a] == "<")
            if new is not None and new != text[a:b]:
                edits.append((a, b, new))
    if not edits:
        return text, 0
    pieces: list[str] = []
    pos = 0
    for a, b, new in sorted(edits):
        pieces += [text[pos:a], new]
        pos = b
    pieces.append(text[pos:])
    return "".join(pieces), len(edits)


@dataclass(frozen=True)
class Retarget:
    """The new target of each link to a note going from ``old_path`` to ``new_path``.

    A wiki-link written as a path (or a shorter path ending) gets the new path (keeping a leading
    ``/`` and a ``.md`` suffix if it had them); one written as the file name gets the new name; a
    title or an alias stays (it still resolves). ``exists``: whether a vault-relative path is a
    file, to tell a Markdown link relative to the note from one written from the vault root."""

    old_path: str
    new_path: str
    exists: Callable[[str], bool] | None = None

    def __call__(self, target: str) -> str | None:
        old_key, new_stem = link_key(self.old_path), strip_note_suffix(self.new_path)
        name_key = old_key.rsplit("/", 1)[-1]
        key = link_key(target)
        suffix = target[-len(NOTE_SUFFIX) :] if is_note_path(target) else ""
        if "/" in key and (key == old_key or old_key.endswith("/" + key)):
            return ("/" if target.startswith("/") else "") + new_stem + suffix
        if key == old_key or key == name_key:
            return new_stem.rsplit("/", 1)[-1] + suffix
        return None

    def markdown(self, written: str, folder: str, new_folder: str | None, angle: bool) -> str | None:
        """The new destination of a Markdown link written ``written`` in a note of ``folder`` (which
        is moving to ``new_folder``, or None), in the style it was written; None to leave it."""
        if not written or written.startswith(("#", "//")) or SCHEME.match(written):
            return None
        path, sep, frag = written.partition("#")
        decoded = unquote(path) if "%" in path else path
        relative = posixpath.normpath(posixpath.join(folder, decoded)) if folder else posixpath.normpath(decoded)
        old_key = link_key(self.old_path)
        new_file = self.new_path if is_note_path(decoded) else strip_note_suffix(self.new_path)
        moving = new_folder is not None and new_folder != folder
        if decoded.startswith("/"):
            if link_key(decoded) != old_key:
                return None
            new = "/" + new_file
        elif link_key(relative) == old_key:
            new = posixpath.relpath(new_file, (new_folder if new_folder is not None else folder) or ".")
            if decoded.startswith("./") and not new.startswith("../"):
                new = "./" + new
        elif self._is_file(relative, decoded):  # another file next to the linking note
            if not moving:
                return None
            new = posixpath.relpath(relative, new_folder or ".")  # the moving note's own link elsewhere
            if decoded.startswith("./") and not new.startswith("../"):
                new = "./" + new
        elif not decoded.startswith(("./", "../")) and link_key(decoded) == old_key:
            new = new_file  # from the vault root
        elif "/" not in decoded and link_key(decoded) == old_key.rsplit("/", 1)[-1]:
            new = new_file.rsplit("/", 1)[-1]  # by name, wherever it is
        else:
            return None
        if "%" in path or (" " in new and not angle):
            new = quote(new, safe="/!$&'()*+,;=:@-._~")
        return new + sep + frag

    def _is_file(self, relative: str, decoded: str) -> bool:
        """Whether the link names a file relative to its note (``./``, ``../``, or a file is there)."""
        if decoded.startswith(("./", "../")):
            return True
        if self.exists is None:
            return False
        return self.exists(relative) or (not is_note_path(relative) and self.exists(relative + NOTE_SUFFIX))


def retarget(
    old_path: str, new_path: str, old_title: str = "", new_title: str = "", exists: Callable[[str], bool] | None = None
) -> Retarget:
    """The ``new_target`` for a note going from ``old_path`` to ``new_path`` (see ``Retarget``);
    the titles are not needed: a link names a note by its file name, and its title stays."""
    return Retarget(old_path, new_path, exists)


class FolderMoves:
    """The ``Retarget`` of every note of a folder moving as one (a folder moved or renamed).

    ``for_note(linked)`` is the ``new_target`` for one note's text: each link is rewritten by the
    ``Retarget`` of the moving note it names, in its style. A wiki-link by path or path ending is
    matched only among ``linked`` (the moving notes the index resolved that note's links to), so a
    short ending several moving notes share goes where the index said; a link by name alone stays
    (a folder move keeps every name). A moving note's own relative Markdown links to files that stay
    are made relative to its new folder."""

    def __init__(self, moves: dict[str, str], exists: Callable[[str], bool] | None = None) -> None:
        self.retargets = {old: Retarget(old, new, exists) for old, new in moves.items()}
        self.keys = {old: link_key(old) for old in moves}
        self.by_key: dict[str, str] = {}
        for old in sorted(moves, key=len, reverse=True):  # among case variants, the shortest path wins
            self.by_key[self.keys[old]] = old
        self.outside = Retarget("\0", "\0", exists)  # names no moving note: only a mover's own links change

    def for_note(self, linked: Collection[str]) -> _NoteTargets:
        return _NoteTargets(self, [p for p in linked if p in self.retargets])


@dataclass(frozen=True)
class _NoteTargets:
    """``FolderMoves`` seen from one linking (or moving) note."""

    moves: FolderMoves
    linked: list[str]

    def __call__(self, target: str) -> str | None:
        key = link_key(target)
        if "/" not in key:
            return None  # by name (or alias): names do not change
        keys = self.moves.keys
        hits = sorted(
            (p for p in self.linked if keys[p] == key or keys[p].endswith("/" + key)),
            key=lambda p: (keys[p] != key, len(p)),
        )
        return self.moves.retargets[hits[0]](target) if hits else None

    def markdown(self, written: str, folder: str, new_folder: str | None, angle: bool) -> str | None:
        if not written or written.startswith(("#", "//")) or SCHEME.match(written):
            return None
        path = written.partition("#")[0]
        decoded = unquote(path) if "%" in path else path
        by_key = self.moves.by_key
        if decoded.startswith("/"):
            hit = by_key.get(link_key(decoded))
        else:
            relative = posixpath.normpath(posixpath.join(folder, decoded)) if folder else posixpath.normpath(decoded)
            hit = by_key.get(link_key(relative))
            if hit is None and not decoded.startswith(("./", "../")) and "/" in decoded:
                hit = by_key.get(link_key(decoded))  # from the vault root
        if hit is not None:
            return self.moves.retargets[hit].markdown(written, folder, new_folder, angle)
        return self.moves.outside.markdown(written, folder, new_folder, angle) if new_folder is not None else None
