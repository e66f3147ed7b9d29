"""How a note's public id is made, the same on every machine that indexes a copy of one vault.

Provenance, reads, memory, session records and the ids agents pass around then agree across machines: the
id is made from what travels with the note, never from one database. That is, in order:

- the id the note carries in its own text (Dendron's ``id``, a frontmatter ``id``: ``carried_id``);
- else the vault's **id scope** and the path the note was first seen at (composed Unicode, as macOS and
  Linux spell a name differently).

The id scope is the vault folder's own name (``id_scope``), not the name the vault is registered under in
kms: two machines may register one synced folder as ``notes`` and ``work``, but the sync tool gives the
folder one name on both (Syncthing, the cloud drives and a git clone keep it unless the person picks
another). Nothing is written into the vault for it (state of one machine never goes there). Decision
recorded in docs/sync.md, "Note ids across machines".

It lives in the store, below the index that makes new notes, because a migration re-derives the ids of a
database made before this rule (``migrate_note_ids``)."""

from __future__ import annotations

import hashlib
import unicodedata
from pathlib import PurePath

MAX_CARRIED = 200  # a longer frontmatter ``id`` is text, not an identifier


def id_scope(root: str) -> str:
    """The part of a vault's note ids that names the vault: its folder's own name, composed."""
    return unicodedata.normalize("NFC", PurePath(root).name or root)


def carried_id(value: object) -> str | None:
    """A frontmatter ``id`` as the id a note carries (a string or a number, 1-200 characters), or None."""
    if isinstance(value, str | int) and not isinstance(value, bool) and 0 < len(str(value).strip()) <= MAX_CARRIED:
        return str(value).strip()
    return None


def new_note_id(scope: str, path: str, carried: str | None = None, attempt: int = 0) -> str:
    """A new note's public id, from the vault's ``id_scope`` and the note's carried id or first path.
    ``attempt`` > 0 when that id is taken (a note renamed away from this path keeps the id it was born with;
    two notes copied with one frontmatter id): the next one.

    What cannot agree: a note renamed *and* edited while one machine's kms was not running is a new note to
    it (so a new id), unless it carries an id in its frontmatter (a rename with the same bytes is recognised
    at the next index and keeps the id); and two machines whose copies of the vault sit in folders of
    different names."""
    basis = f"id\0{scope}\0{carried}" if carried else f"path\0{scope}\0{unicodedata.normalize('NFC', path)}"
    if attempt:
        basis += f"\0{attempt}"
    return "n" + hashlib.sha256(basis.encode("utf-8", "surrogatepass")).hexdigest()[:12]
