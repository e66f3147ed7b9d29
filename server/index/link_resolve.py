"""Resolving links: which note (or attachment) each link of the index aims at, and the attachment rows.

Its own room because it is the one part of writing the index that is SQL over every link rather than a
note's own rows: ``server.index.writer`` writes a note's rows; this decides, after they are written, where
the links of the changed notes (and the links aimed at their keys) land. Attachments live here because a
link no note answers to may name one, and a file appearing or going resolves the vault's links again.
``server.index.indexer`` and ``server.index.cold`` call it.
"""

from __future__ import annotations

from collections.abc import Callable

import apsw

from server.index.link_vaults import NAMED_PREFIX, NAMED_VAULT
from server.vault.paths import name_key


def affected_keys(conn: apsw.Connection, rid: int) -> list[str]:
    return [r[0] for r in conn.execute("SELECT key FROM note_keys WHERE rid = ?", (rid,))]


# A link resolves to a note, the way Obsidian picks: its written key before a Markdown link's second
# key, a path or title before an alias, a shorter path ending or a tool's id; among equals the note in
# the linking note's folder, then the shortest path. Most names have one note: that is settled by a
# count first, without ranking (ranking is most of what resolving costs). A link resolves in its own
# vault, unless it names another ([[dendron://vault/note]]: ``server.index.link_vaults``, its key then
# prefixed with the Dendron vault's folder in that kms vault).
def _note_of_link(vault: str, key: str, alt: str) -> str:
    candidates = f"""FROM notes s, note_keys k
        WHERE s.rid = links.src_rid AND k.key IN ({key}, {alt}) AND k.vault_id = {vault}"""
    return f"""coalesce(
        (SELECT CASE WHEN count(DISTINCT k.rid) = 1 THEN max(k.rid) END {candidates}),
        (SELECT k.rid {candidates.replace("note_keys k", "note_keys k JOIN notes d ON d.rid = k.rid")}
         ORDER BY k.key = {key} DESC, min(k.kind, 2), d.folder = s.folder DESC, length(d.path), d.path
         LIMIT 1))"""


# A link no note answers to may name an attachment (![[pic.png]], ![](img/pic.png), [[file.pdf]]).
def _file_of_link(vault: str, key: str, alt: str) -> str:
    return f"""(SELECT a.path FROM notes s, attachments a
        WHERE s.rid = links.src_rid AND a.key IN ({key}, {alt}) AND a.vault_id = {vault}
        ORDER BY a.key = {key} DESC, min(a.kind, 2), a.folder = s.folder DESC, length(a.path), a.path
        LIMIT 1)"""


def _either(of: Callable[[str, str, str], str]) -> str:
    own = of("s.vault_id", "links.target_key", "links.alt_key")
    named = of(NAMED_VAULT, f"{NAMED_PREFIX} || links.target_key", f"{NAMED_PREFIX} || links.alt_key")
    return f"CASE WHEN links.target_vault IS NULL THEN {own} ELSE {named} END"


_NOTE_OF_LINK = _either(_note_of_link)
_TO_NOTE = f"UPDATE links SET dst_rid = {_NOTE_OF_LINK}"
_FILE_OF_LINK = f"CASE WHEN dst_rid IS NULL THEN {_either(_file_of_link)} END"
_TO_FILE = f"UPDATE links SET dst_file = {_FILE_OF_LINK}"


def _only_changed(column: str, value: str) -> str:
    """Every link's ``column`` set to ``value``, rewriting only the links whose target that changes: a full
    reindex resolves every link again and nearly all come out as they were, and rewriting them all (their
    rows, the indexes on their targets, the pages to commit) cost about twice the resolving."""
    return (
        f"WITH r AS MATERIALIZED (SELECT src_rid AS src, ord AS n, {value} AS v FROM links) "
        f"UPDATE links SET {column} = r.v FROM r WHERE links.src_rid = r.src AND links.ord = r.n "
        f"AND links.{column} IS NOT r.v"
    )


_TO_NOTE_ALL, _TO_FILE_ALL = _only_changed("dst_rid", _NOTE_OF_LINK), _only_changed("dst_file", _FILE_OF_LINK)


