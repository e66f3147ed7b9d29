"""kms_remember through the real server and client (issue 14, part A): memory notes, search before write,
the memory folder as its own allowlist entry, the guard (gate, rate limit, one provenance row, revert)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import mcp_client
from support.vaults import note_id, write

from server.activity.provenance import list_invocations
from server.index.indexer import index_vault
from server.index.memory import normalized, parse_facts
from server.index.note_data import fence
from server.vault.registry import get_vault

ITEM = re.compile(r"^- \d{4}-\d{2}-\d{2}: ")


async def call(client: Any, name: str, args: dict | None = None) -> tuple[dict, bool]:
    result = await client.call_tool(name, args or {})
    return result.structured_content, bool(result.is_error)


async def ok(client: Any, name: str, args: dict | None = None) -> dict:
    data, is_error = await call(client, name, args)
    assert not is_error and "error" not in data, data
    return data


async def err(client: Any, name: str, args: dict | None, kind: str) -> dict:
    data, is_error = await call(client, name, args)
    assert is_error and data["error"] == kind, data
    return data


def remember(about: str, text: str, category: str | None = None) -> dict:
    return {"about": about, "text": text, **({"category": category} if category else {})}


async def test_facts_land_in_one_note_per_project_and_one_for_the_person(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True, project="/code/app") as client:
        a = await ok(client, "kms_remember", remember("project", "The build uses uv, not pip.", "tools"))
        b = await ok(client, "kms_remember", remember("project", "Tests run with pytest -n 2", "Tools"))
        c = await ok(client, "kms_remember", remember("project", "APSW, never sqlite3", "Decisions"))
        d = await ok(client, "kms_remember", remember("person", "Prefers short answers"))
        await ok(client, "kms_start", {"project": "/code/other"})  # another project: another note
        e = await ok(client, "kms_remember", remember("project", "Other project's fact"))
    assert a["status"] == b["status"] == "added" and a["path"] == b["path"] == c["path"] == "kms-memory/project-app.md"
    assert d["path"] == "kms-memory/person.md" and e["path"] == "kms-memory/project-other.md"
    assert a["category"] == "Tools" and d["category"] == "General" and ITEM.match(a["line"])
    text = (vault_dir / a["path"]).read_text()
    assert text.startswith('---\nmemory: project\nproject: "/code/app"\n')
    facts = parse_facts(text)
    assert [(f.category, f.text) for f in facts] == [
        ("Tools", "The build uses uv, not pip."),
        ("Tools", "Tests run with pytest -n 2"),
        ("Decisions", "APSW, never sqlite3"),
    ]
    assert "## Tools\n\n- " in text and "pip.\n- " in text  # one tight list per category
    assert "Other project" not in text and "Prefers" not in text


async def test_the_same_fact_again_is_a_duplicate_and_writes_nothing(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True, project="/code/app") as client:
        first = await ok(client, "kms_remember", remember("project", "The build uses uv, not pip.", "Tools"))
        before = (vault_dir / first["path"]).read_bytes()
        again = await ok(client, "kms_remember", remember("project", "  the BUILD uses uv,  not pip ", "Other"))
        counters = client.runner.writes.counters()
    assert again["status"] == "duplicate" and again["existing"] == first["line"] and again["category"] == "Tools"
    assert (vault_dir / first["path"]).read_bytes() == before
    assert counters["total"] == 1  # a duplicate is not a write
    assert normalized("Uses  UV.") == normalized("uses uv")


async def test_a_fact_the_person_wrote_by_hand_is_found_too(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    async with mcp_client(db_path, write_enabled=True, project="/code/app") as client:
        first = await ok(client, "kms_remember", remember("project", "Deploys go through CI"))
        path = vault_dir / first["path"]
        path.write_text(path.read_text() + "\n## Mine\n\n- Releases are cut on Fridays\n")
        index_vault(indexed, get_vault(indexed, "sample"))
        dup = await ok(client, "kms_remember", remember("project", "releases are cut on fridays."))
        added = await ok(client, "kms_remember", remember("project", "Second fact", "mine"))
    assert dup["status"] == "duplicate" and dup["existing"] == "- Releases are cut on Fridays"
    assert added["status"] == "added" and "- Releases are cut on Fridays\n- " in path.read_text()


async def test_near_identical_facts_are_duplicates_when_the_model_is_ready(
    indexed: apsw.Connection, db_path: Path, embed_model_dir: Path
) -> None:
    async with mcp_client(
        db_path, write_enabled=True, project="/code/app", embed_model_dir=str(embed_model_dir)
    ) as client:
        semantic = client.runner.services.semantic
        assert semantic is not None
        semantic.embedder.load()
        await ok(client, "kms_remember", remember("person", "The person prefers tabs over spaces for indentation"))
        near = await ok(client, "kms_remember", remember("person", "The person prefers tabs to spaces for indenting"))
        other = await ok(client, "kms_remember", remember("person", "The person drinks coffee every morning"))
    assert near["status"] == "duplicate" and "tabs over spaces" in near["existing"]
    assert other["status"] == "added"


async def test_memory_has_its_own_allowlist_entry(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    async with mcp_client(db_path, write_enabled=True, project="/code/app", allowlist=("drafts",)) as client:
        fact = await ok(client, "kms_remember", remember("project", "Memory works outside the allowlist"))
        await err(client, "kms_append", {"noteId": fact["noteId"], "content": "not through append"}, "folder-denied")
        await err(client, "kms_create", {"title": "x", "folder": "kms-memory"}, "folder-denied")
    assert "not through append" not in (vault_dir / fact["path"]).read_text()


async def test_memory_folder_is_a_setting(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    async with mcp_client(db_path, write_enabled=True, project="/a", memory_folder="agents/memory") as client:
        fact = await ok(client, "kms_remember", remember("person", "Lives in Lisbon"))
        start = await ok(client, "kms_start")
    assert fact["path"] == "agents/memory/person.md" and (vault_dir / fact["path"]).is_file()
    assert start["session"]["memoryFolder"] == "agents/memory"
    assert start["memory"]["person"]["facts"] == [
        {"category": "General", "text": fence("Lives in Lisbon"), "date": fact["line"][2:12]}  # memory is data too
    ]
    async with mcp_client(db_path, write_enabled=True, project="/a", memory_folder=None) as client:
        off = await err(client, "kms_remember", remember("person", "x"), "feature-disabled")
    assert "memory.folder" in off["message"]


async def test_refusals_change_nothing(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir("/")  # a server started in / has no project
    async with mcp_client(db_path) as client:  # read-only session
        await err(client, "kms_remember", remember("person", "x"), "feature-disabled")
    async with mcp_client(db_path, write_enabled=True) as client:
        await err(client, "kms_remember", remember("project", "no project yet"), "invalid-input")
        await err(client, "kms_remember", {"about": "team", "text": "x"}, "invalid-input")
        await err(client, "kms_remember", remember("person", "   "), "invalid-input")
        await err(client, "kms_remember", remember("person", "y" * 1001), "invalid-input")
        await err(client, "kms_remember", {"about": "person", "text": "x", "extra": 1}, "invalid-input")
    assert not (vault_dir / "kms-memory").exists()


async def test_every_call_is_recorded_once_rate_limited_and_revertible(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    from server.writes.undo.revert import revert

    async with mcp_client(db_path, write_enabled=True, project="/code/app", per_minute=3) as client:
        created = await ok(client, "kms_remember", remember("project", "First"))
        added = await ok(client, "kms_remember", remember("project", "Second"))
        await ok(client, "kms_remember", remember("project", "first"))  # duplicate: no slot used
        await ok(client, "kms_remember", remember("project", "Third"))
        limited = await err(client, "kms_remember", remember("project", "Fourth"), "rate-limited")
    assert limited["retryAfterMs"] > 0
    rows = [r for r in list_invocations(indexed, limit=20) if r["tool"] == "kms_remember"]
    assert len(rows) == 5 and {r["status"] for r in rows} == {"success", "rate-limited"}
    path = vault_dir / created["path"]
    revert(indexed, added["invocationId"])
    assert "Second" not in path.read_text() and "Third" in path.read_text()
    assert json.dumps(added).count("Second") == 1


async def test_a_private_memory_folder_is_refused(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    from server.config.settings import set_value
    from server.index.privacy import refresh_all

    set_value("privacy.hide_folders", ["kms-memory"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
    refresh_all(indexed)  # as kms mcp does at start
    async with mcp_client(db_path, write_enabled=True, project="/p") as client:
        await err(client, "kms_remember", remember("person", "x"), "folder-denied")
    assert not (vault_dir / "kms-memory").exists()


async def test_a_hidden_memory_note_is_never_read_or_written(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    write(
        vault_dir / "kms-memory" / "person.md",
        "---\nmemory: person\nprivate: true\n---\n# M\n\n## General\n\n- 2026-01-01: zqxsecret fact\n",
    )
    index_vault(indexed, get_vault(indexed, "sample"))
    async with mcp_client(db_path, write_enabled=True, project="/p") as client:
        start = await ok(client, "kms_start")
        fact = await ok(client, "kms_remember", remember("person", "zqxsecret fact"))
    assert "zqx" not in json.dumps(start) and "person" not in start["memory"]
    assert fact["status"] == "added" and fact["path"] != "kms-memory/person.md"  # a note of its own
    assert "zqxsecret fact" in (vault_dir / "kms-memory" / "person.md").read_text()  # the person's, untouched
    assert (vault_dir / "kms-memory" / "person.md").read_text().count("zqxsecret") == 1
    assert note_id(indexed, fact["title"])


async def test_memory_stays_in_the_sessions_vault(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    from server.index.indexer import index_vault as index
    from server.vault.registry import add_vault

    for name in ("first", "second"):
        write(tmp_path / name / "Note.md", f"# Note\n\n{name}\n")
        index(conn, add_vault(conn, tmp_path / name, name))
    async with mcp_client(db_path, write_enabled=True, project="/p", vault="second") as client:
        fact = await ok(client, "kms_remember", remember("person", "Scoped fact"))
    async with mcp_client(db_path, write_enabled=True, project="/p") as client:  # unscoped
        other = await ok(client, "kms_remember", remember("person", "Unscoped fact"))  # the note that exists
        again = await ok(client, "kms_remember", remember("person", "Unscoped fact."))
        project = await ok(client, "kms_remember", remember("project", "A new project note"))  # the first added
    async with mcp_client(db_path, write_enabled=True, project="/p", vault="first") as client:
        start = await ok(client, "kms_start")
    assert fact["vault"] == "second" and (tmp_path / "second" / fact["path"]).is_file()
    assert (other["vault"], other["path"]) == ("second", fact["path"]) and again["status"] == "duplicate"
    assert project["vault"] == "first" and not (tmp_path / "first" / fact["path"]).exists()
    assert set(start["memory"]) == {"project"}  # the first vault's session sees only the first vault's memory


async def test_with_approval_on_a_fact_waits_for_the_person(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    """``write.approval = always``: kms_remember is staged with its diff like any write, lands once approved."""
    import anyio

    from server.activity import approvals
    from server.store.db import connect

    results: dict[str, Any] = {}

    async def approve_first() -> approvals.Pending:
        other = connect(db_path)
        try:
            with anyio.fail_after(10):
                while not (found := approvals.list_pending(other)):
                    await anyio.sleep(0.02)
            approvals.decide(other, found[0].id, approve=True)
            return found[0]
        finally:
            other.close()

    async with mcp_client(db_path, write_enabled=True, project="/p", approval="always") as client:
        for text in ("First fact", "Second fact"):

            async def agent(text: str = text) -> None:
                results[text] = await client.call_tool("kms_remember", remember("project", text))

            async with anyio.create_task_group() as tg:
                tg.start_soon(agent)
                item = await approve_first()
            assert item.tool == "kms_remember" and "+- " in item.files[0]["diff"] and text in item.files[0]["diff"]
    first, second = results["First fact"], results["Second fact"]
    assert not first.is_error and not second.is_error, (first.structured_content, second.structured_content)
    text = (vault_dir / first.structured_content["path"]).read_text()
    assert [f.text for f in parse_facts(text)] == ["First fact", "Second fact"]
