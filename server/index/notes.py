"""Look notes up by what a person or agent types: an id, a title or a path.

Every query here leaves hidden notes out unless the caller asks for them (only the
person's own CLI does, to unhide); ``VISIBLE`` is the one filter agent-facing queries add.

``find_note`` is the one name lookup of the read and write tools: an id, ``vault:path``, a path,
title, alias or path ending; in each vault the most specific kind of name wins, and several vaults
answering is ``invalid-input`` with ``vault:path`` candidates. A hidden or out-of-scope note is as
if absent. A note's public id is ``notes.id`` (``n`` and 12 hex digits), kept across edits, renames
and full reindexes; ``notes.rid`` is the internal FTS rowid, never shown to an agent.
"""

from __future__ import annotations

import json
import time
from typing import Any

import apsw

from server.errors import KmsError
from server.index.privacy import purge_embeddings, sync_symlinks
from server.store.db import rows, write_tx
from server.vault import dialects
from server.vault.paths import NOTE_SUFFIX, name_key, note_suffix_spellings, strip_note_suffix
from server.vault.scope import Vaults, VaultScope

VISIBLE = "n.hidden_at IS NULL"
_REF_COLS = "n.rid, n.id, n.vault_id, n.path, n.title, n.folder, n.size_bytes"


def _scope(include_hidden: bool, vault_id: Vaults) -> tuple[str, tuple[Any, ...]]:
    """The SQL condition (and its parameters) for what a caller may see: visible notes, the scope's vaults."""
    sql = "" if include_hidden else f"AND {VISIBLE}"
    # unary +: the vault is checked on the rows a name found, never by walking the vault's notes in the
    # (vault, path) index, which SQLite otherwise picks for a name lookup (a scan of the vault per kind)
    in_scope, params = VaultScope.of(vault_id).sql("+n.vault_id")
    return f"{sql}{in_scope}", params


# What a name may be, most specific first: a path, a title (or file stem), an alias, a shorter path
# ending (``folder/Note``), the id the vault's tool gave the note (Dendron ``id``).
_NAME_KINDS = (1, 2, 3, 4, 5)


def _split_vault(conn: apsw.Connection, ref: str, vault_id: Vaults) -> tuple[str, Vaults] | None:
    """``vault:path`` (the form kms prints) -> (path, that vault's id); None when it names a vault
    outside ``vault_id`` (the scope): then nothing matches. A ref whose prefix is no vault is left whole."""
    name, sep, rest = ref.partition(":")
    if not sep or not rest.strip() or "/" in name:
        return ref, vault_id
    found = conn.execute("SELECT id FROM vaults WHERE name = ?", (name.strip(),)).fetchall()
    if not found:
        return ref, vault_id
    named = int(found[0][0])  # type: ignore[arg-type]  # vaults.id: INTEGER PRIMARY KEY
    if not VaultScope.of(vault_id).sees(named):
        return None
    return rest, named


def _lookup(conn: apsw.Connection, ref: str, include_hidden: bool, vault_id: Vaults = None) -> list[dict]:
    """The notes ``ref`` names: in each vault the matches of the most specific kind of name (a path
    before a title before an alias...), so a name two vaults both answer to gives both."""
    split = _split_vault(conn, ref.strip(), vault_id)
    if split is None:
        return []
    if split[0] != ref.strip():  # vault:path; a title that only looks like one ("work: plan") still names its note
        return _lookup_in(conn, *split, include_hidden) or _lookup_in(conn, ref, vault_id, include_hidden)
    return _lookup_in(conn, ref, vault_id, include_hidden)


