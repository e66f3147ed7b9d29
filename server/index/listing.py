"""Listings over the index: tags, recent notes, backlinks, the inventory and status.

All of them leave hidden notes out (a tag carried only by hidden notes does not exist
for an agent) and order deterministically, so paging with a cursor never skips a note.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote

import apsw

from server.errors import KmsError
from server.index.overview import overview
from server.index.privacy import hidden_counts
from server.index.properties import Filter, filters_sql
from server.store.db import rows, scalar
from server.vault.scope import Vaults, VaultScope

# the notes agents never see as a rid set the indexes answer (no note row is read); a scope's: ``VaultScope.rids_sql``
HIDDEN_RIDS = "(SELECT rid FROM notes WHERE hidden_at IS NOT NULL)"


def list_tags(
    conn: apsw.Connection, vault_id: Vaults = None, limit: int | None = None, cursor: str | None = None
) -> dict[str, Any]:
    """Tags of visible notes with counts, most used first (then by name); keyset paging on (count, tag),
    so a vault with thousands of tags can be listed whole, a page at a time. Read from the counts kept
    per vault and tag as the index changes (``server.store.kept_counts``: visible notes only)."""
    scope, scope_params = VaultScope.of(vault_id).sql("t.vault_id")
    where = f"WHERE 1 = 1 {scope}" if scope else ""
    params: list[Any] = list(scope_params)
    having = ""
    if cursor:
        c = decode_cursor(cursor)
        if not isinstance(c.get("c"), int) or not isinstance(c.get("g"), str):
            raise KmsError("invalid-input", "cursor is not one this server issued; omit it to start over")
        having = "HAVING sum(t.notes) < ? OR (sum(t.notes) = ? AND t.tag > ?)"
        params += [c["c"], c["c"], c["g"]]
    limit_sql = ""
    if limit is not None:
        limit_sql = "LIMIT ?"
        params.append(limit + 1)
    found = rows(
        conn,
        f"""SELECT t.tag, sum(t.notes) AS count FROM kept_tags t
            {where} GROUP BY t.tag {having} ORDER BY count DESC, t.tag ASC
            {limit_sql}""",
        tuple(params),
    )
    out: dict[str, Any] = {"tags": found, "nextCursor": None}
    if limit is not None and len(found) > limit:
        out["tags"] = found = found[:limit]
        out["nextCursor"] = encode_cursor({"c": found[-1]["count"], "g": found[-1]["tag"]})
    return out


_CARD = """n.id AS noteId, n.title, n.path, v.name AS vault, n.tags, n.updated_at AS updatedAt"""


def _cards(found: list[dict]) -> list[dict]:
    for r in found:
        r["tags"] = r["tags"].split() if r["tags"] else []
    return found


def list_recent(conn: apsw.Connection, limit: int = 10, vault_id: Vaults = None) -> list[dict[str, Any]]:
    where, scope_params = VaultScope.of(vault_id).sql()
    params: tuple = (*scope_params, limit)
    return _cards(
        rows(
            conn,
            f"""SELECT {_CARD} FROM notes n JOIN vaults v ON v.id = n.vault_id
            WHERE n.hidden_at IS NULL {where} ORDER BY n.updated_at DESC, n.path ASC, n.id ASC LIMIT ?""",
            params,
        )
    )


def _snippet_around(body: str, line: int, first_body_line: int, width: int = 160) -> str:
    lines = body.splitlines()
    idx = max(0, min(len(lines) - 1, line - first_body_line)) if lines else 0
    text = lines[idx].strip() if lines else ""
    return text if len(text) <= width else text[: width - 1] + "…"


def backlinks(
    conn: apsw.Connection, note_id: str, limit: int = 25, vault_id: Vaults = None, offset: int = 0
) -> list[dict[str, Any]]:
    """Visible notes that wiki-link to ``note_id`` (by title, alias or path); self-links excluded.
    With ``vault_id`` the note must be in that vault and only links from that vault are shown.
    ``offset``: how many of them (in this order) to skip, for a page after the first."""
    return backlink_page(conn, note_id, limit, vault_id, offset)[0]


def backlink_page(
    conn: apsw.Connection, note_id: str, limit: int = 25, vault_id: Vaults = None, offset: int = 0
) -> tuple[list[dict[str, Any]], int]:
    """``backlinks`` and how many visible notes link to it in all (hidden ones never counted)."""
    scope, scope_params = VaultScope.of(vault_id).sql()
    target = rows(conn, f"SELECT rid FROM notes n WHERE id = ? AND hidden_at IS NULL {scope}", (note_id, *scope_params))
    if not target:
        raise KmsError("not-found", f"no note with id {note_id!r}")
    rid = target[0]["rid"]
    found = rows(
        conn,
        f"""SELECT {_CARD}, min(l.line) AS line, max(l.in_frontmatter) AS inFrontmatter, n.body AS body,
                   (SELECT count(*) FROM links l2 WHERE l2.src_rid = n.rid AND l2.dst_rid = ?) AS linkCount
            FROM links l JOIN notes n ON n.rid = l.src_rid JOIN vaults v ON v.id = n.vault_id
            WHERE l.dst_rid = ? AND l.src_rid != ? AND n.hidden_at IS NULL {scope}
            GROUP BY n.rid ORDER BY n.updated_at DESC, n.path ASC, n.id ASC LIMIT ? OFFSET ?""",
        (rid, rid, rid, *scope_params, limit, offset),
    )
    total = conn.execute(
        f"""SELECT count(DISTINCT l.src_rid) FROM links l JOIN notes n ON n.rid = l.src_rid
                             WHERE l.dst_rid = ? AND l.src_rid != ? AND n.hidden_at IS NULL {scope}""",
        (rid, rid, *scope_params),
    ).fetchall()[0][0]
    assert isinstance(total, int)
    for r in found:
        body = r.pop("body")
        r["snippet"] = _link_snippet(body, conn, r["noteId"], rid)
        r["inFrontmatter"] = bool(r["inFrontmatter"])
        r.pop("line")
    return _cards(found), total


def _link_snippet(body: str, conn: apsw.Connection, src_id: str, dst_rid: int, width: int = 200) -> str:
    """A short window of the source body around its first link to the target."""
    targets = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT l.target FROM links l JOIN notes n ON n.rid = l.src_rid WHERE n.id = ? AND l.dst_rid = ?",
            (src_id, dst_rid),
        )
    ]
    lowered = body.lower()
    for t in targets:
        pos = lowered.find("[[" + t.lower())
        if pos < 0:  # a Markdown link: [text](target), perhaps percent-encoded
            pos = max(lowered.find(t.lower()), lowered.find(quote(t).lower()))
        if pos >= 0:
            start = max(0, pos - width // 2)
            end = min(len(body), pos + width // 2)
            text = " ".join(body[start:end].split())
            return ("…" if start else "") + text + ("…" if end < len(body) else "")
    return "(linked from frontmatter)"


def ambiguous_links(conn: apsw.Connection, limit: int = 20) -> dict[str, Any]:
    """Links whose name several notes of their vault answer to equally (a bare title two folders both
    have): resolved the way Obsidian does (same folder first, then the shortest path), and reported so
    the person can write the path. ``ambiguousLinks`` counts links; ``ambiguous`` lists names (the links
    of visible notes: a name only a hidden note writes is not said)."""
    found = rows(
        conn,
        """
        SELECT v.name AS vault, l.target_key AS name, count(DISTINCT l.src_rid || ':' || l.ord) AS links,
               (SELECT group_concat(p, '') FROM (SELECT DISTINCT d.path AS p FROM note_keys k
                  JOIN notes d ON d.rid = k.rid WHERE k.key = l.target_key AND k.vault_id = s.vault_id
                  AND k.kind <= 2 ORDER BY d.path)) AS candidates
        FROM links l JOIN notes s ON s.rid = l.src_rid JOIN vaults v ON v.id = s.vault_id
        WHERE l.dst_rid IS NOT NULL AND l.target_vault IS NULL AND s.hidden_at IS NULL AND (
            SELECT count(DISTINCT k.rid) FROM note_keys k
            WHERE k.key = l.target_key AND k.vault_id = s.vault_id AND k.kind <= 2) > 1
        GROUP BY s.vault_id, l.target_key ORDER BY v.name, l.target_key""",
    )
    return {
        "ambiguousLinks": sum(r["links"] for r in found),
        "ambiguous": [{**r, "candidates": r["candidates"].split("")} for r in found[:limit]],
    }


def encode_cursor(data: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str) -> dict[str, Any]:
    try:
        pad = "=" * (-len(cursor) % 4)
        data = json.loads(base64.urlsafe_b64decode(cursor + pad))
        if not isinstance(data, dict):
            raise ValueError
        return data
    except (ValueError, json.JSONDecodeError):
        raise KmsError("invalid-input", "cursor is not one this server issued; omit it to start over") from None


def tag_condition(tag: str) -> tuple[str, tuple[str, ...]]:
    """SQL (over ``n``) for "carries ``tag`` or a tag nested under it" (``project`` takes ``project/x``)."""
    return (
        "EXISTS (SELECT 1 FROM note_tags t WHERE t.rid = n.rid AND (t.tag = ? OR (t.tag > ? AND t.tag < ?)))",
        (tag, tag + "/", tag + "0"),
    )  # '0' follows '/': the range is every "tag/..."


# An inventory page stops early when its cards (mostly their AI summaries, which have no length limit)
# pass ~60,000 characters, ~15,000 tokens: under Claude Code's 25,000-token limit for one MCP result.
PAGE_BUDGET_CHARS = 60_000
CARD_CHARS = 250  # a card's JSON besides its title, path and summary (id, vault, tags, dates, sizes)
CARD_SUMMARY_CHARS = 2_000  # a card's summary is cut here (``clipped``): one card never fills a page


def inventory(
    conn: apsw.Connection,
    cursor: str | None = None,
    limit: int = 100,
    vault_id: Vaults = None,
    *,
    folder: str | None = None,
    tag: str | None = None,
    props: Sequence[Filter] = (),
) -> dict[str, Any]:
    """Every visible note, newest first (then by path: a checkout gives every file one date), without
    bodies; keyset paging on (updatedAt, path, noteId). ``folder`` keeps the notes directly in that
    folder ('' = the vault root), ``tag`` those carrying it, ``props`` those passing every property filter.
    A page holds ``limit`` cards, or fewer when
    their summaries are long (``PAGE_BUDGET_CHARS``); ``nextCursor`` goes on from the last one."""
    params: list[Any] = []
    where = ["n.hidden_at IS NULL"]
    in_scope, scope_params = VaultScope.of(vault_id).sql()
    if in_scope:
        where.append(in_scope.removeprefix(" AND "))
        params += scope_params
    if folder is not None:
        where.append("n.folder = ?")
        params.append(folder)
    if tag is not None:
        sql, tag_params = tag_condition(tag)
        where.append(sql)
        params += tag_params
    if props:
        cond, prop_params = filters_sql(props)
        where.append(cond.removeprefix(" AND "))
        params += prop_params
    if cursor:
        c = decode_cursor(cursor)
        if (
            not isinstance(c.get("u"), int | float)
            or not isinstance(c.get("i"), str)
            or not isinstance(c.get("p"), str)
        ):
            raise KmsError("invalid-input", "cursor is not one this server issued; omit it to start over")
        where.append("(n.updated_at < ? OR (n.updated_at = ? AND (n.path > ? OR (n.path = ? AND n.id > ?))))")
        params += [c["u"], c["u"], c["p"], c["p"], c["i"]]
    params.append(limit + 1)
    found = rows(
        conn,
        f"""SELECT {_CARD}, n.summary_state, n.summary_text, n.token_estimate AS tokenEstimate,
                   n.size_bytes AS sizeBytes
            FROM notes n JOIN vaults v ON v.id = n.vault_id
            WHERE {" AND ".join(where)} ORDER BY n.updated_at DESC, n.path ASC, n.id ASC LIMIT ?""",
        tuple(params),
    )
    more = len(found) > limit
    found = found[:limit]
    spent = 0
    for n, r in enumerate(found):  # a page an agent host takes whole, however long the summaries
        text = r["summary_text"]
        if text is not None and len(text) > CARD_SUMMARY_CHARS:  # the note itself has it whole (kms_read)
            r["summary_text"] = text[:CARD_SUMMARY_CHARS].rstrip() + "…"
            r["summary_clipped"] = True
        spent += CARD_CHARS + len(r["title"] or "") + len(r["path"]) + len(r["summary_text"] or "")
        if n and spent > PAGE_BUDGET_CHARS:
            found, more = found[:n], True
            break
    for r in found:
        r["summary"] = {
            "state": r.pop("summary_state"),
            "text": r.pop("summary_text"),
            **({"clipped": True} if r.pop("summary_clipped", False) else {}),
        }
    out: dict[str, Any] = {"notes": _cards(found), "nextCursor": None}
    if more and found:
        last = found[-1]
        out["nextCursor"] = encode_cursor({"u": last["updatedAt"], "p": last["path"], "i": last["noteId"]})
    return out


def status(conn: apsw.Connection, db_path: str | None = None) -> dict[str, Any]:
    """What a person wants to know about the index at a glance (``kms status``): the overview
    plus the database's size, tags, links and the flagged notes."""
    size = 0
    if db_path and db_path != ":memory:":
        for suffix in ("", "-wal"):
            try:
                size += os.path.getsize(db_path + suffix)
            except OSError:
                pass
    ov = overview(conn, flagged=True)
    return {
        "dbPath": db_path,
        "dbBytes": size,
        "vaults": [v.to_json() for v in ov.vaults],
        "notes": ov.notes,
        "hidden": ov.hidden,
        "hiddenBy": hidden_counts(conn),  # how many notes each privacy rule (and `kms hide`) hides
        # what visible notes hold, as ``kms tags`` and ``kms unresolved`` count them
        "tags": scalar(conn, "SELECT count(DISTINCT tag) FROM kept_tags"),
        "links": scalar(conn, f"SELECT count(*) FROM links WHERE src_rid NOT IN {HIDDEN_RIDS}"),
        "unresolvedLinks": scalar(conn, "SELECT coalesce(sum(links), 0) FROM kept_unresolved"),
        "attachmentLinks": scalar(
            conn, f"SELECT count(*) FROM links WHERE dst_file IS NOT NULL AND src_rid NOT IN {HIDDEN_RIDS}"
        ),
        **ambiguous_links(conn),
        "flagged": rows(
            conn,
            "SELECT n.id AS noteId, v.name AS vault, n.path, n.fm_error AS reason FROM notes n"
            " JOIN vaults v ON v.id = n.vault_id WHERE n.fm_error IS NOT NULL ORDER BY v.name, n.path LIMIT 50",
        ),
        "flaggedCount": ov.flagged or 0,
        "lastIndexedAt": ov.last_indexed_at,
    }


