"""What an agent orients by, from the index alone: vaults and their folders, a compact map (the most
linked notes, recent ones, tags), index health (flagged notes, unresolved links) and folder listings.

Everything here counts and names visible notes only, in the session's vault scope: a folder whose
notes are all hidden does not exist for an agent, a link to a hidden note is as unresolved as one
to no note, and the counts never include hidden notes (nor another vault's). Lists are capped by
the caller; each function returns whole items, never a cut one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import apsw

from server.errors import KmsError
from server.index import listing
from server.index.overview import overview
from server.index.properties import Filter, filters_sql
from server.store.db import rows, scalar
from server.vault import dialects
from server.vault.scope import Vaults, VaultScope


def _scope(vault_id: Vaults, alias: str = "n", *, by_folder: bool = False) -> tuple[str, tuple[Any, ...]]:
    """The vault condition; ``by_folder``: checked on the visible-folder index (which holds vault_id), not
    through the (vault, path) index SQLite would otherwise pick and then read every note row of."""
    plus = "+" if by_folder else ""
    return VaultScope.of(vault_id).sql(f"{plus}{alias}.vault_id")


def vaults(conn: apsw.Connection, vault_id: Vaults = None) -> list[dict[str, Any]]:
    """The vaults in scope: name, dialect, visible notes and when they were last indexed (from the
    one overview every front end shows: its counts come from indexes)."""
    out = []
    scope = VaultScope.of(vault_id)
    for v in overview(conn).vaults:
        vid = int(scalar(conn, "SELECT id FROM vaults WHERE name = ?", (v.name,)))
        if scope.sees(vid):
            out.append(
                {
                    "id": vid,
                    "name": v.name,
                    "dialect": v.dialect or dialects.OBSIDIAN.name,
                    "notes": v.notes - v.hidden,
                    "lastIndexedAt": v.last_indexed_at,
                }
            )
    return out


def normalize_folder(path: str | None) -> str:
    """A folder as the index stores it ('' = the vault root); ``invalid-input`` for '..' and the like."""
    text = (path or "").strip().replace("\\", "/").strip("/")
    if text == ".":
        return ""
    parts = text.split("/") if text else []
    if any(p in ("", ".", "..") for p in parts) or "\x00" in text:
        raise KmsError(
            "invalid-input",
            f"{path!r} is not a vault folder: use a vault-relative path such as "
            "'projects/kms' ('' or '/' for the root)",
        )
    return text


def normalize_tag(tag: str | None) -> str | None:
    if tag is None:
        return None
    text = tag.strip().lstrip("#").strip("/").lower()
    if not text or any(c.isspace() for c in text):
        raise KmsError("invalid-input", f"{tag!r} is not a tag: one word such as 'project' or 'project/kms'")
    return text


def subfolders(
    conn: apsw.Connection,
    parent: str,
    vault_id: Vaults = None,
    *,
    tag: str | None = None,
    props: Sequence[Filter] = (),
    limit: int = 200,
) -> tuple[list[dict[str, Any]], int]:
    """The folders directly under ``parent`` that hold visible notes (at any depth; with a tag or property
    filters, notes that pass them), by name, each with how many; and how many more folders there are
    beyond ``limit``. Summed per first path segment from the counts kept per stored folder
    (``server.store.kept_counts``); with a filter, counted per stored folder from the visible-folder index
    (in its order, no sort)."""
    prefix = parent + "/" if parent else ""
    names = {r[0]: r[1] for r in conn.execute("SELECT id, name FROM vaults")}
    counts: dict[tuple[str, str], int] = {}
    for vid, folder, n in _folder_counts(conn, prefix, parent, vault_id, tag, props):
        key = (folder[len(prefix) :].split("/", 1)[0], names[vid])
        counts[key] = counts.get(key, 0) + n
    found = [
        {"path": prefix + name, "name": name, "vault": vault, "notes": n} for (name, vault), n in sorted(counts.items())
    ]
    return found[:limit], max(0, len(found) - limit)


def _folder_counts(
    conn: apsw.Connection, prefix: str, parent: str, vault_id: Vaults, tag: str | None, props: Sequence[Filter]
) -> apsw.Cursor:
    """(vault id, folder, visible notes passing the filters) of every stored folder below ``parent``."""
    cond = "folder != ''" if not prefix else "folder > ? AND folder < ?"
    cond_params: tuple[Any, ...] = () if not prefix else (prefix, parent + "0")  # '0' follows '/'
    if tag is None and not props:
        scope, scope_params = VaultScope.of(vault_id).sql("vault_id")
        return conn.execute(
            f"SELECT vault_id, folder, notes FROM kept_folders WHERE {cond} {scope}", (*cond_params, *scope_params)
        )
    where, params = _scope(vault_id, by_folder=True)
    tag_sql, tag_params = listing.tag_condition(tag) if tag is not None else ("1", ())
    props_sql, props_params = filters_sql(props)
    return conn.execute(
        f"""SELECT n.vault_id, n.folder, count(*) FROM notes n
                WHERE n.hidden_at IS NULL AND n.{cond} {where} AND {tag_sql}{props_sql}
                GROUP BY n.folder, n.vault_id""",
        (*cond_params, *params, *tag_params, *props_params),
    )


def list_folder(
    conn: apsw.Connection,
    path: str | None,
    vault_id: Vaults = None,
    *,
    tag: str | None = None,
    cursor: str | None = None,
    limit: int = 100,
    props: Sequence[Filter] = (),
) -> dict[str, Any]:
    """One folder: its notes (inventory cards, newest first, paged as ``kms_inventory``) and, on the first
    page, its subfolders with counts. A folder with no visible note at any depth is ``not-found``."""
    folder = normalize_folder(path)
    tag = normalize_tag(tag)
    page = listing.inventory(conn, cursor, limit, vault_id, folder=folder, tag=tag, props=props)
    out: dict[str, Any] = {"path": folder, **({"tag": tag} if tag else {})}
    if cursor is None:
        folders, more = subfolders(conn, folder, vault_id, tag=tag, props=props)
        if folder and not folders and not page["notes"] and not _holds_notes(conn, folder, vault_id):
            raise KmsError(
                "not-found", f"no folder {folder!r} with notes" + _close_folders(conn, folder, vault_id), path=folder
            )
        out["folders"] = folders
        if more:
            out["moreFolders"] = more
    return {**out, **page}


def _holds_notes(conn: apsw.Connection, folder: str, vault_id: Vaults) -> bool:
    where, params = _scope(vault_id, by_folder=True)
    return (
        scalar(
            conn,
            f"""SELECT 1 FROM notes n WHERE n.hidden_at IS NULL AND (n.folder = ? OR
                            (n.folder > ? AND n.folder < ?)) {where} LIMIT 1""",
            (folder, folder + "/", folder + "0", *params),
        )
        is not None
    )


def _close_folders(conn: apsw.Connection, folder: str, vault_id: Vaults) -> str:
    # deferred: rapidfuzz only to suggest a folder that was not found
    from rapidfuzz import process

    where, params = _scope(vault_id)
    names = [
        r[0]
        for r in conn.execute(
            f"SELECT DISTINCT n.folder FROM notes n WHERE n.hidden_at IS NULL AND n.folder != '' {where}", params
        )
    ]
    close = [name for name, score, _ in process.extract(folder, names, limit=5) if score >= 60]
    return f"; did you mean: {', '.join(close)}?" if close else " (kms_list_folder without path lists the root)"


def most_linked(conn: apsw.Connection, vault_id: Vaults = None, limit: int = 10) -> list[dict[str, Any]]:
    """Visible notes with the most distinct visible notes linking to them (hubs first). Read in order from
    the backlink counts kept as the index changes (``server.store.kept_counts``), which count sources in
    every vault. A session scoped to some vaults counts each candidate's sources again within its scope (a
    link from outside the scope is no one's to count), in the kept order, until no later candidate can
    beat the ones found (a kept count is never below a scoped one)."""
    in_scope = VaultScope.of(vault_id)
    scope, params = in_scope.sql()
    ranked = conn.execute(
        f"""SELECT b.dst_rid, n.id, n.title, n.path, v.name, b.sources
            FROM kept_backlinks b INDEXED BY kept_backlinks_top JOIN notes n ON n.rid = b.dst_rid
            JOIN vaults v ON v.id = n.vault_id WHERE n.hidden_at IS NULL {scope}
            ORDER BY b.sources DESC, b.dst_rid""",
        params,
    )
    src_sql, src_params = in_scope.rids_sql("l.src_rid")
    found: list[tuple[int, int, dict[str, Any]]] = []
    for rid, note_id, title, path, vault, kept in ranked:
        if len(found) >= limit and (in_scope.every or (kept, -rid) < (found[limit - 1][0], -found[limit - 1][1])):
            break  # in order (count, then rid): nothing from here on can come before the last one kept
        count = kept
        if not in_scope.every:
            count = int(
                scalar(
                    conn,
                    f"""SELECT count(DISTINCT l.src_rid) FROM links l WHERE l.dst_rid = ? AND l.src_rid != l.dst_rid
                        AND l.src_rid NOT IN {listing.HIDDEN_RIDS} {src_sql}""",
                    (rid, *src_params),
                )
                or 0
            )
        if count:
            card = {"noteId": note_id, "title": title, "path": path, "vault": vault, "backlinks": count}
            found.append((count, rid, card))
            found.sort(key=lambda f: (-f[0], f[1]))
    return [card for _count, _rid, card in found[:limit]]


def flagged(conn: apsw.Connection, vault_id: Vaults = None, limit: int = 50) -> tuple[list[dict[str, Any]], int]:
    """Visible notes whose frontmatter could not be read, with why; and how many there are."""
    where, params = _scope(vault_id)
    base = (
        f"FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE n.fm_error IS NOT NULL AND n.hidden_at IS NULL {where}"
    )
    found = rows(
        conn,
        f"SELECT n.id AS noteId, n.title, n.path, v.name AS vault, n.fm_error AS reason {base} "
        "ORDER BY v.name, n.path LIMIT ?",
        (*params, limit),
    )
    return found, int(scalar(conn, f"SELECT count(*) {base}", params) or 0)


def unresolved(conn: apsw.Connection, vault_id: Vaults = None, limit: int = 20) -> tuple[list[dict[str, Any]], int]:
    """Link targets visible notes name that no note (and no attachment) answers, most named first, each
    with one note that names it; and how many such links there are. A link to a hidden note is in neither
    list: naming it as missing would invite an agent to create it, and a collision would tell that it
    exists. Counted from the unresolved links kept per vault and name (``server.store.kept_counts``);
    only the winners' links are read (the partial index of unresolved links holds target, key and source)."""
    in_scope = VaultScope.of(vault_id)
    scope, params = in_scope.sql("vault_id")
    found = conn.execute(
        f"""SELECT target_key, sum(links) AS n FROM kept_unresolved WHERE 1 = 1 {scope}
            GROUP BY target_key ORDER BY n DESC, target_key LIMIT ?""",
        (*params, limit),
    ).fetchall()
    vault_sql, vault_params = in_scope.rids_sql("l.src_rid")
    top = []
    for key, n in found:
        target, src = next(
            conn.execute(
                f"""SELECT min(l.target), min(l.src_rid) FROM links l INDEXED BY links_unresolved
                    WHERE l.target_key = ? AND l.dst_rid IS NULL AND l.dst_file IS NULL
                    AND l.src_rid NOT IN {listing.HIDDEN_RIDS}
                    {vault_sql}""",
                (key, *vault_params),
            )
        )
        top.append(
            {"target": target, "links": n, "fromNoteId": scalar(conn, "SELECT id FROM notes WHERE rid = ?", (src,))}
        )
    total = scalar(conn, f"SELECT sum(links) FROM kept_unresolved WHERE 1 = 1 {scope}", params)
    return top, int(total or 0)


