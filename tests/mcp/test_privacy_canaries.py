"""Privacy by rule, through the real MCP server and client: for each rule kind, a note full of canary
words is hidden, and no read or write tool's answer or error carries one of them (every read tool of the
registry, a new one included, is aimed at it from its spec's example); nothing hidden is embedded; a running
server sees a rule change."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import apsw
import pytest
from support.examples import aimed, specs
from support.mcp_session import mcp_client
from support.privacy import KINDS, VISIBLE, answer_text, build, canary_hits, hidden_rows
from support.vaults import note_id, write

from server.index.indexer import index_vault
from server.index.notes import set_hidden
from server.mcp.tools import tool_names
from server.vault.registry import add_vault, get_vault

QUERIES = [
    "zqxbody",
    "zqxheading",
    "zqxsection",
    "zqxtag",
    "zqxlinktarget",
    "zqxfolder",
    "zqxjournal",
    "zqxignored",
    "zqxlink",
    "zqx*",
    "garden",
    "beans peas",
    "Zqx title",
    "secret",
    "private",
]


def _setup(conn: apsw.Connection, tmp_path: Path, kind: str) -> dict:
    root = tmp_path / "vault"
    info = build(root, kind, Path(os.environ["KMS_CONFIG"]))
    index_vault(conn, add_vault(conn, root, "v"))
    info["id"] = conn.execute("SELECT id FROM notes WHERE path = ?", (info["path"],)).fetchall()[0][0]
    if kind == "stamp":
        set_hidden(conn, info["id"], True)
    return info


def _calls(info: dict, plans: str, home: str) -> list[tuple[str, dict]]:
    hidden, title, folder = info["id"], info["title"], info["folder"]
    refs = [hidden, title, info["path"], info["path"][:-3]] + ([info["link"]] if info["link"] else [])
    calls: list[tuple[str, dict]] = [("kms_search", {"query": q, "limit": 50}) for q in QUERIES]
    calls += [("kms_semantic_search", {"query": q, "limit": 50}) for q in ("garden beans and peas", "zqxbody")]
    calls += [("kms_recall", {"topic": q}) for q in ("garden beans and peas", "zqxbody", "Zqx title", "plans")]
    calls += [("kms_recall", {"topic": "garden", "budgetTokens": 20000})]
    calls += [("kms_read", {"noteId": r}) for r in refs]
    calls += [("kms_read", {"noteId": r, "section": "Spring"}) for r in (plans, "Plans", "Plans.md")]
    calls += [("kms_get_backlinks", {"noteId": r, "limit": 50}) for r in (plans, home, hidden, title)]
    calls += [("kms_history", {"noteId": r, "diffFrom": 1}) for r in (*refs, plans, home)]  # issue 28
    calls += [("kms_list_tags", {}), ("kms_list_recent", {"limit": 50}), ("kms_inventory", {"limit": 500})]
    # the orientation tools (issue 14): start, status, folder listings in and around the hidden note's folder
    calls += [("kms_start", {}), ("kms_start", {"project": "garden"}), ("kms_status", {})]
    parts = folder.split("/")
    calls += [
        ("kms_list_folder", {"path": p, "limit": 500})
        for p in ("", "public", *("/".join(parts[: i + 1]) for i in range(len(parts))))
    ]
    calls += [("kms_list_folder", {"tag": t, "limit": 500}) for t in (f"zqxtag-{info['kind']}", "garden")]
    calls += [
        ("kms_remember", {"about": a, "text": "garden beans and peas", "category": c})
        for a in ("person", "project")
        for c in ("General", f"zqxheading {info['kind']}")
    ]
    calls += [("kms_start", {}), ("kms_list_folder", {"path": "kms-memory"})]  # now with memory notes
    # write tools: on the hidden note (by id, title, path), and beside it
    for r in refs:
        calls += [
            ("kms_append", {"noteId": r, "content": "agent text"}),
            ("kms_insert_at", {"noteId": r, "content": "agent text", "position": {"atLine": 1}}),
            ("kms_update_properties", {"noteId": r, "set": {"status": "done"}}),
        ]
    calls += [
        ("kms_create", {"title": title, "folder": folder}),
        ("kms_create", {"title": title.upper(), "folder": folder}),
        ("kms_create", {"title": "Agent draft", "folder": folder}),
        ("kms_create", {"title": "Agent draft", "folder": folder.split("/")[0] + "/new"}),
        ("kms_create", {"title": "Agent note", "folder": "public", "content": "garden"}),
        ("kms_append", {"noteId": plans, "content": "more", "heading": f"zqxheading {info['kind']}"}),
        ("kms_insert_at", {"noteId": plans, "content": "x", "position": {"afterBlockContaining": "zqxbody"}}),
        ("kms_append", {"noteId": plans, "content": "Sown."}),
    ]
    return calls


@pytest.mark.parametrize("kind", list(KINDS))
async def test_no_tool_answer_or_error_names_a_hidden_note(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, kind: str
) -> None:
    info = _setup(conn, tmp_path, kind)
    hidden_paths = {p for p, _why, _stamp in hidden_rows(conn)}
    assert info["path"] in hidden_paths and (info["link"] is None or info["link"] in hidden_paths)
    assert hidden_paths <= {info["path"], info["link"]}  # the visible notes stay visible
    plans, home = note_id(conn, "Plans"), note_id(conn, "Home")
    leaks: list[tuple[str, dict, list[str]]] = []
    outcomes: dict[str, int] = {}
    async with mcp_client(db_path, write_enabled=True) as client:
        for name, args in _calls(info, plans, home):
            result = await client.call_tool(name, args)
            hits = canary_hits(answer_text(result), args)
            if hits:
                leaks.append((name, args, hits))
            outcomes[name] = outcomes.get(name, 0) + (0 if result.is_error else 1)
        search = (await client.call_tool("kms_search", {"query": "garden", "limit": 50})).structured_content
    assert leaks == []
    assert {h["title"] for h in search["hits"]} >= {"Home", "Plans", "Log", "Agent note"}  # the filter, not luck
    # collisions are refused; so is any note in a private folder (the agent could probe names there)
    assert outcomes["kms_create"] == (1 if kind in ("folder", "kmsignore", "symlink") else 3)
    assert outcomes["kms_update_properties"] == 0 and outcomes["kms_insert_at"] == 0
    # the hidden note's file is untouched and nothing was written next to it in a private folder
    assert "agent text" not in (tmp_path / "vault" / info["path"]).read_text()


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_read_tool_aimed_at_a_hidden_note_answers_nothing_of_it(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, kind: str
) -> None:
    """Each read tool of the registry, with nothing written for it here: its example as is, then each of its
    string arguments set to each name of the hidden note (id, title, path, folder, tag, a canary word) and to
    words it shares with the visible notes or has without a canary. A new read tool that leaks fails here
    until it does not."""
    info = _setup(conn, tmp_path, kind)
    names = [info["id"], info["title"], info["path"], info["path"][:-3], info["folder"], f"zqxtag-{kind}"]
    names += ["zqxbody", *([info["link"]] if info["link"] else [])]
    # and words the hidden note shares with the visible ones, or alone with none of its canaries (its title's
    # "title", its kind); the empty string, which many a filter reads as "everything"
    names += ["garden", "beans peas", "plans", "title", kind, ""]
    leaks: list[tuple[str, dict, list[str]]] = []
    called: set[str] = set()
    answered: list[str] = []
    async with mcp_client(db_path) as client:
        for spec in specs("read"):
            for args in aimed(spec, names):
                result = await client.call_tool(spec.name, args)
                called.add(spec.name)
                answered.append(answer_text(result))
                if hits := canary_hits(answered[-1], args):
                    leaks.append((spec.name, args, hits))
    assert called == set(tool_names("read"))
    assert leaks == []
    assert any("Plans.md" in a for a in answered)  # the visible notes are answered: the filter, not luck


async def test_create_on_a_hidden_note_answers_like_any_collision(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    info = _setup(conn, tmp_path, "frontmatter")
    write(tmp_path / "vault" / info["folder"] / "Visible twin.md", "# Visible twin\n")
    index_vault(conn, get_vault(conn, "v"))
    async with mcp_client(db_path, write_enabled=True) as client:
        hidden = await client.call_tool("kms_create", {"title": info["title"], "folder": info["folder"]})
        seen = await client.call_tool("kms_create", {"title": "Visible twin", "folder": info["folder"]})
    a, b = hidden.structured_content, seen.structured_content
    assert hidden.is_error and seen.is_error and a["error"] == b["error"] == "already-exists"
    assert a["message"] == b["message"] and set(a) == set(b)
    assert a["path"] == f"{info['folder']}/{info['title']}.md"  # what was asked for, nothing more


@pytest.mark.parametrize("kind", list(KINDS))
async def test_no_organize_call_makes_a_hidden_note_visible_or_tells_its_folder_apart(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, kind: str
) -> None:
    """The folder tools, dry run or not, answer a hidden folder (and each folder above it with no visible
    note) exactly as one that does not exist; moving the visible folders, or moving notes into the hidden
    note's folder, never publishes it nor writes where a rule hides (dogfood findings mcp #1 and #3)."""
    info = _setup(conn, tmp_path, kind)
    before = hidden_rows(conn)
    parts = info["folder"].split("/")
    hidden_folders = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    calls: list[tuple[str, dict]] = []
    for f in [*hidden_folders, "zqxnothere"]:
        for dry in (True, False):
            calls += [
                ("kms_rename_folder", {"folder": f, "name": "open", "dryRun": dry}),
                ("kms_move_folder", {"folder": f, "to": "public", "dryRun": dry}),
            ]
    calls += [
        ("kms_move", {"noteId": "Plans", "folder": info["folder"]}),
        ("kms_move_folder", {"folder": "public", "to": info["folder"], "dryRun": True}),
        ("kms_rename_folder", {"folder": "public", "name": "open", "dryRun": True}),
        ("kms_rename_folder", {"folder": "public", "name": "open"}),
    ]
    leaks, answers = [], []
    async with mcp_client(db_path, write_enabled=True, edit_enabled=True, organize_enabled=True) as client:
        for name, args in calls:
            result = await client.call_tool(name, args)
            answers.append((name, args, result.structured_content))
            if hits := canary_hits(answer_text(result), args):
                leaks.append((name, args, hits))
        found = {
            q: [
                h["path"]
                for h in (await client.call_tool("kms_search", {"query": q, "limit": 50})).structured_content["hits"]
            ]
            for q in ("zqxbody", "garden")
        }
    assert leaks == []
    for name, args, out in answers[: 4 * (len(hidden_folders) + 1)]:  # hidden or missing: one answer
        assert out["error"] == "not-found", (name, args, out)
    kinds = [out.get("error") for _n, _a, out in answers[-4:]]
    in_private = kind in ("folder", "kmsignore", "symlink")  # a path rule hides the hidden note's folder
    assert kinds == (["folder-denied", "folder-denied"] if in_private else [None, None]) + [None, None], answers[-4:]
    assert found["zqxbody"] == [] and "open/Log.md" in found["garden"]
    assert hidden_rows(conn) == before  # still hidden, each where it was (a hidden symlink too)


