"""The orientation tools through the real server and the real in-memory SDK client (issue 14, part A):
kms_start (the budget, what changed since the last visit of one identity), kms_list_folder, kms_status."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import apsw
import pytest
from support.mcp_session import mcp_client
from support.vaults import note_id, write

from server.activity.session_registry import end_session, get_session
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.index.note_data import unfence
from server.index.notes import set_hidden
from server.vault.registry import add_vault, get_vault


async def call(client: Any, name: str, args: dict | None = None) -> tuple[dict, bool]:
    result = await client.call_tool(name, args or {})
    [content] = result.content
    assert json.loads(content.text) == result.structured_content
    return result.structured_content, bool(result.is_error)


async def ok(client: Any, name: str, args: dict | None = None) -> dict:
    data, is_error = await call(client, name, args)
    assert not is_error and "error" not in data, data
    return data


async def err(client: Any, name: str, args: dict | None, kind: str) -> dict:
    data, is_error = await call(client, name, args)
    assert is_error and data["error"] == kind, data
    return data


def tokens(answer: dict) -> int:
    return len(json.dumps(answer, ensure_ascii=False).encode()) // 4


# kms_start ----------------------------------------------------------------------------------------


async def test_start_orients_in_one_answer(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, project="/work/proj", write_enabled=True, allowlist=("drafts",)) as client:
        first = await ok(client, "kms_start")
        again = await ok(client, "kms_start")
    s = first["session"]
    assert s["project"] == "/work/proj" and s["tiers"] == {
        "read": True,
        "write": True,
        "edit": False,
        "organize": False,
    }
    assert s["allowlist"] == ["drafts"] and s["memoryFolder"] == "kms-memory"
    assert s["writes"] == {"perMinute": 10, "leftThisMinute": 10, "perSession": 200, "leftThisSession": 200}
    assert s["semanticSearch"]["ready"] is False
    [vault] = first["vaults"]
    visible = indexed.execute("SELECT count(*) FROM notes WHERE hidden_at IS NULL").fetchall()[0][0]
    assert vault["name"] == "sample" and vault["dialect"] == "obsidian" and vault["notes"] == visible
    folders = {f["path"]: f["notes"] for f in vault["folders"]}
    assert folders["projects"] == 5 and "journal" in folders
    assert sum(folders.values()) + vault.get("notesElsewhere", 0) == visible
    linked = first["map"]["mostLinked"]
    assert linked[0]["backlinks"] >= linked[-1]["backlinks"] and {"noteId", "title", "path"} <= set(linked[0])
    assert first["map"]["recent"] and first["map"]["tags"][0]["count"] >= first["map"]["tags"][-1]["count"]
    health = first["health"]
    assert health["flagged"]["count"] == 1 and health["flagged"]["notes"][0]["path"] == "templates/Daily template.md"
    assert health["unresolvedLinks"]["count"] >= 1 and health["watcherRunning"] is False
    assert first["sinceLastVisit"] == {"since": None, "firstVisit": True, "project": "/work/proj"}
    assert first["tokenEstimate"] == tokens(first) <= 2_500 and "omitted" not in first
    assert again == first  # idempotent
    row = get_session(indexed, s["id"])
    assert row is not None and row.project == "/work/proj"  # the identity is on the session row


async def test_read_only_session_is_told_what_it_may_not_do(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, project="p") as client:
        s = (await ok(client, "kms_start"))["session"]
        await ok(client, "kms_search", {"query": "kubernetes"})  # never required first: other calls work anyway
    assert s["tiers"]["write"] is False and "writes" not in s and "allowlist" not in s


async def test_a_host_names_its_project_and_no_identity_says_how(
    indexed: apsw.Connection, db_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path.home())  # the home folder names no project
    async with mcp_client(db_path) as client:
        bare = await ok(client, "kms_start")
        named = await ok(client, "kms_start", {"project": "  github.com/me/app/ "})
        await err(client, "kms_start", {"project": "x" * 501}, "invalid-input")
    assert bare["session"]["project"] is None and "pass project" in bare["sinceLastVisit"]["reason"]
    assert named["session"]["project"] == "github.com/me/app"
    row = get_session(indexed, named["session"]["id"])
    assert row is not None and row.project == "github.com/me/app"


def _edit(root: Path, rel: str, text: str, mtime: float) -> None:
    write(root / rel, text)
    os.utime(root / rel, (mtime, mtime))


async def test_since_last_visit_across_two_sessions_of_one_identity(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    vault = get_vault(indexed, "sample")
    home, lisbon = note_id(indexed, "Home"), note_id(indexed, "Lisbon trip")
    set_hidden(indexed, "Weekly review", True)
    async with mcp_client(db_path, project="/work/proj", session_id="s-first", write_enabled=True) as client:
        assert (await ok(client, "kms_start"))["sinceLastVisit"]["firstVisit"] is True
        await ok(client, "kms_append", {"noteId": home, "content": "Written in the first session."})
    left = time.time()
    assert end_session(indexed, "s-first", 0, now=left)
    # after the first session left: another agent session writes, the person edits and creates notes
    async with mcp_client(db_path, project="/work/other", session_id="s-other", write_enabled=True) as client:
        await ok(client, "kms_start")
        await ok(client, "kms_append", {"noteId": lisbon, "content": "Another agent was here."})
    _edit(vault_dir, "reference/Git tips.md", "# Git tips\n\nEdited by the person.\n", left + 30)
    _edit(vault_dir, "inbox/New idea.md", "# New idea\n\nA person's new note.\n", left + 40)
    _edit(vault_dir, "Weekly review.md", "# Weekly review\n\nzqxhidden edit\n", left + 50)  # hidden: never shown
    for rel in ("reference/Git tips.md", "inbox/New idea.md", "Weekly review.md"):
        reindex_file(indexed, vault, rel)
    _edit(
        vault_dir,
        "projects/Lisbon trip.md",
        (vault_dir / "projects/Lisbon trip.md").read_text() + "\nperson\n",
        left + 60,
    )  # the person edits after the other agent: both are named
    reindex_file(indexed, vault, "projects/Lisbon trip.md")
    async with mcp_client(db_path, project="/work/proj/", session_id="s-second") as client:
        since = (await ok(client, "kms_start"))["sinceLastVisit"]
    assert since["since"] == pytest.approx(left) and since["previousSession"] == "s-first"
    by = {n["path"]: (n["change"], n["by"]) for n in since["notes"]}
    assert by["reference/Git tips.md"] == ("edited", [{"person": True}])
    assert by["inbox/New idea.md"] == ("created", [{"person": True}])
    assert by["projects/Lisbon trip.md"] == (
        "edited",
        [{"agent": "s-other", "project": "/work/other"}, {"person": True}],
    )
    assert "Home.md" not in by and "Weekly review.md" not in by and "zqx" not in json.dumps(since)
    assert since["created"] == 1 and since["edited"] == 2 and since["more"] == 0
    assert [n["at"] for n in since["notes"]] == sorted((n["at"] for n in since["notes"]), reverse=True)


async def test_an_agents_own_write_since_the_last_visit_is_not_the_persons(
    indexed: apsw.Connection, db_path: Path
) -> None:
    end = time.time()  # after the sample vault was indexed
    from server.activity.session_registry import start_session

    start_session(indexed, kind="launcher", session_id="s-old", project="/p", now=end - 100)
    end_session(indexed, "s-old", 0, now=end)
    plans = note_id(indexed, "Lisbon trip")
    async with mcp_client(db_path, project="/p", session_id="s-writer", write_enabled=True) as client:
        await ok(client, "kms_start")
        await ok(client, "kms_append", {"noteId": plans, "content": "By an agent only."})
    async with mcp_client(db_path, project="/p", session_id="s-new") as client:
        since = (await ok(client, "kms_start"))["sinceLastVisit"]
    # s-writer is still "running" (never ended, seen just now), so the previous visit is s-old
    assert since["previousSession"] == "s-old"
    [note] = since["notes"]
    assert note["path"] == "projects/Lisbon trip.md" and note["by"] == [{"agent": "s-writer", "project": "/p"}]


def _big_vault(root: Path) -> None:
    long = "A very long note title about many things " * 5  # ~210 characters
    for i in range(120):
        folder = f"folder {i:03d} with a long name that goes on and on for a while"
        links = " ".join(
            f"[[{long.strip()} {j}]] [[missing target number {i}-{j} with a long name]]" for j in range(i % 7)
        )
        tags = " ".join(f"#tag-{i}-{j}-with-a-long-suffix" for j in range(4))
        fm = "---\ntitle: [broken\n---\n" if i % 3 == 0 else ""
        write(root / folder / f"{long.strip()} {i}.md", f"{fm}# {long} {i}\n\n{links}\n\n{tags}\n")


async def test_start_stays_within_its_budget_whatever_the_vault(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    from server.index.memory import parse_facts

    root = tmp_path / "big"
    _big_vault(root)
    facts = "\n".join(f"- 2026-11-{1 + i % 28:02d}: fact number {i} " + "which is long " * 60 for i in range(80))
    write(root / "kms-memory" / "person.md", f"---\nmemory: person\n---\n# Memory\n\n## General\n\n{facts}\n")
    for n in range(12):
        index_vault(conn, add_vault(conn, root if n == 0 else _copy(root, tmp_path / f"v{n}"), f"vault-{n:02d}"))
    from server.activity.session_registry import start_session

    start_session(conn, kind="launcher", session_id="s-old", project="/big", now=1.0)
    end_session(conn, "s-old", 0, now=2.0)  # everything changed since
    async with mcp_client(
        db_path, project="/big", write_enabled=True, allowlist=tuple(f"d{i}" for i in range(40))
    ) as client:
        answer = await ok(client, "kms_start")
    assert tokens(answer) <= 2_500 and answer["tokenEstimate"] <= 2_500
    assert answer["omitted"] and all(v["items"] > 0 and v["see"].startswith("kms_") for v in answer["omitted"].values())
    titles = {r[0] for r in conn.execute("SELECT title FROM notes")}
    shown = [c for c in answer["map"]["mostLinked"] + answer["map"]["recent"] + answer["sinceLastVisit"]["notes"]]
    assert all(c["title"] in titles for c in shown)  # whole items, never a cut title
    whole = {f.text for f in parse_facts((root / "kms-memory" / "person.md").read_text())}
    facts_shown = answer.get("memory", {}).get("person", {}).get("facts", [])
    assert all(unfence(f["text"]) in whole for f in facts_shown)  # (fact text comes fenced as note data)
    assert answer["session"]["tiers"]["write"] is True  # what the session may do is never dropped


def _copy(src: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(src, dest)
    return dest


async def test_start_sees_only_the_sessions_vault(conn: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    for name in ("work", "zqxprivate"):
        write(tmp_path / name / "zqxfolder" / f"{name} note.md", f"# {name} note\n\n[[{name} missing]] #{name}\n")
    write(
        tmp_path / "zqxprivate" / "kms-memory" / "person.md",  # the other vault's memory is not this session's
        "---\nmemory: person\n---\n# M\n\n## General\n\n- 2026-01-01: zqxprivate fact\n",
    )
    for name in ("work", "zqxprivate"):
        index_vault(conn, add_vault(conn, tmp_path / name, name))
    async with mcp_client(db_path, vault="work", project="p") as client:
        answer = await ok(client, "kms_start")
        status = await ok(client, "kms_status")
        listing = await ok(client, "kms_list_folder", {"path": "zqxfolder"})
        await err(client, "kms_list_folder", {"vault": "zqxprivate"}, "invalid-input")
    for text in (json.dumps(answer), json.dumps(status), json.dumps(listing)):
        assert "zqxprivate" not in text and "work" in text
    assert [v["name"] for v in answer["vaults"]] == ["work"] and status["counts"]["notes"] == 1
    assert answer["memory"] == {}


# kms_list_folder ----------------------------------------------------------------------------------


async def test_list_folder_shows_notes_and_subfolders_with_counts(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        root = await ok(client, "kms_list_folder")
        same = await ok(client, "kms_list_folder", {"path": "/"})
        projects = await ok(client, "kms_list_folder", {"path": "projects/"})
        tagged = await ok(client, "kms_list_folder", {"tag": "#project"})
    assert root == same and root["path"] == ""
    assert [f["path"] for f in root["folders"]] == sorted(f["path"] for f in root["folders"])
    assert {f["path"]: f["notes"] for f in root["folders"]}["projects"] == 5
    assert {n["path"] for n in root["notes"]} == {
        r[0] for r in indexed.execute("SELECT path FROM notes WHERE folder = '' AND hidden_at IS NULL")
    }
    card = projects["notes"][0]
    assert {"noteId", "title", "path", "vault", "tags", "updatedAt", "summary", "tokenEstimate", "sizeBytes"} <= set(
        card
    )
    assert len(projects["notes"]) == 5 and projects["folders"] == [] and projects["nextCursor"] is None
    assert tagged["tag"] == "project" and {n["title"] for n in tagged["notes"]} == {"Home"}  # project/kms, nested
    assert all(f["notes"] >= 1 for f in tagged["folders"])


async def test_list_folder_pages_like_the_inventory(indexed: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path) as client:
        whole = await ok(client, "kms_list_folder", {"path": "reference"})
        seen, cursor, pages = [], None, 0
        while True:
            page = await ok(
                client, "kms_list_folder", {"path": "reference", "limit": 2, **({"cursor": cursor} if cursor else {})}
            )
            assert ("folders" in page) is (cursor is None)
            seen += [n["noteId"] for n in page["notes"]]
            pages += 1
            cursor = page["nextCursor"]
            if not cursor:
                break
        await err(client, "kms_list_folder", {"path": "reference", "cursor": "garbage!"}, "invalid-input")
    assert seen == [n["noteId"] for n in whole["notes"]] and len(seen) == 9 and pages == 5


async def test_list_folder_refuses_what_is_not_a_visible_folder(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    write(vault_dir / "zqxsecret" / "deep" / "Only hidden.md", "---\nprivate: true\n---\n# zqx\n")
    index_vault(indexed, get_vault(indexed, "sample"))
    async with mcp_client(db_path) as client:
        root = await ok(client, "kms_list_folder")
        hidden = await err(client, "kms_list_folder", {"path": "zqxsecret"}, "not-found")
        missing = await err(client, "kms_list_folder", {"path": "zqxsecret/deep"}, "not-found")
        typo = await err(client, "kms_list_folder", {"path": "projcts"}, "not-found")
        await err(client, "kms_list_folder", {"path": "../etc"}, "invalid-input")
        await err(client, "kms_list_folder", {"path": "projects", "bogus": 1}, "invalid-input")
        empty_tag = await ok(client, "kms_list_folder", {"path": "projects", "tag": "nothing-carries-this"})
    assert "zqx" not in json.dumps(root)
    assert set(hidden) == set(missing) and hidden["message"].replace("zqxsecret", "") == missing["message"].replace(
        "zqxsecret/deep", ""
    )  # a hidden folder answers as a missing one
    assert "projects" in typo["message"]
    assert empty_tag["notes"] == [] and empty_tag["folders"] == []


# kms_status ---------------------------------------------------------------------------------------


async def test_status_reports_index_health_for_visible_notes(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    write(vault_dir / "Broken zqx.md", "---\nprivate: true\ntitle: [zqx\n---\n# zqx\n\n[[zqx missing]]\n")
    index_vault(indexed, get_vault(indexed, "sample"))
    async with mcp_client(db_path) as client:
        status = await ok(client, "kms_status")
    visible = indexed.execute("SELECT count(*) FROM notes WHERE hidden_at IS NULL").fetchall()[0][0]
    assert status["counts"]["notes"] == visible == status["vaults"][0]["notes"]
    assert status["flagged"]["count"] == 1 and status["flagged"]["notes"][0]["reason"].startswith("invalid YAML")
    top = status["unresolvedLinks"]["top"]
    assert top and top[0]["links"] >= top[-1]["links"] and all(u["fromNoteId"].startswith("n") for u in top)
    assert status["unresolvedLinks"]["count"] >= sum(u["links"] for u in top)
    assert status["watcher"] == {"running": False}
    assert status["embeddings"]["notes"] == visible and status["embeddings"]["coverage"] == 0.0
    assert status["lastIndexedAt"] and "zqx" not in json.dumps(status)


async def test_status_counts_embedded_notes(indexed: apsw.Connection, db_path: Path, embed_model_dir: Path) -> None:
    from server.index.embed import embed_pending

    embed_pending(indexed, model_dir=embed_model_dir)
    async with mcp_client(db_path, embed_model_dir=str(embed_model_dir)) as client:
        semantic = client.runner.services.semantic
        assert semantic is not None
        semantic.embedder.load()
        status = await ok(client, "kms_status")
        start = await ok(client, "kms_start", {"project": "p"})
    assert status["embeddings"]["coverage"] == 1.0 and status["embeddings"]["ready"] is True
    assert start["session"]["semanticSearch"] == {"ready": True, "state": "ready"}


async def test_a_real_server_carries_kms_project_from_one_process_to_the_next(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path, tmp_path: Path
) -> None:
    """``python -m kmscli mcp`` as ``kms claude`` starts it (``KMS_PROJECT``): the heartbeat records the
    identity, the end of the process ends the session, and the next process of the project sees the
    person's edit made in between; the watcher is reported running."""
    import sys

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    env = {
        "KMS_DB_PATH": str(db_path),
        "KMS_CONFIG": os.environ["KMS_CONFIG"],
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "KMS_PROJECT": str(tmp_path / "proj"),
        "KMS_EMBED_ENABLED": "0",
        "PYTHONIOENCODING": "utf-8",
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "kmscli", "mcp"], env=env, cwd=str(tmp_path))

    async def start() -> dict:
        async with Client(params, read_timeout_seconds=30) as client:
            r = await client.call_tool("kms_start", {})
            assert not r.is_error, r.structured_content
            return r.structured_content

    first = await start()
    assert first["sinceLastVisit"]["firstVisit"] is True and first["health"]["watcherRunning"] is True
    ended = get_session(indexed, first["session"]["id"])
    assert ended is not None and ended.project == str(tmp_path / "proj") and ended.ended_at is not None
    _edit(vault_dir, "reference/Git tips.md", "# Git tips\n\nThe person was here.\n", ended.ended_at + 5)
    reindex_file(indexed, get_vault(indexed, "sample"), "reference/Git tips.md")
    second = await start()
    since = second["sinceLastVisit"]
    assert since["previousSession"] == first["session"]["id"] and since["since"] == pytest.approx(ended.ended_at)
    assert [(n["path"], n["by"]) for n in since["notes"]] == [("reference/Git tips.md", [{"person": True}])]
