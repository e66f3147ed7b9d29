"""``kms_link``: add ``"[[Target]]"`` to a frontmatter list property, additive and idempotent.

The target need not exist yet (a forward link, resolved by the index once it does). A link
already in the property (any spelling that resolves by the same key) changes nothing. The
change is an ordinary ``PropertiesChanged``, so revert and the dashboard need nothing new.
"""

from __future__ import annotations

from server.activity.changes import PropertiesChanged
from server.errors import KmsError
from server.vault import frontmatter
from server.vault.files import TextFormat
from server.vault.markdown import Unclosed, frontmatter_span
from server.vault.parser import WIKILINK, link_key
from server.vault.properties import check_key
from server.vault.registry import Vault
from server.writes.cas import write_note
from server.writes.context import NoteRef, WriteContext
from server.writes.limits import MAX_TITLE_CHARS
from server.writes.outcome import Edit, WriteOutcome


def check_target(target: str) -> str:
    """A link target as an agent may give it (``Target``, ``folder/Target``, ``[[Target]]``)."""
    t = target.strip()
    if t.startswith("[[") and t.endswith("]]"):
        t = t[2:-2].strip()
    if not t or len(t) > MAX_TITLE_CHARS or any(c in t for c in "[]|\n\r\x00") or t.startswith("#"):
        raise KmsError("invalid-input", f"target {target!r} must be a note title or path (no [ ] | or line breaks)")
    return t


def link(ctx: WriteContext, vault: Vault, note: NoteRef, *, target: str, prop: str = "related") -> WriteOutcome:
    """Add ``"[[target]]"`` to the list property ``prop`` (created if absent)."""
    target = check_target(target)
    check_key(prop)
    entry = f"[[{target}]]"

    def compute(text: str, fmt: TextFormat) -> Edit:
        try:
            span = frontmatter_span(text)
            current, _py = frontmatter.load_both(text[span.open_end : span.close_start] if span else "")
        except (Unclosed, KmsError) as e:
            raise KmsError("invalid-input", "the note's frontmatter does not parse; fix it first") from e
        value = frontmatter.to_json(current[prop]) if prop in current else []
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise KmsError("invalid-input", f"property {prop!r} holds {type(value).__name__}, not a list of links")
        keys = {link_key(m.group(1).split("|")[0].split("#")[0]) for v in value for m in WIKILINK.finditer(v)}
        if link_key(target) in keys:
            return Edit(text, None)  # already linked: idempotent
        edit = frontmatter.apply_props(text, {prop: [*value, entry]}, [], newline=fmt.newline)
        change = PropertiesChanged(note.path, edit.before, edit.after, edit.created_block) if edit.changed else None
        return Edit(edit.new_text, change)

    return write_note(ctx, vault, note, compute)