def outgoing_links(conn: apsw.Connection, rid: int, vault_id: Vaults = None, limit: int = 100) -> dict[str, Any]:
    """Where a note's wiki-links go: the visible notes they resolve to (in link order, each once) and the
    names of the rest. A link to a hidden note or to another vault than the session's is unresolved for
    an agent: those notes are as if absent."""
    found = rows(
        conn,
        """SELECT l.target, d.rid, d.id AS noteId, d.title, d.path, d.vault_id, d.hidden_at
           FROM links l LEFT JOIN notes d ON d.rid = l.dst_rid
           WHERE l.src_rid = ? ORDER BY l.ord""",
        (rid,),
    )
    resolved: dict[str, dict[str, Any]] = {}
    unresolved: dict[str, None] = {}
    scope = VaultScope.of(vault_id)
    for r in found:
        if r["rid"] == rid:
            continue  # a link to itself says nothing about where to read on
        visible = r["noteId"] is not None and r["hidden_at"] is None and scope.sees(r["vault_id"])
        if visible and r["noteId"] not in resolved:
            resolved[r["noteId"]] = {"noteId": r["noteId"], "title": r["title"], "path": r["path"]}
        elif not visible:
            unresolved.setdefault(r["target"], None)
    links, names = list(resolved.values()), list(unresolved)
    out: dict[str, Any] = {"links": links[:limit], "unresolvedLinks": names[:limit]}
    if len(links) > limit or len(names) > limit:
        out["linksTruncated"] = True
    return out
