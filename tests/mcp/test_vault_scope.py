"""A session scoped to one vault never sees another: every read tool, through the real MCP server and client.

Two vaults in one database share words, tags, titles and links, so an unscoped session sees both
(checked first: the scoped answers could not fail otherwise), and a session scoped to ``a`` sees ``a`` only.
Every read tool of the registry (a new one included) is also aimed at vault ``b`` from its spec's example.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest
from support.examples import aimed, example, specs
from support.mcp_session import mcp_client
from support.privacy import answer_text
from support.vaults import write

from server.index.indexer import index_vault
from server.mcp.tools import tool_names
from server.vault.registry import add_vault


@pytest.fixture
def two_vaults(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    a, b = tmp_path / "vault-a", tmp_path / "vault-b"
    write(a / "Alpha.md", "# Alpha\n\nThe lighthouse keeper's log. See [[Common]].\n\n#shared #only-a\n")
    write(a / "Common.md", "# Common\n\nA lighthouse on the cliff.\n\n#shared\n")
    write(
        b / "Beta.md",
        "# Beta\n\nAnother lighthouse, linked to [[dendron://a/Alpha]] and [[Common]].\n\n#shared #only-b\n",
    )
    write(b / "Common.md", "# Common\n\nThe lighthouse of vault b.\n\n#shared\n")
    write(b / "Gamma.md", "# Gamma\n\nLighthouse lighthouse lighthouse.\n\n#only-b\n")
    for root, name in ((a, "a"), (b, "b")):
        index_vault(conn, add_vault(conn, root, name))
    return conn


def ids(conn: apsw.Connection) -> dict[tuple[str, str], str]:
    found = conn.execute("SELECT v.name, n.title, n.id FROM notes n JOIN vaults v ON v.id = n.vault_id")
    return {(vault, title): note for vault, title, note in found}


async def call(client: Any, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    result = await client.call_tool(name, args)
    return result.structured_content, bool(result.is_error)


def vaults_of(cards: list[dict[str, Any]]) -> set[str]:
    return {c["vault"] for c in cards}


async def test_unscoped_session_sees_both_vaults(two_vaults: apsw.Connection, db_path: Path) -> None:
    note = ids(two_vaults)
    async with mcp_client(db_path) as client:
        hits = (await call(client, "kms_search", {"query": "lighthouse", "limit": 50}))[0]["hits"]
        assert vaults_of(hits) == {"a", "b"}
        assert vaults_of((await call(client, "kms_list_recent", {"limit": 50}))[0]["notes"]) == {"a", "b"}
        assert vaults_of((await call(client, "kms_inventory", {}))[0]["notes"]) == {"a", "b"}
        tags = {t["tag"]: t["count"] for t in (await call(client, "kms_list_tags", {}))[0]["tags"]}
        assert tags["shared"] == 4 and "only-b" in tags
        backlinks = (await call(client, "kms_get_backlinks", {"noteId": note["a", "Alpha"]}))[0]["backlinks"]
        assert vaults_of(backlinks) == {"b"}, "Beta (vault b) links to Alpha (vault a) explicitly"
        data, is_error = await call(client, "kms_read", {"noteId": note["b", "Beta"]})
        assert not is_error and data["vault"] == "b"
        assert {link["noteId"] for link in data["links"]} >= {note["a", "Alpha"]}  # across vaults, unscoped
        recalled = (await call(client, "kms_recall", {"topic": "lighthouse", "budgetTokens": 20000}))[0]
        assert vaults_of(recalled["items"]) == {"a", "b"}
        data, is_error = await call(client, "kms_search", {"query": "lighthouse", "vault": "b"})
        assert not is_error and vaults_of(data["hits"]) == {"b"}


async def test_scoped_session_sees_only_its_vault(two_vaults: apsw.Connection, db_path: Path) -> None:
    note = ids(two_vaults)
    async with mcp_client(db_path, vault="a") as client:
        for args in ({"query": "lighthouse", "limit": 50}, {"query": "lighthouse OR beta OR gamma", "limit": 50}):
            data, is_error = await call(client, "kms_search", args)
            assert not is_error and data["hits"] and vaults_of(data["hits"]) == {"a"}
        assert (await call(client, "kms_search", {"query": "gamma"}))[0]["hits"] == []
        assert vaults_of((await call(client, "kms_list_recent", {"limit": 50}))[0]["notes"]) == {"a"}
        inventory = (await call(client, "kms_inventory", {"limit": 500}))[0]
        assert {n["title"] for n in inventory["notes"]} == {"Alpha", "Common"} and not inventory["nextCursor"]
        tags = {t["tag"]: t["count"] for t in (await call(client, "kms_list_tags", {}))[0]["tags"]}
        assert tags == {"shared": 2, "only-a": 1}

        backlinks = (await call(client, "kms_get_backlinks", {"noteId": note["a", "Common"]}))[0]["backlinks"]
        assert [b["title"] for b in backlinks] == ["Alpha"], "Beta (vault b) links to Common too: not shown"
        assert (await call(client, "kms_get_backlinks", {"noteId": note["a", "Alpha"]}))[0]["backlinks"] == []

        data, is_error = await call(client, "kms_read", {"noteId": note["a", "Alpha"]})
        assert not is_error and data["vault"] == "a"
        assert data["links"] == [{"noteId": note["a", "Common"], "title": "Common", "path": "Common.md"}]
        recalled, is_error = await call(client, "kms_recall", {"topic": "lighthouse", "budgetTokens": 20000})
        assert not is_error and recalled["items"] and vaults_of(recalled["items"]) == {"a"}
        by_name, is_error = await call(client, "kms_read", {"noteId": "Alpha"})
        assert not is_error and by_name["noteId"] == note["a", "Alpha"]
        for name in ("Beta", "Gamma.md", "b:Beta.md"):
            data, is_error = await call(client, "kms_read", {"noteId": name})
            assert is_error and data["error"] == "not-found" and "Beta" not in str(data.get("suggestions")), name
        absent, _ = await call(client, "kms_read", {"noteId": "n000000000000"})
        for tool in ("kms_read", "kms_get_backlinks"):
            data, is_error = await call(client, tool, {"noteId": note["b", "Beta"]})
            assert is_error and data["error"] == absent["error"] == "not-found", (tool, data)
            said, never = (m["message"].split("; did you mean")[0] for m in (data, absent))  # close in-scope
            assert said == never.replace("n000000000000", note["b", "Beta"])  # names follow the id's text, by chance
            assert "Beta" not in data["message"], data


# vault b's own words: its notes' ids are added per test (the titles, tags and paths only it has)
B_ONLY = ("Beta", "Gamma", "only-b", "vault-b")


async def test_every_read_tool_aimed_at_another_vault_answers_nothing_of_it(
    two_vaults: apsw.Connection, db_path: Path
) -> None:
    """Each read tool of the registry, with nothing written for it here: its example as is, then each of its
    string arguments set to each name of vault b's notes (ids, titles, paths, ``b:`` paths, its tag, its vault
    name), in a session scoped to ``a``. A new read tool that crosses the scope fails here until it does not."""
    note = ids(two_vaults)
    b_ids = [nid for (vault, _title), nid in note.items() if vault == "b"]
    names = [*b_ids, "Beta", "Gamma.md", "b:Beta.md", "b:Common.md", "only-b", "b", "lighthouse"]
    crossed: list[tuple[str, dict[str, Any], list[str]]] = []
    called: set[str] = set()
    async with mcp_client(db_path, vault="a") as client:
        for spec in specs("read"):
            for args in aimed(spec, names):
                result = await client.call_tool(spec.name, args)
                called.add(spec.name)
                text = answer_text(result)
                for asked in sorted(_strings(args), key=len, reverse=True):  # the agent's own words, echoed
                    text = text.replace(asked, "")
                if seen := [w for w in (*B_ONLY, *b_ids, '"vault": "b"') if w in text]:
                    crossed.append((spec.name, args, seen))
    assert called == set(tool_names("read"))
    assert crossed == []


def _strings(args: dict[str, Any]) -> list[str]:
    return [v for v in args.values() if isinstance(v, str) and v]


@pytest.mark.parametrize("tool", [s.name for s in specs("read") if "vault" in s.input_model.model_fields])
async def test_a_vault_argument_outside_the_scope_is_refused(
    two_vaults: apsw.Connection, db_path: Path, tool: str
) -> None:
    args = example(next(s for s in specs("read") if s.name == tool))  # the tool's own example
    async with mcp_client(db_path, vault="a") as client:
        data, is_error = await call(client, tool, {**args, "vault": "a"})
        assert not is_error, data
        refusals = []
        for other in ("b", "no-such-vault"):
            data, is_error = await call(client, tool, {**args, "vault": other})
            assert is_error and data["error"] == "invalid-input", data
            assert "scoped to vault 'a'" in data["message"]
            refusals.append(data["message"].replace(other, "X"))
        assert refusals[0] == refusals[1], "the refusal does not tell whether the other vault exists"


async def test_semantic_search_is_scoped(two_vaults: apsw.Connection, db_path: Path, embed_model_dir: Path) -> None:
    from server.index.embed import embed_pending

    embed_pending(two_vaults, model_dir=embed_model_dir)
    for vault, seen in ((None, {"a", "b"}), ("a", {"a"})):
        async with mcp_client(db_path, vault=vault, embed_model_dir=str(embed_model_dir)) as client:
            semantic = client.runner.services.semantic
            assert semantic is not None
            semantic.embedder.load()
            semantic.index.refresh(two_vaults)
            for mode in ("semantic", "hybrid"):
                data, is_error = await call(
                    client,
                    "kms_semantic_search",
                    {"query": "a tower with a light by the sea", "mode": mode, "limit": 50},
                )
                assert not is_error and data["mode"] == mode, data
                assert vaults_of(data["hits"]) == seen, (vault, mode)