def _lookup_in(conn: apsw.Connection, ref: str, vault_id: Vaults, include_hidden: bool) -> list[dict]:
    scope, scope_params = _scope(include_hidden, vault_id)
    ref_lc = name_key(ref.strip())
    path_lc = strip_note_suffix(ref_lc)
    by_id = rows(conn, f"SELECT {_REF_COLS} FROM notes n WHERE n.id = ? {scope}", (ref.strip(), *scope_params))
    if by_id:
        return by_id
    found: list[dict] = []
    settled: set[int] = set()  # vaults where a more specific kind of name matched already
    for kind in _NAME_KINDS:
        # note_keys hold ``name_key``s of paths, titles and aliases: SQLite's lower() and NOCASE
        # fold ASCII only, so 'Éclair' would not find 'éclair'
        hits = rows(
            conn,
            f"SELECT DISTINCT {_REF_COLS} FROM note_keys k JOIN notes n ON n.rid = k.rid "
            f"WHERE k.key = ? AND k.kind = {kind} {scope} ORDER BY n.vault_id, n.path",
            (ref_lc if kind in (2, 5) else path_lc, *scope_params),
        )
        new = [h for h in hits if h["vault_id"] not in settled]
        found += new
        settled.update(h["vault_id"] for h in new)
    return found


def suggestions(
    conn: apsw.Connection, ref: str, include_hidden: bool = False, limit: int = 5, vault_id: Vaults = None
) -> list[str]:
    # deferred: rapidfuzz only on a miss, not on the way to tools/list
    from rapidfuzz import process

    scope, params = _scope(include_hidden, vault_id)
    paths: dict[str, list[str]] = {}  # each title once (several notes share "11"), with the notes' paths
    for title, path in conn.execute(f"SELECT n.title, n.path FROM notes n WHERE 1 {scope}", params):
        paths.setdefault(str(title), []).append(str(path))
    out: list[str] = []
    for title, score, _ in process.extract(ref, list(paths), limit=limit):
        if score >= 50:  # a title several notes share names none of them: their paths do
            out += [title] if len(paths[title]) == 1 else sorted(paths[title])
    return list(dict.fromkeys(out))[:limit]


def find_note(
    conn: apsw.Connection, ref: str, *, include_hidden: bool = False, vault_id: Vaults = None
) -> dict[str, Any]:
    """Who ``ref`` names (id, title, path or alias): rid, id, vault_id, path, title, folder and
    size_bytes only, which is all a write needs; a not-found error with close matches otherwise.
    With ``vault_id`` (a session's scope), notes of other vaults are as if absent."""
    found = _lookup(conn, ref, include_hidden, vault_id)
    if not found:
        close = suggestions(conn, ref, include_hidden, vault_id=vault_id)
        hint = f"; did you mean: {', '.join(close)}?" if close else ""
        raise KmsError("not-found", f"no note matches {ref!r}{hint}", suggestions=close)
    if len(found) > 1:
        if len({r["vault_id"] for r in found}) > 1:  # across vaults: never picked silently
            names = {r["id"]: r["name"] for r in rows(conn, "SELECT id, name FROM vaults")}
            paths = [f"{names[r['vault_id']]}:{r['path']}" for r in found]
            raise KmsError(
                "invalid-input",
                f"{ref!r} names notes in several vaults; use vault:path or an id: {', '.join(paths)}",
                candidates=paths,
            )
        paths = [r["path"] for r in found]
        raise KmsError(
            "invalid-input", f"{ref!r} names several notes; use an id or a path: {', '.join(paths)}", candidates=paths
        )
    return found[0]


def resolve_note(
    conn: apsw.Connection, ref: str, *, include_hidden: bool = False, vault_id: Vaults = None
) -> dict[str, Any]:
    """The whole note ``ref`` names (see ``find_note``)."""
    note_id = find_note(conn, ref, include_hidden=include_hidden, vault_id=vault_id)["id"]
    return get_note(conn, note_id, include_hidden=include_hidden)