def resolve_links(conn: apsw.Connection, keys: set[str] | None, src_rids: set[int] | None) -> None:
    """(Re)resolve links: all of them, or those aimed at ``keys`` or from ``src_rids``.

    A link resolves inside its own vault only (``_TO_NOTE``), then to an attachment (``_TO_FILE``).
    """
    if keys is None and src_rids is None:
        conn.execute(_TO_NOTE_ALL)
        conn.execute(_TO_FILE_ALL)
        return
    if not keys and not src_rids:
        return  # nothing a link could resolve to has changed
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _affected_keys (key TEXT PRIMARY KEY)")
    conn.execute("CREATE TEMP TABLE IF NOT EXISTS _affected_src (rid INTEGER PRIMARY KEY)")
    conn.execute("DELETE FROM _affected_keys")
    conn.execute("DELETE FROM _affected_src")
    conn.executemany("INSERT OR IGNORE INTO _affected_keys VALUES (?)", [(k,) for k in keys or ()])
    conn.executemany("INSERT OR IGNORE INTO _affected_src VALUES (?)", [(r,) for r in src_rids or ()])
    # Indexed passes, not one OR: a link can only change target if its source changed or a note
    # that gained or lost one of the keys it names changed (this also resolves forward links).
    for where in (
        " WHERE src_rid IN (SELECT rid FROM temp._affected_src)",
        " WHERE target_key IN (SELECT key FROM temp._affected_keys)",
        " WHERE alt_key IN (SELECT key FROM temp._affected_keys)",
    ):
        conn.execute(_TO_NOTE + where)
        conn.execute(_TO_FILE + where)


def resolve_named(conn: apsw.Connection) -> None:
    """Resolve again every link that names a vault (``[[dendron://name/note]]``): which kms vault a name
    stands for changed (``server.vault.registry.settle_workspace``)."""
    conn.execute(_TO_NOTE + " WHERE target_vault IS NOT NULL")
    conn.execute(_TO_FILE + " WHERE target_vault IS NOT NULL")


def sync_attachments(conn: apsw.Connection, vault_id: int, paths: list[str]) -> bool:
    """Bring the vault's attachment rows in line with the files found; True if any came or went
    (then every link of the vault that names no note is resolved again)."""
    known = {r[0] for r in conn.execute("SELECT DISTINCT path FROM attachments WHERE vault_id = ?", (vault_id,))}
    found = set(paths)
    if known == found:
        return False
    gone = known - found
    if gone:
        conn.executemany("DELETE FROM attachments WHERE vault_id = ? AND path = ?", [(vault_id, p) for p in gone])
    _add_attachment_rows(conn, vault_id, sorted(found - known))
    return True


def add_attachments(conn: apsw.Connection, vault_id: int, paths: list[str]) -> bool:
    """Files that just appeared in the vault (the watcher's events; a removal makes it scan): their rows,
    and the vault's links that name no note resolved again. True if any was new."""
    known = {
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT path FROM attachments WHERE vault_id = ? AND path IN ({','.join('?' * len(paths))})",
            (vault_id, *paths),
        )
    }
    new = [p for p in dict.fromkeys(paths) if p not in known]
    if new:
        _add_attachment_rows(conn, vault_id, new)
    return bool(new)


def _add_attachment_rows(conn: apsw.Connection, vault_id: int, paths: list[str]) -> None:
    """The rows of new attachments (if any), then every link of the vault that names no note resolved again."""
    conn.executemany(
        "INSERT OR IGNORE INTO attachments VALUES (?, ?, ?, ?, ?)",
        [(key, vault_id, kind, p, p.rpartition("/")[0]) for p in paths for key, kind in attachment_keys(p)],
    )
    conn.execute(_TO_FILE + " WHERE src_rid IN (SELECT rid FROM notes WHERE vault_id = ?)", (vault_id,))


def attachment_keys(path: str) -> list[tuple[str, int]]:
    """The keys a link may name a file by: its path, its name, each shorter path ending."""
    key = name_key(path)
    parts = key.split("/")
    keys = [(key, 1)]
    if len(parts) > 1:
        keys.append((parts[-1], 2))
        keys += [("/".join(parts[i:]), 4) for i in range(1, len(parts) - 1)]
    return keys
