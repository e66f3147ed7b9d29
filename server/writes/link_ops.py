"""``kms_link``: add ``"[[Target]]"`` to a frontmatter list property, additive and idempotent.

A property keeps its type: one holding a single text value is refused (a scalar stays a scalar; Obsidian
types a property per key), as are ``tags``, ``aliases`` and ``cssclasses`` (names, not links). The target
need not exist yet (a forward link, resolved by the index once it does). A link
already in the property (any spelling that resolves by the same key) changes nothing. Several
targets go in one write, best effort: each is reported (added, already there, or refused with its
kind). A target naming another vault (``other:path``, ``dendron://other/...``) is refused: a link
stays inside its note's vault, the session's. The change is an ordinary ``PropertiesChanged``, so
revert and the dashboard need nothing new. Like every write it follows ``write.allowlist`` and a
token's ``folder:`` scopes (checked on the note it writes, before any target).
"""

from __future__ import annotations

import re
from typing import Any

import apsw

from server.activity.changes import PropertiesChanged
from server.errors import KmsError
from server.index.link_vaults import named_vault
from server.vault import frontmatter
from server.vault.files import TextFormat
from server.vault.markdown import Unclosed, frontmatter_span
from server.vault.parser import WIKILINK, link_key
from server.vault.properties import check_key
from server.vault.registry import Vault
from server.writes.cas import write_note
from server.writes.context import NoteRef, WriteContext
from server.writes.limits import MAX_TITLE_CHARS
from server.writes.operations import check_note_folder
from server.writes.outcome import Edit, WriteOutcome, WriteResult


def check_target(target: str) -> str:
    """A link target as an agent may give it (``Target``, ``folder/Target``, ``[[Target]]``)."""
    t = target.strip()
    if t.startswith("[[") and t.endswith("]]"):
        t = t[2:-2].strip()
    if not t or len(t) > MAX_TITLE_CHARS or any(c in t for c in "[]|\n\r\x00") or t.startswith("#"):
        raise KmsError("invalid-input", f"target {target!r} must be a note title or path (no [ ] | or line breaks)")
    return t


def in_vault(conn: apsw.Connection, vault: Vault, target: str, scope: tuple[str, ...] = ()) -> str:
    """``target`` as a link inside ``vault``: a ``vault:`` or ``dendron://vault/`` prefix naming this vault is
    dropped (a ``dendron://`` name is also the vault's Dendron name, ``server.index.link_vaults``); one naming
    another vault is refused (a link never leads out of its note's vault). In a session scoped to some vaults
    any such prefix is, with the same words whether that vault exists or not."""
    if target.startswith(_DENDRON):
        named, _, rest = target[len(_DENDRON) :].partition("/")
        if named != vault.name and (inside := named_vault(conn, vault.id, named)) and inside[0] == vault.id:
            # a Dendron vault this vault holds (its workspace's dendron.yml): kept as written when it is a
            # folder of this vault (a workspace added by its root), so it resolves into that folder
            return f"{_DENDRON}{named}/{check_target(rest)}" if inside[1] else check_target(rest)
    else:
        named, sep, rest = target.partition(":")
        if (
            not sep
            or not _VAULT_NAME.fullmatch(named)
            or rest[:1].isspace()
            or (
                named != vault.name
                and not scope
                and not conn.execute("SELECT 1 FROM vaults WHERE name = ?", (named,)).fetchall()
            )
        ):
            return target  # a title with a colon in it ('Meeting: notes')
    if named != vault.name:
        raise KmsError(
            "invalid-input",
            f"{target!r} names vault {named!r}; a link stays in its note's vault "
            f"({vault.name!r}): link to a note of that vault",
            target=target,
        )
    return check_target(rest)


_VAULT_NAME = re.compile(r"[\w][\w.-]{0,63}")  # (``registry.add_vault``'s rule)
_DENDRON = "dendron://"


def link(ctx: WriteContext, vault: Vault, note: NoteRef, *, target: str, prop: str = "related") -> WriteOutcome:
    """Add ``"[[target]]"`` to the list property ``prop`` (created if absent)."""
    check_note_folder(ctx, vault, note)
    check_link_property(prop)
    return _link(ctx, vault, note, [in_vault(ctx.conn, vault, check_target(target), ctx.scope)], prop)