async def test_nothing_hidden_is_embedded(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, embed_model_dir: Path
) -> None:
    from server.index.embed import embed_pending

    root = tmp_path / "vault"
    infos = []
    for kind in ("frontmatter", "folder", "tag", "kmsignore", "stamp"):
        sub = tmp_path / kind
        infos.append(build(sub, kind, Path(os.environ["KMS_CONFIG"])))
        for item in sub.rglob("*"):
            if item.is_file():
                dest = root / item.relative_to(sub)
                if not dest.exists() or item.name == ".kmsignore":
                    write(dest, item.read_text())
    index_vault(conn, add_vault(conn, root, "v"))
    set_hidden(conn, "Zqx title stamp", True)
    embed_pending(conn, model_dir=embed_model_dir)
    assert len(hidden_rows(conn)) == 5
    leaked = conn.execute(
        "SELECT count(*) FROM chunks c JOIN notes n ON n.rid = c.rid WHERE n.hidden_at IS NOT NULL"
        " OR c.text LIKE '%zqx%' OR c.heading LIKE '%zqx%'"
    ).fetchall()
    assert leaked == [(0,)] and conn.execute("SELECT count(*) FROM chunks").fetchall() != [(0,)]
    # hiding a note later deletes its chunks and the vectors no other chunk shares
    plans_rid = conn.execute("SELECT rid FROM notes WHERE title = 'Plans'").fetchall()[0][0]
    hashes = [h for (h,) in conn.execute("SELECT hash FROM chunks WHERE rid = ?", (plans_rid,))]
    assert hashes
    set_hidden(conn, "Plans", True)
    assert conn.execute("SELECT count(*) FROM chunks WHERE rid = ?", (plans_rid,)).fetchall() == [(0,)]
    marks = ",".join("?" * len(hashes))
    assert conn.execute(f"SELECT count(*) FROM embeddings WHERE hash IN ({marks})", hashes).fetchall() == [(0,)]
    embed_pending(conn, model_dir=embed_model_dir)  # and it is not embedded again
    assert conn.execute("SELECT count(*) FROM chunks WHERE rid = ?", (plans_rid,)).fetchall() == [(0,)]


