"""A token that reaches two vaults of three, through the real service and the SDK's real HTTP client: every
read tool, the resources and a prompt, and the writes see vaults ``a`` and ``b`` only; vault ``c`` is as if
absent (not found, never counted, never suggested) and every write to it is refused.

Vault ``c`` shares words, tags, a folder name and a link with the other two and carries a canary word of
its own, so a token that reaches every vault sees it (checked first: the scoped answers could not fail
otherwise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import mcp_client
from support.vaults import write
from test_service_http import MODES, call, client, running, token, two_vaults  # noqa: F401 - fixtures

from server.index.indexer import index_vault
from server.mcp import service
from server.vault.registry import add_vault, get_vault

CANARY = "zebracanary"


@pytest.fixture
def three_vaults(two_vaults: apsw.Connection, tmp_path: Path) -> apsw.Connection:  # noqa: F811 - a fixture
    """``two_vaults`` (a: Alpha, b: Beta) and a third, ``c``, that looks like them and links into ``a``."""
    a, b, c = tmp_path / "vault-a", tmp_path / "vault-b", tmp_path / "vault-c"
    write(a / "shared" / "Hub.md", "---\nstatus: draft\n---\n# Hub\n\nA lighthouse hub. See [[Alpha]].\n\n#shared\n")
    write(b / "shared" / "Common.md", "---\nstatus: done\n---\n# Common\n\nThe lighthouse of b.\n\n#shared\n")
    write(
        c / "shared" / "Gamma.md",
        f"---\nstatus: {CANARY}\n{CANARY}-key: 1\n---\n# Gamma\n\n"
        f"Lighthouse {CANARY}, linked to [[dendron://a/Alpha]].\n\n#shared #{CANARY}\n",
    )
    write(c / f"{CANARY}-folder" / "Delta.md", f"# Delta\n\nA lighthouse in the {CANARY} folder.\n")
    index_vault(two_vaults, get_vault(two_vaults, "a"))
    index_vault(two_vaults, get_vault(two_vaults, "b"))
    index_vault(two_vaults, add_vault(two_vaults, c, "c"))
    return two_vaults


def note(conn: apsw.Connection, title: str) -> str:
    return str(conn.execute("SELECT id FROM notes WHERE title = ?", (title,)).fetchall()[0][0])


def vaults_of(cards: list[dict[str, Any]]) -> set[str]:
    return {c["vault"] for c in cards}


async def test_a_token_for_every_vault_sees_the_third(
    three_vaults: apsw.Connection,
    running: service.ServiceState,  # noqa: F811 - the fixture imported above
) -> None:
    _t, secret = token(three_vaults, "tier:read")
    async with client(running, secret) as every:
        assert vaults_of((await call(every, "kms_search", {"query": "lighthouse", "limit": 50}))["hits"]) == {
            "a",
            "b",
            "c",
        }
        assert (await call(every, "kms_search", {"query": CANARY}))["hits"]
        backlinks = (await call(every, "kms_get_backlinks", {"noteId": note(three_vaults, "Alpha")}))["backlinks"]
        assert "Gamma" in {b["title"] for b in backlinks}
        assert CANARY in json.dumps(await call(every, "kms_list_tags", {}))
        start = await call(every, "kms_start", {})
        assert CANARY in json.dumps(start)
        assert {n["title"]: n["backlinks"] for n in start["map"]["mostLinked"]}["Alpha"] == 2


@pytest.mark.parametrize("mode", MODES)
async def test_a_token_for_two_vaults_never_sees_the_third(
    three_vaults: apsw.Connection,
    running: service.ServiceState,  # noqa: F811 - the fixture imported above
    tmp_path: Path,
    mode: str,
) -> None:
    gamma, alpha = note(three_vaults, "Gamma"), note(three_vaults, "Alpha")
    _t, secret = token(three_vaults, "tier:write vault:a vault:b")
    seen: list[Any] = []  # every answer, checked for the canary at the end
    async with client(running, secret, mode) as c:

        async def ask(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            answer = await call(c, tool, args)
            if CANARY not in json.dumps(args):  # an answer may echo what it was asked
                seen.append(answer)
            return answer

        # search, by words and by meaning (keyword-only here: the service has no model), and recall
        for tool in ("kms_search", "kms_semantic_search"):
            found = await ask(tool, {"query": "lighthouse", "limit": 50})
            assert not found["_error"] and vaults_of(found["hits"]) == {"a", "b"}, found
            assert (await ask(tool, {"query": CANARY}))["hits"] == []
            only_b = await ask(tool, {"query": "lighthouse", "vault": "b"})
            assert vaults_of(only_b["hits"]) == {"b"}
        recalled = await ask("kms_recall", {"topic": "lighthouse", "budgetTokens": 20000})
        assert recalled["items"] and vaults_of(recalled["items"]) <= {"a", "b"}

        # a vault argument outside the scope: refused in the same words whether it exists or not
        refusals = []
        for tool, args in (
            ("kms_search", {"query": "lighthouse"}),
            ("kms_semantic_search", {"query": "lighthouse"}),
            ("kms_recall", {"topic": "lighthouse"}),
            ("kms_list_tags", {}),
            ("kms_list_properties", {}),
            ("kms_list_recent", {}),
            ("kms_inventory", {}),
            ("kms_list_folder", {}),
            ("kms_reindex", {}),
        ):
            for other in ("c", "no-such-vault"):
                data = await ask(tool, {**args, "vault": other})
                assert data["_error"] and data["error"] == "invalid-input", (tool, data)
                assert "scoped to vaults 'a', 'b'" in data["message"]
                refusals.append(data["message"].replace(repr(other), "X"))
        assert len(set(refusals[0::2]) | set(refusals[1::2])) == 1

        # a note of c: not found by id, vault:path, path or title, as a note that never was
        absent = await ask("kms_read", {"noteId": "n000000000000"})
        for tool in ("kms_read", "kms_get_backlinks", "kms_history"):
            data = await ask(tool, {"noteId": gamma})
            assert data["error"] == absent["error"] == "not-found", (tool, data)
            said, never = (m["message"].split("; did you mean")[0] for m in (data, absent))  # close in-scope
            assert said == never.replace("n000000000000", gamma)  # names follow the text of the id, by chance
            assert "Gamma" not in data["message"] and "Delta" not in data["message"], data
        for name in ("Gamma", "c:shared/Gamma.md", "shared/Gamma.md", "Delta"):
            data = await ask("kms_read", {"noteId": name})
            assert data["error"] == "not-found", (name, data)
        read = await ask("kms_read", {"noteId": alpha})
        assert not read["_error"] and read["vault"] == "a"

        # listings and counts: the two vaults' notes, tags, folders and properties only
        assert vaults_of((await ask("kms_list_recent", {"limit": 50}))["notes"]) == {"a", "b"}
        assert vaults_of((await ask("kms_inventory", {"limit": 500}))["notes"]) == {"a", "b"}
        tags = {t["tag"]: t["count"] for t in (await ask("kms_list_tags", {}))["tags"]}
        assert tags == {"shared": 2}
        keys = {p["key"]: p for p in (await ask("kms_list_properties", {}))["properties"]}
        assert set(keys) == {"status"} and keys["status"]["notes"] == 2
        root = await ask("kms_list_folder", {})
        assert vaults_of(root["folders"]) == {"a", "b"} and vaults_of(root["notes"]) == {"a", "b"}
        shared = await ask("kms_list_folder", {"path": "shared"})
        assert {n["title"] for n in shared["notes"]} == {"Hub", "Common"}
        hidden_folder = await ask("kms_list_folder", {"path": f"{CANARY}-folder"})
        assert hidden_folder["error"] == "not-found"
        backlinks = (await ask("kms_get_backlinks", {"noteId": alpha}))["backlinks"]
        assert [b["title"] for b in backlinks] == ["Hub"], "Gamma (vault c) links to Alpha too: not shown"
        status = await ask("kms_status", {})
        assert {v["name"] for v in status["vaults"]} == {"a", "b"} and status["counts"]["notes"] == 4
        start = await ask("kms_start", {})
        assert not start["_error"] and start["session"]["vaultScope"] == ["a", "b"]
        assert {v["name"] for v in start["vaults"]} == {"a", "b"}
        hubs = {n["title"]: n["backlinks"] for n in start["map"]["mostLinked"]}
        assert hubs == {"Alpha": 1}, "Gamma's link (vault c) to Alpha is not counted"
        assert {t["tag"]: t["count"] for t in start["map"]["tags"]} == {"shared": 2}

        # resources and prompts
        listed = (await c.list_resources()).resources
        assert listed and {str(r.uri).split("/")[2] for r in listed} == {"a", "b"}
        with pytest.raises(Exception, match="no note"):  # noqa: B017 - the SDK raises the resource error
            await c.read_resource("kms://c/shared/Gamma.md")
        seen.append((await c.get_prompt("start", {})).model_dump())

        # writes: to c refused, to a vault of the scope made; no name of c in any refusal
        assert (await ask("kms_create", {"title": "Out", "vault": "c"}))["error"] == "invalid-input"
        unnamed = await ask("kms_create", {"title": "Where"})
        assert unnamed["error"] == "invalid-input" and unnamed["vaults"] == ["a", "b"], unnamed
        assert (await ask("kms_append", {"noteId": gamma, "content": "x"}))["error"] == "not-found"
        assert (await ask("kms_append", {"noteId": "c:shared/Gamma.md", "content": "x"}))["error"] == "not-found"
        linked = await ask("kms_link", {"noteId": alpha, "target": "c:Gamma"})
        assert linked["error"] == "invalid-input", linked
        made = await ask("kms_create", {"title": "Made in b", "vault": "b"})
        assert not made["_error"] and made["vault"] == "b", made
    assert len(seen) > 40 and CANARY not in json.dumps(seen, default=str)
    assert not (tmp_path / "vault-c" / "Out.md").exists()


async def test_semantic_search_by_meaning_sees_two_vaults_of_three(
    three_vaults: apsw.Connection, db_path: Path, embed_model_dir: Path
) -> None:
    """The vector mask: a session of two vaults (as a token of two narrows it) ranks embeddings of those only."""
    from server.index.embed import embed_pending

    embed_pending(three_vaults, model_dir=embed_model_dir)
    scopes: list[tuple[tuple[str, ...], set[str]]] = [((), {"a", "b", "c"}), (("a", "c"), {"a", "c"})]
    for scope, seen in scopes:
        async with mcp_client(db_path, embed_model_dir=str(embed_model_dir), token_vaults=scope) as c:
            semantic = c.runner.services.semantic
            assert semantic is not None
            semantic.embedder.load()
            semantic.index.refresh(three_vaults)
            for mode in ("semantic", "hybrid"):
                result = await c.call_tool(
                    "kms_semantic_search", {"query": "a tower with a light by the sea", "mode": mode, "limit": 50}
                )
                data = result.structured_content
                assert not result.is_error and data["mode"] == mode, data
                assert vaults_of(data["hits"]) == seen, (scope, mode)
