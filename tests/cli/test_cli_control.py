"""``kms pending|approve|reject`` and ``kms session list|pause|resume|revoke|undo`` in process, and a running
``kms mcp`` subprocess obeying them through the database."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
import apsw
from support.cli import kms, ok, refused, said
from support.mcp_stdio import stdio_server
from support.vaults import note_id

from server.activity import approvals
from server.activity.session_registry import start_session

if TYPE_CHECKING:
    from mcp_types import CallToolResult


def _runner(db_path: Path, **config: object):  # -> ToolRunner
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner

    cfg = SessionConfig.from_env(
        {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]},
        watch=False,
        write_enabled=True,
        edit_enabled=True,
        **config,
    )
    return ToolRunner(cfg)


def test_pending_approve_applies_the_staged_write(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    runner = _runner(db_path, approval="always")
    spec = runner.by_name["kms_append"]
    args = {"noteId": note_id(indexed, "Home"), "content": "from the agent"}
    try:
        staged = runner.writes.stage(spec, args)
        assert staged is not None
        listed = json.loads(ok(kms("pending", "--json")).stdout)
        assert [p["id"] for p in listed] == [staged.id] and listed[0]["tool"] == "kms_append"
        assert "+from the agent" in listed[0]["files"][0]["diff"]
        shown = said(ok(kms("pending")).stdout)
        assert f"#{staged.id} kms_append" in shown and "+from the agent" in shown
        assert "approved" in ok(kms("approve", str(staged.id))).stdout
        assert approvals.get(indexed, staged.id).channel == "cli"  # type: ignore[union-attr]
        refused(kms("approve", str(staged.id)), 1)  # decided already: a clear conflict, not a traceback
        result = runner.writes.settle(spec, args, staged, runner.writes.decision(staged))
    finally:
        runner.close()
    assert result["changed"] is True
    assert "from the agent" in (vault_dir / "Home.md").read_text()
    assert "Nothing waits" in ok(kms("pending")).stdout


def test_reject_with_reason_and_unknown_ids(indexed: apsw.Connection, db_path: Path, vault_dir: Path) -> None:
    runner = _runner(db_path, approval="always")
    spec = runner.by_name["kms_append"]
    args = {"noteId": note_id(indexed, "Home"), "content": "unwanted"}
    before = (vault_dir / "Home.md").read_bytes()
    try:
        staged = runner.writes.stage(spec, args)
        assert staged is not None
        out = json.loads(ok(kms("reject", str(staged.id), "--reason", "wrong note", "--json")).stdout)
        assert out["status"] == "rejected" and out["reason"] == "wrong note"
        decision = runner.writes.decision(staged)
        assert decision is not None
        try:
            runner.writes.settle(spec, args, staged, decision)
            raise AssertionError("a rejected call must not succeed")
        except Exception as e:  # KmsError
            assert getattr(e, "kind", None) == "rejected" and "wrong note" in str(e)
    finally:
        runner.close()
    assert (vault_dir / "Home.md").read_bytes() == before
    assert "no pending change #999" in said(refused(kms("approve", "999"), 3).stderr)


def test_session_list_pause_resume_revoke(indexed: apsw.Connection, db_path: Path) -> None:
    sid = start_session(indexed, kind="server")
    assert sid in ok(kms("session", "list")).stdout
    ok(kms("session", "pause", sid, "--reason", "lunch"))
    listed = {s["id"]: s for s in json.loads(ok(kms("session", "list", "--json")).stdout)}
    assert listed[sid]["control"] == "paused"
    assert {k: listed[sid][k] for k in ("calls", "refused", "reads", "pending")} == {
        "calls": 0,
        "refused": 0,
        "reads": 0,
        "pending": 0,
    }
    ok(kms("session", "resume", sid))
    ok(kms("session", "revoke", sid))
    assert "revoked for good" in said(refused(kms("session", "resume", sid)).stderr)
    assert "no session" in said(refused(kms("session", "pause", "s000000000000"), 3).stderr)
    listed = {s["id"]: s for s in json.loads(ok(kms("session", "list", "--json")).stdout)}
    assert listed[sid]["control"] == "revoked"


def test_session_undo_restores_bytes_and_lists_what_it_skips(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    home, other = vault_dir / "Home.md", vault_dir / "reference" / "Shakshuka.md"
    before_home = home.read_bytes()
    runner = _runner(db_path)
    sid = runner.config.session_id
    start_session(indexed, kind="server", session_id=sid)
    try:
        for text in ("agent line alpha", "agent line beta"):
            res, err = runner.call("kms_append", {"noteId": note_id(indexed, "Home"), "content": text})
            assert not err, res
        res, err = runner.call("kms_create", {"title": "Fresh", "content": "new note"})
        assert not err, res
        read, _ = runner.call("kms_read", {"noteId": note_id(indexed, "Home")})
        edit = {"replace": {"old": "agent line alpha", "new": "AGENT LINE ALPHA"}}
        res, err = runner.call(
            "kms_edit", {"noteId": note_id(indexed, "Home"), "version": read["version"], "edits": [edit]}
        )
        assert not err, res
        res, err = runner.call("kms_append", {"noteId": note_id(indexed, "Shakshuka"), "content": "agent tip"})
        assert not err, res
    finally:
        runner.close()
    # the person rewrites the agent's text in the other note: that change cannot be undone
    other.write_text(other.read_text().replace("agent tip", "my own tip"))
    shown = said(kms("session", "undo", sid, input="n\n").stdout)
    assert "✗" in shown and "Shakshuka" in shown and "✓" in shown
    done = json.loads(ok(kms("session", "undo", sid, "--yes", "--json")).stdout)
    assert len(done["reverted"]) == 4 and [s["path"] for s in done["skipped"]] == ["reference/Shakshuka.md"]
    assert home.read_bytes() == before_home
    assert not (vault_dir / "Fresh.md").exists()
    assert "my own tip" in other.read_text()
    rows = indexed.execute("SELECT actor, count(*) FROM tool_invocations WHERE tool = 'revert' GROUP BY actor")
    assert rows.fetchall() == [("person", 4)]


async def test_running_server_obeys_cli_pause_resume_revoke(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    sid = "s0123456789ab"
    nid = note_id(indexed, "Home")
    async with stdio_server(db_path, tmp_path, KMS_AGENT_WRITE_TOOLS_ENABLED="1", KMS_SESSION_ID=sid) as client:
        assert not (await client.call_tool("kms_append", {"noteId": nid, "content": "zz-first"})).is_error
        ok(kms("session", "pause", sid))
        paused = await client.call_tool("kms_append", {"noteId": nid, "content": "zz-second"})
        assert paused.structured_content["error"] == "paused"
        ok(kms("session", "resume", sid))
        assert not (await client.call_tool("kms_append", {"noteId": nid, "content": "zz-third"})).is_error
        ok(kms("session", "revoke", sid))
        revoked = await client.call_tool("kms_append", {"noteId": nid, "content": "zz-fourth"})
        assert revoked.structured_content["error"] == "revoked"
        assert not (await client.call_tool("kms_read", {"noteId": nid})).is_error
    text = (vault_dir / "Home.md").read_text()
    assert "zz-first" in text and "zz-third" in text and "zz-second" not in text and "zz-fourth" not in text


async def test_running_server_waits_for_kms_approve(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, vault_dir: Path
) -> None:
    nid = note_id(indexed, "Home")
    results: dict[str, CallToolResult] = {}
    async with stdio_server(
        db_path, tmp_path, KMS_AGENT_WRITE_TOOLS_ENABLED="1", KMS_WRITE_APPROVAL="always"
    ) as client:

        async def agent() -> None:
            results["r"] = await client.call_tool("kms_append", {"noteId": nid, "content": "needs a yes"})

        async with anyio.create_task_group() as tg:
            tg.start_soon(agent)
            with anyio.fail_after(20):
                while not approvals.list_pending(indexed):
                    await anyio.sleep(0.05)
            assert "needs a yes" not in (vault_dir / "Home.md").read_text()
            ok(kms("approve", str(approvals.list_pending(indexed)[0].id)))
    assert not results["r"].is_error, results["r"].structured_content
    assert "needs a yes" in (vault_dir / "Home.md").read_text()


def test_doctor_lists_pending_and_settings_validate(indexed: apsw.Connection, db_path: Path) -> None:
    runner = _runner(db_path, approval="always")
    try:
        staged = runner.writes.stage(
            runner.by_name["kms_append"], {"noteId": note_id(indexed, "Home"), "content": "waits"}
        )
    finally:
        runner.close()
    assert staged is not None
    shown = said(kms("doctor").stdout)
    assert "1 write(s) wait for your approval" in shown and f"#{staged.id} kms_append" in shown
    report = json.loads(kms("doctor", "--json").stdout)
    assert [p["id"] for p in report["pending"]] == [staged.id] and report["pending"][0]["files"] == ["Home.md"]
    assert "off, bulk or always" in said(refused(kms("config", "set", "write.approval", "sometimes")).stderr)
    ok(kms("config", "set", "write.approval", "bulk"))
    assert "bulk" in ok(kms("config", "get", "write.approval")).stdout


def test_kms_claude_approve_carries_always_in_the_session_contract(indexed: apsw.Connection) -> None:
    doc = json.loads(ok(kms("claude", "--write", "--approve", "--print-config")).stdout)
    env = doc["mcpServers"]["kms"]["env"]
    assert env["KMS_WRITE_APPROVAL"] == "always" and env["KMS_AGENT_WRITE_TOOLS_ENABLED"] == "1"
    plain = json.loads(ok(kms("claude", "--write", "--print-config")).stdout)
    assert plain["mcpServers"]["kms"]["env"]["KMS_WRITE_APPROVAL"] == "off"
    assert plain["mcpServers"]["kms"]["env"]["KMS_WRITE_APPROVAL_CHANNEL"] == "both"  # the host asks too


def test_kms_claude_print_mode_leaves_approvals_to_the_dashboard(indexed: apsw.Connection) -> None:
    """``claude -p`` answers every dialog with cancel: its session decides approvals in the dashboard."""
    for words in (("-p", "hello"), ("--print", "hello")):
        doc = json.loads(ok(kms("claude", "--write", "--approve", "--print-config", *words)).stdout)
        assert doc["mcpServers"]["kms"]["env"]["KMS_WRITE_APPROVAL_CHANNEL"] == "dashboard"


def test_session_list_n_limits_rows_and_lists_no_phantom_writers(indexed: apsw.Connection) -> None:
    """`kms session list -n 3` printed 10 rows: every session past the limit that had written came back as
    a `? idle ?` row of its own."""
    from server.activity.ratelimit import RateLimiter

    limiter = RateLimiter()
    for n in range(10):
        sid = start_session(indexed, kind="server", now=1_000_000 + n)
        limiter.acquire(indexed, sid)
    listed = json.loads(ok(kms("session", "list", "-n", "3", "--json")).stdout)
    assert len(listed) == 3 and all(s["kind"] == "server" for s in listed)
    table = ok(kms("session", "list", "-n", "3")).stdout.splitlines()
    assert len(table) == 2 + 3 and all(line.split()[0] in {s["id"] for s in listed} for line in table[2:]), table


def test_tables_never_cut_a_value_a_person_types_next(tmp_path: Path, db_path: Path) -> None:
    """At 80 columns (a terminal, or any pipe) `kms vault list` cut vault names and paths (`kepano-obsidi…`):
    a table too wide is shown a row a block, each value whole on its own line."""
    root = tmp_path / "a-folder-name-long-enough-to-need-a-line-of-its-own" / "and-deeper-still-for-the-path"
    root.mkdir(parents=True)
    (root / "a.md").write_text("# a\n")
    name = "kepano-obsidian-help-vault-with-a-long-name"
    ok(kms("vault", "add", str(root), "--name", name))
    out = ok(kms("vault", "list", COLUMNS="80")).stdout
    lines = out.splitlines()
    assert name in lines and "  root: " in lines and "…" not in out and max(map(len, lines)) <= 80
    at = lines.index("  root: ") + 1
    assert "".join(lines[at : at + 3]).startswith(str(root)), "the path on lines of its own, folded only"


def test_service_sessions_are_listed_under_their_tokens_label(indexed: apsw.Connection) -> None:
    """A session the service opened for a token read as an anonymous `server` session; the `k` screen alone
    mapped it to its token."""
    from server.activity import tokens
    from server.config.scopes import Scopes

    token, _ = tokens.create(indexed, label="host:cursor", scopes=Scopes.parse("tier:write"), kind="host")
    start_session(indexed, kind="server", session_id=token.session_id)
    plain = start_session(indexed, kind="server")
    listed = {s["id"]: s for s in json.loads(ok(kms("session", "list", "--json")).stdout)}
    assert listed[token.session_id]["label"] == "host:cursor" and listed[plain]["label"] is None
    assert "host:cursor" in ok(kms("session", "list")).stdout