async def test_a_running_server_sees_a_rule_change(
    conn: apsw.Connection, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server's watcher thread (as ``kms mcp`` runs it) re-judges the notes within seconds of a
    settings change made by hand (no ``kms`` command) and of a ``.kmsignore`` edit."""
    from server.config.settings import set_value
    from server.index import watcher

    monkeypatch.setattr(watcher, "RULES_CHECK_MS", 200)
    root = tmp_path / "vault"
    for rel, text in VISIBLE.items():
        write(root / rel, text)
    index_vault(conn, add_vault(conn, root, "v"))
    stop = threading.Event()
    thread = threading.Thread(target=watcher.watch_vaults, args=(db_path,), kwargs={"stop": stop}, daemon=True)
    thread.start()

    async def titles(client) -> set[str]:
        r = await client.call_tool("kms_search", {"query": "garden", "limit": 50})
        return {h["title"] for h in r.structured_content["hits"]}

    async def until(client, want: set[str]) -> set[str]:
        deadline = time.monotonic() + 10
        while (got := await titles(client)) != want and time.monotonic() < deadline:
            stop.wait(0.05)
        return got

    try:
        async with mcp_client(db_path) as client:
            assert await titles(client) == {"Home", "Plans", "Log"}
            set_value("privacy.hide_tags", ["plans"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
            assert await until(client, {"Home", "Log"}) == {"Home", "Log"}
            (root / ".kmsignore").write_text("public/\n")
            assert await until(client, {"Home"}) == {"Home"}
            (root / ".kmsignore").unlink()
            set_value("privacy.hide_tags", ["nothing"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
            assert await until(client, {"Home", "Plans", "Log"}) == {"Home", "Plans", "Log"}
    finally:
        stop.set()
        thread.join(10)


def test_a_new_server_applies_a_changed_rule_before_serving(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """``kms mcp`` re-judges the notes at start when the rules changed while no watcher ran."""
    from server.config.session_contract import SessionConfig
    from server.config.settings import set_value
    from server.mcp.serve import check_session

    root = tmp_path / "vault"
    for rel, text in VISIBLE.items():
        write(root / rel, text)
    index_vault(conn, add_vault(conn, root, "v"))
    set_value("privacy.hide_folders", ["public"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
    assert hidden_rows(conn) == []  # nothing noticed yet
    check_session(SessionConfig.from_env())
    assert hidden_rows(conn) == [("public/Log.md", "folder:public", 0)]


async def test_a_real_kms_mcp_process_sees_a_rule_change_within_seconds(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """``python -m kmscli mcp`` over stdio, as a host runs it: a rule set by hand in the settings
    file (no kms command to apply it) hides notes at the server's next rules check (~2 s)."""
    import sys

    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    from server.config.settings import set_value

    root = tmp_path / "vault"
    for rel, text in VISIBLE.items():
        write(root / rel, text)
    index_vault(conn, add_vault(conn, root, "v"))
    env = {
        "KMS_DB_PATH": str(db_path),
        "KMS_CONFIG": os.environ["KMS_CONFIG"],
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "PYTHONIOENCODING": "utf-8",
    }
    params = StdioServerParameters(command=sys.executable, args=["-m", "kmscli", "mcp"], env=env, cwd=str(tmp_path))
    async with Client(params, read_timeout_seconds=30) as client:

        async def titles() -> set[str]:
            r = await client.call_tool("kms_search", {"query": "garden", "limit": 50})
            return {h["title"] for h in r.structured_content["hits"]}

        assert await titles() == {"Home", "Plans", "Log"}
        set_value("privacy.hide_folders", ["public"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
        started = time.monotonic()
        while await titles() != {"Home", "Plans"} and time.monotonic() - started < 15:
            threading.Event().wait(0.1)
        assert await titles() == {"Home", "Plans"}
        assert time.monotonic() - started < 15
