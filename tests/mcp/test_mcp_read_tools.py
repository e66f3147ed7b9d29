"""The MCP read tools through the real server and a real in-memory SDK client (issue 3)."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import apsw
import pytest
from support.examples import example, specs
from support.mcp_session import mcp_client
from support.vaults import note_id, write

from server.activity import session_material
from server.index.indexer import index_vault
from server.index.listing import encode_cursor
from server.index.note_data import fence, unfence
from server.index.notes import set_hidden
from server.mcp.tools import tool_names
from server.mcp.tools.base import PAYLOAD_CAP_BYTES
from server.store.db import rows, scalar
from server.vault import summary
from server.vault.registry import add_vault, get_vault

if TYPE_CHECKING:
    from mcp_types import TextContent

READ_TOOLS = tool_names("read")
CARD_KEYS = {"noteId", "title", "path", "vault", "tags", "updatedAt"}


async def call(client: Any, name: str, args: dict | None = None) -> tuple[dict, bool]:
    """Call a tool; check the structured content is exactly the JSON text content."""
    result = await client.call_tool(name, args or {})
    [content] = result.content
    assert content.type == "text"
    assert json.loads(content.text) == result.structured_content
    return result.structured_content, bool(result.is_error)


async def ok(client: Any, name: str, args: dict | None = None) -> dict:
    data, is_error = await call(client, name, args)
    assert not is_error, data
    assert "error" not in data
    return data


async def err(client: Any, name: str, args: dict | None, kind: str) -> dict:
    data, is_error = await call(client, name, args)
    assert is_error, data
    assert data["error"] == kind, data
    assert isinstance(data["message"], str) and data["message"]
    return data


def reindex(conn: apsw.Connection) -> None:
    index_vault(conn, get_vault(conn, "sample"))


def visible_count(conn: apsw.Connection) -> int:
    return scalar(conn, "SELECT count(*) FROM notes WHERE hidden_at IS NULL")


# --- listing, schemas, annotations ------------------------------------------------------------------


async def test_read_tools_listed_with_schemas_and_annotations(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    assert names == READ_TOOLS  # in the registry's order (writes are off)
    by_name = {t.name: t for t in tools}
    for name in READ_TOOLS:
        tool = by_name[name]
        a = tool.annotations
        assert a is not None
        assert a.read_only_hint is True and a.open_world_hint is False and a.destructive_hint is False
        assert a.idempotent_hint is True and a.title
        assert tool.description and len(tool.description) > 40
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema and tool.output_schema["type"] == "object"
    assert by_name["kms_search"].input_schema["required"] == ["query"]
    assert by_name["kms_search"].input_schema["properties"]["limit"]["maximum"] == 50
    assert by_name["kms_inventory"].input_schema["properties"]["limit"]["maximum"] == 500
    assert by_name["kms_read"].input_schema["required"] == ["noteId"]


# --- kms_search ----------------------------------------------------------------------------------------


async def test_search_hits_contract_and_order(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        data = await ok(client, "kms_search", {"query": "kubernetes"})
        default = data["hits"]
        two = (await ok(client, "kms_search", {"query": "kubernetes", "limit": 2}))["hits"]
    assert data["query"] == "kubernetes" and data["relaxed"] is False
    assert 2 < len(default) <= 10
    for h in default:
        assert CARD_KEYS | {"excerpt", "score"} <= set(h)
        assert h["score"] > 0 and h["vault"] == "sample" and isinstance(h["tags"], list)
        assert h["path"].endswith(".md") and h["noteId"].startswith("n")
    scores = [h["score"] for h in default]
    assert scores == sorted(scores, reverse=True)
    assert default[0]["title"] in ("Kubernetes", "Kubernetes deploy checklist")
    assert any("**" in h["excerpt"] for h in default)
    assert two == default[:2]


async def test_common_word_scores_stay_positive(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        hits = (await ok(client, "kms_search", {"query": "the", "limit": 50}))["hits"]
    assert len(hits) > 10 and all(h["score"] > 0 for h in hits)


async def test_malformed_fts_is_invalid_input(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        for query in ('"unbalanced', "AND", "(x AND", "NEAR(", "title:", "*"):
            data = await err(client, "kms_search", {"query": query}, "invalid-input")
            assert "cannot parse the search query" in data["message"], query
            assert "exact phrase" in data["message"], query  # says what is valid


async def test_a_query_of_too_many_terms_is_invalid_input_saying_the_limit(
    indexed: apsw.Connection, db_path: Path
) -> None:
    """A 991-character ``a OR a OR ...`` kept kms_search busy for a minute (cli finding 7)."""
    from server.index.search import MAX_TERMS

    async with mcp_client(db_path) as client:
        data = await err(client, "kms_search", {"query": " OR ".join(["a"] * 199)}, "invalid-input")
        assert f"at most {MAX_TERMS}" in data["message"]
        hits = (await ok(client, "kms_search", {"query": " ".join(["kubernetes"] * 90)}))["hits"]
    assert hits  # a repeated plain word is counted once


async def test_punctuated_words_search_fine(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    write(vault_dir / "lang.md", "Notes on C++ templates and what's new; send an e-mail to the team.\n")
    reindex(indexed)
    nid = note_id(indexed, "lang")
    async with mcp_client(db_path) as client:
        for q in ("C++", "what's", "e-mail", "C++ templates", "what's new?"):
            hits = (await ok(client, "kms_search", {"query": q}))["hits"]
            assert nid in [h["noteId"] for h in hits], q


async def test_natural_language_punctuation_searches_as_words(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    """Only the real columns (title:, body:, tags:) filter; any other ``word:`` is text, so a question or
    a note-to-self never fails on its punctuation."""
    write(
        vault_dir / "standup.md",
        "# Standup\n\nMeeting at 10:30 about the login bug.\n\nTODO: fix login "
        "(urgent). What's new? Ask about deploys.\n",
    )
    reindex(indexed)
    nid = note_id(indexed, "standup")
    async with mcp_client(db_path) as client:
        for q in (
            "meeting at 10:30",
            "TODO: fix login",
            "what's new?",
            "TODO: fix login (urgent)",
            "foo: login",
            "10:30",
            "login: the bug",
        ):
            for tool in ("kms_search", "kms_semantic_search"):
                hits = (await ok(client, tool, {"query": q}))["hits"]
                assert nid in [h["noteId"] for h in hits], (tool, q)
        # the real columns still filter
        assert [h["noteId"] for h in (await ok(client, "kms_search", {"query": "title:standup"}))["hits"]] == [nid]
        assert nid not in [h["noteId"] for h in (await ok(client, "kms_search", {"query": "title:login"}))["hits"]]
        assert nid in [h["noteId"] for h in (await ok(client, "kms_search", {"query": "body:login"}))["hits"]]


async def test_relaxed_search_is_flagged(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        data = await ok(client, "kms_search", {"query": "shakshuka kubernetes"})
        strict = await ok(client, "kms_search", {"query": "kubernetes deploy"})
    assert data["relaxed"] is True and data["note"]
    assert {"Shakshuka"} <= {h["title"] for h in data["hits"]}
    assert strict["relaxed"] is False and strict.get("note") is None


async def test_empty_query_returns_no_hits(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        for q in ("", "   ", "!!! ???"):
            data = await ok(client, "kms_search", {"query": q})
            assert data["hits"] == [] and data["relaxed"] is False


# --- limits and input validation ------------------------------------------------------------------------

BAD_INPUTS: list[tuple[str, dict[str, Any]]] = [
    ("kms_search", {"query": "x", "limit": 0}),
    ("kms_search", {"query": "x", "limit": 51}),
    ("kms_search", {"query": "x", "limit": "5"}),
    ("kms_search", {"query": "x", "bogus": 1}),
    ("kms_search", {}),
    ("kms_search", {"query": "x" * 1001}),
    ("kms_list_recent", {"limit": 0}),
    ("kms_list_recent", {"limit": 51}),
    ("kms_get_backlinks", {"noteId": "n000000000000", "limit": 0}),
    ("kms_get_backlinks", {"noteId": "n000000000000", "limit": 51}),
    ("kms_get_backlinks", {}),
    ("kms_inventory", {"limit": 0}),
    ("kms_inventory", {"limit": 501}),
    ("kms_read", {}),
    ("kms_read", {"noteId": ""}),
    ("kms_read", {"noteId": 12}),
    ("kms_list_tags", {"vault": ""}),
]


async def test_out_of_bounds_input_is_invalid(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        for tool, args in BAD_INPUTS:
            data = await err(client, tool, args, "invalid-input")
            assert "Valid fields" in data["message"], (tool, args)  # the message lists the fields
        wrong_shape = encode_cursor(["list"])  # type: ignore[arg-type]  # a cursor of the wrong shape, on purpose
        for cursor in ("not-a-cursor", encode_cursor({"u": "x", "i": 1}), wrong_shape):
            data = await err(client, "kms_inventory", {"cursor": cursor}, "invalid-input")
            assert "cursor" in data["message"]
        nid = note_id(indexed, "Shakshuka")
        await err(client, "kms_read", {"noteId": nid, "cursor": "garbage"}, "invalid-input")
        await err(
            client,
            "kms_read",
            {"noteId": nid, "cursor": encode_cursor({"n": nid, "o": 10**9, "v": "x"})},
            "invalid-input",
        )


async def test_limit_bounds_are_inclusive(indexed: apsw.Connection, db_path: Path) -> None:
    target = note_id(indexed, "Login outage 2026-10")
    async with mcp_client(db_path) as client:
        assert len((await ok(client, "kms_search", {"query": "the", "limit": 1}))["hits"]) == 1
        assert len((await ok(client, "kms_search", {"query": "the", "limit": 50}))["hits"]) > 10
        assert len((await ok(client, "kms_list_recent", {"limit": 1}))["notes"]) == 1
        assert len((await ok(client, "kms_list_recent", {"limit": 50}))["notes"]) == visible_count(indexed)
        assert len((await ok(client, "kms_list_recent", {}))["notes"]) == 10
        assert len((await ok(client, "kms_get_backlinks", {"noteId": target, "limit": 1}))["backlinks"]) == 1
        many = (await ok(client, "kms_get_backlinks", {"noteId": target, "limit": 50}))["backlinks"]
        assert len(many) > 3
        assert len((await ok(client, "kms_inventory", {"limit": 500}))["notes"]) == visible_count(indexed)
        assert len((await ok(client, "kms_inventory", {"limit": 1}))["notes"]) == 1


async def test_unknown_ids_are_not_found(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        await err(client, "kms_read", {"noteId": "n000000000000"}, "not-found")
        await err(client, "kms_get_backlinks", {"noteId": "nope"}, "not-found")
        await err(client, "kms_search", {"query": "x", "vault": "no-such-vault"}, "not-found")


# --- kms_read --------------------------------------------------------------------------------------------


async def test_read_returns_the_note(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    body = "# Gist test\n\nA body with [[Kubernetes]] and #inline.\n"
    text = "---\ntags: [alpha, Beta]\nstatus: draft\n---\n" + summary.encode(body, "What this note says.")
    write(vault_dir / "gist.md", text)
    reindex(indexed)
    nid = note_id(indexed, "gist")
    async with mcp_client(db_path) as client:
        note = await ok(client, "kms_read", {"noteId": nid})
        flagged = await ok(client, "kms_read", {"noteId": note_id(indexed, "Daily template")})
    assert note["noteId"] == nid and note["title"] == "gist" and note["path"] == "gist.md"
    assert note["vault"] == "sample"
    assert unfence(note["body"]) == body and "kms:summary" not in note["body"]
    assert note["tags"] == ["alpha", "beta", "inline"]
    assert note["frontmatter"] == {"tags": ["alpha", "Beta"], "status": "draft"}
    assert note["summary"] == {"state": "fresh", "hash": summary.body_hash(body), "text": fence("What this note says.")}
    assert note["version"] == hashlib.sha256((vault_dir / "gist.md").read_bytes()).hexdigest()
    assert note["updatedAt"] == pytest.approx(os.stat(vault_dir / "gist.md").st_mtime, abs=1e-3)
    assert note["nextCursor"] is None and note["offset"] == 0 and note["bodyChars"] == len(body)
    assert [h["text"] for h in note["headings"]] == ["Gist test"]
    assert flagged["frontmatter"] is None and flagged["frontmatterError"].startswith("invalid YAML")
    assert flagged["summary"] is None


async def test_stale_summary_is_reported(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    write(vault_dir / "stale.md", summary.encode("old body\n", "Old gist") + "added later\n")
    reindex(indexed)
    async with mcp_client(db_path) as client:
        note = await ok(client, "kms_read", {"noteId": note_id(indexed, "stale")})
    assert note["summary"]["state"] == "stale" and unfence(note["summary"]["text"]) == "Old gist"
    assert unfence(note["body"]) == "old body\nadded later\n"


async def test_long_body_is_read_in_pages(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    # multi-byte characters and characters JSON escapes, so pages must be sized by their encoded length
    line = 'Ünïcödé ☕ "quoted" back\\slash\ttab — line {i}\n'
    body = "# Big\n\n" + "".join(line.replace("{i}", str(i)) for i in range(6000)) + "THE END\n"
    assert len(body.encode()) > 2 * PAYLOAD_CAP_BYTES
    write(vault_dir / "big.md", body)
    reindex(indexed)
    nid = note_id(indexed, "big")
    pages: list[str] = []
    cursor = first_cursor = None
    async with mcp_client(db_path) as client:
        while True:
            args = {"noteId": nid, **({"cursor": cursor} if cursor else {})}
            result = await client.call_tool("kms_read", args)
            data = result.structured_content
            assert not result.is_error and not data.get("truncated"), data
            assert len(cast("TextContent", result.content[0]).text.encode()) <= PAYLOAD_CAP_BYTES
            assert data["offset"] == sum(len(p) for p in pages) and data["bodyChars"] == len(body)
            pages.append(unfence(data["body"]))
            cursor = data["nextCursor"]
            if cursor is None:
                break
            first_cursor = first_cursor or cursor
        assert len(pages) >= 3
        assert "".join(pages) == body
        # a cursor of another note is refused; a changed note is a conflict
        other = note_id(indexed, "Kubernetes")
        await err(client, "kms_read", {"noteId": other, "cursor": first_cursor}, "invalid-input")
        write(vault_dir / "big.md", body + "more\n")
        reindex(indexed)
        data = await err(client, "kms_read", {"noteId": nid, "cursor": first_cursor}, "conflict")
        assert data["version"] == hashlib.sha256((vault_dir / "big.md").read_bytes()).hexdigest()


async def test_many_headings_still_readable(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    body = "".join(f"## Section number {i} of a very long log\n\nentry {i}\n\n" for i in range(5000))
    write(vault_dir / "log.md", body)
    reindex(indexed)
    nid = note_id(indexed, "log")
    pages = []
    cursor = None
    async with mcp_client(db_path) as client:
        while True:
            data = await ok(client, "kms_read", {"noteId": nid, **({"cursor": cursor} if cursor else {})})
            assert not data.get("truncated"), "a note with many headings must still be readable"
            assert data["headings"][0]["text"] == "Section number 0 of a very long log"
            assert data.get("headingsTruncated") is True
            pages.append(unfence(data["body"]))
            cursor = data["nextCursor"]
            if not cursor:
                break
    assert "".join(pages) == body


# --- listings --------------------------------------------------------------------------------------------


async def test_list_tags_order_and_counts(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        tags = (await ok(client, "kms_list_tags"))["tags"]
        again = (await ok(client, "kms_list_tags"))["tags"]
    assert tags == again
    expected = rows(
        indexed,
        "SELECT tag, count(*) AS count FROM note_tags t JOIN notes n ON n.rid = t.rid"
        " WHERE n.hidden_at IS NULL GROUP BY tag",
    )
    assert sorted(tags, key=lambda t: t["tag"]) == sorted(expected, key=lambda t: t["tag"])
    keys = [(-t["count"], t["tag"]) for t in tags]
    assert keys == sorted(keys)
    assert all(t["tag"] == t["tag"].lower() and not t["tag"].startswith("#") for t in tags)


async def test_list_recent_order_with_ties(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    same = 2_000_000_000_000_000_000  # ns: in the future, so these are the newest
    for name in ("tie c", "tie a", "tie b"):
        p = write(vault_dir / f"{name}.md", name)
        os.utime(p, ns=(same, same))
    reindex(indexed)
    async with mcp_client(db_path) as client:
        notes = (await ok(client, "kms_list_recent", {"limit": 50}))["notes"]
        again = (await ok(client, "kms_list_recent", {"limit": 50}))["notes"]
    assert notes == again
    assert all(set(n) == CARD_KEYS | {"lastChangedBy"} for n in notes)
    keys = [(-n["updatedAt"], n["path"], n["noteId"]) for n in notes]  # ties: by path, never by random id
    assert keys == sorted(keys)
    top = notes[:3]
    assert {n["title"] for n in top} == {"tie a", "tie b", "tie c"}
    assert [n["path"] for n in top] == ["tie a.md", "tie b.md", "tie c.md"]  # every run, whatever the ids


async def test_backlinks_contract(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    write(vault_dir / "self.md", "I link to [[self]] and [[Shakshuka]].")
    write(vault_dir / "fm.md", "---\nrelated: '[[Shakshuka]]'\n---\nno body link")
    reindex(indexed)
    target = note_id(indexed, "Shakshuka")
    async with mcp_client(db_path) as client:
        data = await ok(client, "kms_get_backlinks", {"noteId": target})
        mine = await ok(client, "kms_get_backlinks", {"noteId": note_id(indexed, "self")})
    assert data["noteId"] == target
    sources = {b["title"]: b for b in data["backlinks"]}
    expected = {
        r["title"]
        for r in rows(
            indexed,
            """SELECT DISTINCT s.title FROM links l JOIN notes s
                ON s.rid = l.src_rid JOIN notes d ON d.rid = l.dst_rid WHERE d.id = ? AND s.rid != d.rid""",
            (target,),
        )
    }
    assert set(sources) == expected and {"self", "fm"} <= expected
    assert "[[Shakshuka]]" in sources["self"]["snippet"]
    assert sources["fm"]["inFrontmatter"] is True and sources["self"]["inFrontmatter"] is False
    for b in data["backlinks"]:
        assert CARD_KEYS | {"snippet", "linkCount", "inFrontmatter"} <= set(b) and b["linkCount"] >= 1
    keys = [(-b["updatedAt"], b["noteId"]) for b in data["backlinks"]]
    assert keys == sorted(keys)
    assert mine["backlinks"] == []  # a self-link is not a backlink


async def test_inventory_pages_through_everything(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    same = 1_700_000_000_123_456_789  # several notes with one mtime: page boundaries fall inside the tie
    for i in range(9):
        os.utime(write(vault_dir / "ties" / f"tie {i}.md", f"tie {i}"), ns=(same, same))
    reindex(indexed)
    seen: list[dict] = []
    cursor = None
    async with mcp_client(db_path) as client:
        while True:
            page = await ok(client, "kms_inventory", {"limit": 4, **({"cursor": cursor} if cursor else {})})
            assert len(page["notes"]) <= 4
            seen += page["notes"]
            cursor = page["nextCursor"]
            if cursor is None:
                break
        whole = (await ok(client, "kms_inventory", {"limit": 500}))["notes"]
    assert seen == whole
    assert len({n["noteId"] for n in seen}) == len(seen) == visible_count(indexed)
    assert sum(1 for n in seen if n["title"].startswith("tie ")) == 9
    keys = [(-n["updatedAt"], n["path"], n["noteId"]) for n in seen]
    assert keys == sorted(keys)
    for n in seen:
        assert CARD_KEYS | {"summary", "tokenEstimate", "sizeBytes"} <= set(n) and "body" not in n
        assert n["summary"]["state"] in ("none", "fresh", "stale")


async def test_inventory_pages_with_long_summaries_stop_early_and_go_on(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    gist = "A long summary sentence that takes room in the inventory listing. " * 20
    for i in range(150):
        write(vault_dir / "bulk" / f"bulk {i:03}.md", summary.encode(f"body {i}\n", gist))
    write(vault_dir / "bulk" / "huge.md", summary.encode("body\n", "An enormous summary. " * 8000))
    reindex(indexed)
    async with mcp_client(db_path) as client:
        first = await ok(client, "kms_inventory", {"limit": 20})
        assert len(first["notes"]) == 20 and first["nextCursor"]
        big = await ok(client, "kms_inventory", {"limit": 500, "cursor": first["nextCursor"]})
        assert "truncated" not in big and 20 < len(big["notes"]) < 150 and big["nextCursor"]
        assert not {n["noteId"] for n in big["notes"]} & {n["noteId"] for n in first["notes"]}
        walked, cursor = [n["noteId"] for n in first["notes"] + big["notes"]], big["nextCursor"]
        while cursor:
            page = await ok(client, "kms_inventory", {"limit": 500, "cursor": cursor})
            walked += [n["noteId"] for n in page["notes"]]
            cursor = page["nextCursor"]
        assert len(walked) == len(set(walked)) == visible_count(indexed)
        huge = [n for n in (await ok(client, "kms_inventory", {"limit": 500}))["notes"] if n["path"] == "bulk/huge.md"]
        assert huge and huge[0]["summary"]["clipped"] is True and len(unfence(huge[0]["summary"]["text"])) <= 2_001


# --- hidden notes never reach an agent -------------------------------------------------------------------


async def test_hidden_note_is_absent_from_every_tool(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    write(vault_dir / "secret.md", "---\ntags: [onlysecret]\n---\nThe quokka plan. [[Shakshuka]] [[visible]]")
    write(vault_dir / "visible.md", "quokka mention, links to [[secret]]")
    reindex(indexed)
    sid, vid = note_id(indexed, "secret"), note_id(indexed, "visible")
    shak = note_id(indexed, "Shakshuka")
    async with mcp_client(db_path) as client:
        assert sid in [h["noteId"] for h in (await ok(client, "kms_search", {"query": "quokka"}))["hits"]]
        assert {"tag": "onlysecret", "count": 1} in (await ok(client, "kms_list_tags"))["tags"]
    set_hidden(indexed, sid, True)
    async with mcp_client(db_path) as client:
        hits = (await ok(client, "kms_search", {"query": "quokka", "limit": 50}))["hits"]
        assert [h["noteId"] for h in hits] == [vid]
        await err(client, "kms_read", {"noteId": sid}, "not-found")
        assert "onlysecret" not in {t["tag"] for t in (await ok(client, "kms_list_tags"))["tags"]}
        recent = (await ok(client, "kms_list_recent", {"limit": 50}))["notes"]
        assert sid not in {n["noteId"] for n in recent} and vid in {n["noteId"] for n in recent}
        await err(client, "kms_get_backlinks", {"noteId": sid}, "not-found")
        assert sid not in {b["noteId"] for b in (await ok(client, "kms_get_backlinks", {"noteId": shak}))["backlinks"]}
        assert sid not in {b["noteId"] for b in (await ok(client, "kms_get_backlinks", {"noteId": vid}))["backlinks"]}
        inventory = (await ok(client, "kms_inventory", {"limit": 500}))["notes"]
        assert sid not in {n["noteId"] for n in inventory} and len(inventory) == visible_count(indexed)
        await ok(client, "kms_read", {"noteId": vid})
        client.runner.session.reads.flush()
        session = client.runner.config.session_id
    read = {r[0] for r in indexed.execute("SELECT note_id FROM note_reads WHERE session_id = ?", (session,))}
    assert read == {vid}, "only the note read is a read: never the hidden one, nor a search's hits"
    # hidden survives a full reindex, and unhiding brings it back
    index_vault(indexed, get_vault(indexed, "sample"), full=True)
    async with mcp_client(db_path) as client:
        await err(client, "kms_read", {"noteId": sid}, "not-found")
    set_hidden(indexed, sid, False)
    async with mcp_client(db_path) as client:
        assert (await ok(client, "kms_read", {"noteId": sid}))["noteId"] == sid


# --- gates and empty states ------------------------------------------------------------------------------

ARGS = {s.name: example(s) for s in specs("read")}  # each read tool's own example (its spec)


@pytest.mark.parametrize("flags", [{"enabled": False}, {"read_enabled": False}])
async def test_disabled_gate_answers_feature_disabled(indexed: apsw.Connection, db_path: Path, flags: dict) -> None:
    async with mcp_client(db_path, **flags) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert set(READ_TOOLS) <= names  # listed, so the agent learns why they do not work
        for name in READ_TOOLS:
            data = await err(client, name, ARGS[name], "feature-disabled")
            assert "kms config set" in data["message"]


async def test_no_vault_and_empty_index_say_what_to_run(db_path: Path, tmp_path: Path) -> None:
    from server.store.db import connect

    # agent tools default to on only once a vault is registered: either way the message says what to run
    async with mcp_client(db_path) as client:
        for name in READ_TOOLS:
            data, is_error = await call(client, name, ARGS[name])
            assert is_error and data["error"] in ("feature-disabled", "no-index"), data
            assert "kms vault add" in data["message"], name
    async with mcp_client(db_path, enabled=True, read_enabled=True) as client:
        for name in READ_TOOLS:
            if name == "kms_search":
                continue  # an empty query never needs the index; a real one does
            data = await err(client, name, ARGS[name], "no-index")
            assert "kms vault add" in data["message"], name
        data = await err(client, "kms_search", {"query": "anything"}, "no-index")
        assert "kms vault add" in data["message"]
    conn = connect(db_path)
    (tmp_path / "empty").mkdir()
    add_vault(conn, tmp_path / "empty", "empty")
    async with mcp_client(db_path) as client:
        data = await err(client, "kms_list_recent", {}, "no-index")
        assert "kms index" in data["message"]
    conn.close()


# --- read tracking, vault scoping -----------------------------------------------------------------------


async def test_reads_are_tracked_per_session(indexed: apsw.Connection, db_path: Path) -> None:
    nid = note_id(indexed, "Shakshuka")
    async with mcp_client(db_path) as client:
        session = client.runner.config.session_id
        await ok(client, "kms_read", {"noteId": nid})
        await ok(client, "kms_read", {"noteId": nid})
        hits = (await ok(client, "kms_search", {"query": "kubernetes", "limit": 3}))["hits"]
        await ok(client, "kms_get_backlinks", {"noteId": nid})
        await ok(client, "kms_list_tags")
        await ok(client, "kms_inventory", {"limit": 5})
        client.runner.session.reads.flush()
        reads = {r["note_id"]: r for r in rows(indexed, "SELECT * FROM note_reads WHERE session_id = ?", (session,))}
        searches = [(s["tool"], s["query"]) for s in session_material.searches(indexed, session)]
    assert reads[nid]["count"] == 2 and reads[nid]["last_at"] >= reads[nid]["first_at"] > 0
    assert hits and set(reads) == {nid}, "search hits, backlinks, tags and the inventory are not reads (issue 32)"
    assert searches == [("kms_search", "kubernetes")]


async def test_results_name_their_vault_and_vault_scopes(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    other = tmp_path / "work"
    write(other / "Kubernetes at work.md", "---\ntags: [worktag]\n---\nkubernetes cluster notes [[Kubernetes]]")
    index_vault(indexed, add_vault(indexed, other, "work"))
    async with mcp_client(db_path) as client:
        both = (await ok(client, "kms_search", {"query": "kubernetes", "limit": 50}))["hits"]
        work = (await ok(client, "kms_search", {"query": "kubernetes", "vault": "work"}))["hits"]
        recent = (await ok(client, "kms_list_recent", {"vault": "work"}))["notes"]
        tags = (await ok(client, "kms_list_tags", {"vault": "work"}))["tags"]
        inv = (await ok(client, "kms_inventory", {"vault": "sample", "limit": 500}))["notes"]
    assert {h["vault"] for h in both} == {"sample", "work"}
    assert [h["title"] for h in work] == ["Kubernetes at work"] and work[0]["vault"] == "work"
    assert [n["title"] for n in recent] == ["Kubernetes at work"]
    assert tags == [{"tag": "worktag", "count": 1}]
    assert {n["vault"] for n in inv} == {"sample"} and len(inv) == visible_count(indexed) - 1


async def test_registry_read_tools_are_the_ones_tested() -> None:
    assert set(ARGS) == set(READ_TOOLS)  # every read tool's example, so every gate test calls it
    assert encode_cursor({"t": "kms_inventory", "o": 0})  # the restart cursor the cap hands out