def link_many(
    ctx: WriteContext, vault: Vault, note: NoteRef, *, targets: list[str], prop: str = "related"
) -> WriteOutcome:
    """Add each of ``targets`` to ``prop`` in one write, best effort: ``results`` says what became of each."""
    check_note_folder(ctx, vault, note)
    check_link_property(prop)
    results: list[dict[str, Any]] = []
    good: list[str] = []
    for given in targets:
        try:
            t = in_vault(ctx.conn, vault, check_target(given), ctx.scope)
        except KmsError as e:
            results.append({"target": given, "ok": False, "error": e.kind, "message": e.message})
            continue
        good.append(t)
        results.append({"target": given, "ok": True, "link": f"[[{t}]]"})
    if good:
        out = _link(ctx, vault, note, good, prop)
    else:
        out = WriteOutcome(
            WriteResult(
                noteId=note.id,
                title=note.title,
                path=note.path,
                vault=vault.name,
                bytesBefore=note.size_bytes,
                bytesAfter=note.size_bytes,
                linesAdded=0,
                changed=False,
            )
        )
    added = list(out.result.get("added", []))
    for r in results:
        if r["ok"]:
            r["added"] = r["link"] in added  # False: already linked (or by an earlier target of this call)
            if r["added"]:
                added.remove(r["link"])
    out.result["results"] = results
    out.result["failed"] = sum(not r["ok"] for r in results)
    return out


# keys whose values are names, not links (Obsidian's tags, aliases, CSS classes): a link there would become
# a tag "[[x]]" or an alias, so kms_link refuses them
NOT_LINK_KEYS = frozenset({"tags", "tag", "aliases", "alias", "cssclasses", "cssclass"})


def check_link_property(prop: str) -> str:
    """``prop`` if a link may go in it: a valid key that is not one of ``NOT_LINK_KEYS``."""
    check_key(prop)
    if prop.casefold() in NOT_LINK_KEYS:
        raise KmsError(
            "invalid-input",
            f"property {prop!r} holds names, not links; link in another property (default related)",
        )
    return prop


def _link(ctx: WriteContext, vault: Vault, note: NoteRef, targets: list[str], prop: str) -> WriteOutcome:
    """Write ``targets`` into ``prop`` (both callers checked the note's folder and ``prop`` first)."""
    added: list[str] = []

    def compute(text: str, fmt: TextFormat) -> Edit:
        try:
            span = frontmatter_span(text)
            current, _py = frontmatter.load_both(text[span.open_end : span.close_start] if span else "")
        except (Unclosed, KmsError) as e:
            raise KmsError("invalid-input", "the note's frontmatter does not parse; fix it first") from e
        value = frontmatter.to_json(current[prop]) if prop in current else []
        scalar = isinstance(value, str)
        values = [value] if scalar else value
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise KmsError("invalid-input", f"property {prop!r} holds {type(value).__name__}, not a list of links")
        keys = {link_key(m.group(1).split("|")[0].split("#")[0]) for v in values for m in WIKILINK.finditer(v)}
        added.clear()
        for target in targets:
            if link_key(target) not in keys:
                keys.add(link_key(target))
                added.append(f"[[{target}]]")
        if not added:
            return Edit(text, None)  # already linked: idempotent
        if scalar:  # a property's type is the person's (Obsidian types it per key): a text stays a text
            raise KmsError(
                "invalid-input",
                f"property {prop!r} holds one value ({value!r}), not a list of links; kms_link only adds to a "
                "list property (give another property, or set this one with kms_update_properties)",
            )
        edit = frontmatter.apply_props(text, {prop: [*value, *added]}, [], newline=fmt.newline)
        change = PropertiesChanged(note.path, edit.before, edit.after, edit.created_block) if edit.changed else None
        return Edit(edit.new_text, change)

    out = write_note(ctx, vault, note, compute)
    out.result["added"] = list(added)
    return out