def tags(conn: apsw.Connection, vault_id: Vaults = None, limit: int = 30) -> tuple[list[dict[str, Any]], int]:
    """The most used tags (visible notes) and how many tags there are in all."""
    found = listing.list_tags(conn, vault_id)["tags"]
    return found[:limit], len(found)


def index_counts(conn: apsw.Connection, vault_id: Vaults = None) -> dict[str, int]:
    """Visible notes, their distinct tags and the links they make (from indexes, no note row read)."""
    scope, params = VaultScope.of(vault_id).rids_sql("l.src_rid")
    return {
        "notes": sum(v["notes"] for v in vaults(conn, vault_id)),
        "tags": len(listing.list_tags(conn, vault_id)["tags"]),
        "links": int(
            scalar(
                conn,
                f"SELECT count(*) FROM links l WHERE l.src_rid NOT IN {listing.HIDDEN_RIDS} {scope}",
                params,
            )
            or 0
        ),
    }


def embedding_coverage(conn: apsw.Connection, vault_id: Vaults = None) -> dict[str, Any]:
    """How many visible notes have embeddings of their current text (semantic search finds them)."""
    where, params = _scope(vault_id)
    found = rows(
        conn,
        f"""SELECT count(*) AS notes, count(s.rid) AS embedded FROM notes n
                           LEFT JOIN note_embed_state s ON s.rid = n.rid AND s.content_hash = n.content_hash
                                                       AND s.title = n.title
                           WHERE n.hidden_at IS NULL {where}""",
        params,
    )[0]
    total, done = found["notes"], found["embedded"]
    return {
        "notes": total,
        "embeddedNotes": done,
        "pendingNotes": total - done,
        "coverage": round(done / total, 3) if total else 1.0,
    }