def get_note(
    conn: apsw.Connection, note_id: str, *, include_hidden: bool = False, vault_id: Vaults = None
) -> dict[str, Any]:
    """One note by id, with its vault; not-found when hidden (unless asked) or outside ``vault_id``."""
    scope, params = _scope(include_hidden, vault_id)
    found = rows(
        conn,
        f"""SELECT n.*, v.name AS vault, v.root AS vault_root, v.dialect FROM notes n
            JOIN vaults v ON v.id = n.vault_id WHERE n.id = ? {scope}""",
        (note_id, *params),
    )
    if not found:
        tool_id = rows(
            conn,
            f"SELECT n.id FROM note_keys k JOIN notes n ON n.rid = k.rid WHERE k.key = ? AND k.kind = 5 {scope}",
            (name_key(note_id.strip()), *params),
        )
        if len(tool_id) != 1 or tool_id[0]["id"] == note_id:  # an id the vault's tool gave it (Dendron)
            raise KmsError("not-found", f"no note with id {note_id!r}")
        return get_note(conn, tool_id[0]["id"], include_hidden=include_hidden, vault_id=vault_id)
    note = found[0]
    note["frontmatter"] = json.loads(note["frontmatter"]) if note["frontmatter"] else None
    note["aliases"] = json.loads(note["aliases"]) if note["aliases"] else []
    note["tags"] = note["tags"].split() if note["tags"] else []
    note["headings"] = rows(conn, "SELECT level, text, line FROM headings WHERE rid = ? ORDER BY ord", (note["rid"],))
    note["parent"] = _parent(conn, note, include_hidden)
    return note


def _parent(conn: apsw.Connection, note: dict[str, Any], include_hidden: bool) -> dict[str, Any] | None:
    """The nearest existing ancestor of a note in a hierarchical dialect (Dendron ``a.b.c`` -> ``a.b``,
    or ``a`` when ``a.b`` is only a stub): noteId, title and path; None elsewhere."""
    rules = dialects.get(note["dialect"])
    if not rules.hierarchy:
        return None
    folder = note["folder"] + "/" if note["folder"] else ""
    name = dialects.parent(rules, strip_note_suffix(note["path"][len(folder) :]))
    suffixes = note_suffix_spellings()  # the parent's suffix may be in any case
    marks = ", ".join("?" * len(suffixes))
    while name:
        found = rows(
            conn,
            f"SELECT n.id AS noteId, n.title, n.path FROM notes n WHERE n.vault_id = ? AND n.path IN ({marks})"
            + ("" if include_hidden else f" AND {VISIBLE}")
            + " ORDER BY n.path = ? DESC",
            (note["vault_id"], *(f"{folder}{name}{x}" for x in suffixes), f"{folder}{name}{NOTE_SUFFIX}"),
        )
        if found:
            return found[0]
        name = dialects.parent(rules, name)
    return None


def set_hidden(conn: apsw.Connection, ref: str, hidden: bool) -> dict[str, Any]:
    """Stamp or clear the person's own ``hidden_stamp`` (``kms hide``/``unhide``); ``hidden_at``, the
    flag agents' queries filter on, follows it unless a privacy rule hides the note anyway (then the
    returned note's ``hidden_rule`` says which). ``changed`` says whether the stamp was not so already
    (an already stamped note keeps the time it was hidden)."""

    note = resolve_note(conn, ref, include_hidden=True)
    changed = (note["hidden_stamp"] is not None) != hidden
    if changed:
        with write_tx(conn):
            conn.execute(
                """UPDATE notes SET hidden_stamp = :stamp,
                     hidden_at = CASE WHEN :stamp IS NOT NULL THEN :stamp WHEN hidden_rule IS NULL THEN NULL
                                      ELSE coalesce(hidden_at, :now) END
                   WHERE rid = :rid""",
                {"stamp": time.time() if hidden else None, "now": time.time(), "rid": note["rid"]},
            )
            sync_symlinks(conn, note["vault_id"])
            purge_embeddings(conn, [note["rid"]])
    return {**get_note(conn, note["id"], include_hidden=True), "changed": changed}


def index_is_empty(conn: apsw.Connection) -> str | None:
    """None when there is something to serve, else what the person should run."""
    if not conn.execute("SELECT 1 FROM vaults LIMIT 1").fetchall():
        return "no vault is registered: run `kms vault add PATH`, then `kms index`"
    if not conn.execute("SELECT 1 FROM notes LIMIT 1").fetchall():
        return "the index is empty: run `kms index` (and check `kms vault list`)"
    return None
