"""``kms claude`` / ``kms doctor`` / ``kms config`` / ``kms servers`` through the real CLI.

A fake ``claude`` (a small Python script written into tmp_path) records its argv, env,
the MCP config file's content and modes while it runs, and its signal handling, into a
JSON file; the launcher is run as ``python -m kmscli claude ...`` in a subprocess.
"""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import cast

import pytest
from support.launcher import ROOT, kms, launcher_env, record
from support.waiting import until

from server.activity.session_registry import end_session, get_session, list_sessions, start_session, touch_session
from server.store.db import connect


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """A private environment: own config, DB, runtime dir and a fake claude; one vault registered."""
    return launcher_env(tmp_path)


def sessions(env: dict[str, str]) -> list:
    conn = connect(env["KMS_DB_PATH"])
    try:
        return list_sessions(conn)
    finally:
        conn.close()


def test_claude_passes_args_and_exit_code_and_records_the_session(env: dict[str, str], tmp_path: Path) -> None:
    env["FAKE_CLAUDE_EXIT"] = "3"
    run = kms(env, "claude", "--", "-p", "hello world", "--model", "x", "--print-config")
    assert run.returncode == 3, run.stderr
    assert run.stdout == "" and run.stderr == "", "the happy path prints nothing of its own"
    rec = record(env)
    path, hooks = rec["config_path"], rec["settings_path"]
    assert rec["argv"] == [
        f"--mcp-config={path}",
        f"--settings={hooks}",  # the session's hooks (docs/hooks.md), one word too
        "-p",
        "hello world",
        "--model",
        "x",
        "--print-config",
    ]
    assert rec["mode"] == 0o600 and rec["dir_mode"] == 0o700
    assert rec["settings_mode"] == rec["contract_mode"] == 0o600 and Path(hooks).parent == Path(path).parent
    assert Path(path).is_relative_to(tmp_path / "run"), "config lives in the private runtime dir"
    assert not Path(path).exists() and not Path(path).parent.exists(), "config and dir removed afterwards"
    kms_entry = rec["config"]["mcpServers"]["kms"]
    assert kms_entry["command"] == sys.executable and kms_entry["args"] == ["-E", "-P", "-m", "kmscli", "mcp"]
    assert kms_entry["env"]["KMS_DB_PATH"] == str(Path(env["KMS_DB_PATH"]).resolve())
    assert kms_entry["env"]["KMS_AGENT_TOOLS_ENABLED"] == "1"
    assert kms_entry["env"]["KMS_AGENT_WRITE_TOOLS_ENABLED"] == "0"
    assert rec["blocked"] == [], "claude must not inherit the launcher's blocked signals"
    [row] = sessions(env)
    assert row.id == kms_entry["env"]["KMS_SESSION_ID"]
    assert row.kind == "launcher" and row.exit_code == 3 and row.ended_at is not None
    assert row.argv == ["claude", "-p", "hello world", "--model", "x", "--print-config"]
    assert row.cwd == env["HOME"] or row.cwd is not None
    # the working directory is the session's identity (issue 14): on the row and in the server's env
    assert row.project == row.cwd == kms_entry["env"]["KMS_PROJECT"]
    # the hooks: SessionStart and the rest as isolated `kms hook` commands (no service here) reading the contract
    start = rec["settings"]["hooks"]["SessionStart"][0]["hooks"][0]
    assert start["type"] == "command" and start["command"].startswith(f"{sys.executable} -E -P -m kmscli hook ")
    assert start["command"].endswith(f"session-start --contract={Path(hooks).parent / 'session.json'}")
    assert set(rec["settings"]["hooks"]) == {
        "SessionStart",
        "UserPromptSubmit",
        "PostToolUse",
        "PreCompact",
        "PostCompact",
        "Stop",
        "SessionEnd",
    }
    assert rec["contract"] == {k: v for k, v in kms_entry["env"].items()}  # the server's own contract


def test_unknown_options_pass_through_without_dashdash(env: dict[str, str]) -> None:
    run = kms(env, "claude", "-c", "--resume", "abc")
    assert run.returncode == 0, run.stderr
    assert record(env)["argv"][2:] == ["-c", "--resume", "abc"]
    assert record(env)["argv"][0].startswith("--mcp-config="), "one word: nothing after it is read as its value"


def test_a_bare_prompt_is_never_read_as_a_config_file(env: dict[str, str]) -> None:
    run = kms(env, "claude", "summarize my notes")
    assert run.returncode == 0, run.stderr
    rec = record(env)
    assert rec["argv"] == [
        f"--mcp-config={rec['config_path']}",
        f"--settings={rec['settings_path']}",
        "summarize my notes",
    ]


def test_write_flag_overrides_for_one_session(env: dict[str, str]) -> None:
    assert kms(env, "config", "set", "write.allowlist", "inbox").returncode == 0
    assert kms(env, "claude", "--write").returncode == 0
    assert record(env)["config"]["mcpServers"]["kms"]["env"]["KMS_AGENT_WRITE_TOOLS_ENABLED"] == "1"
    assert kms(env, "config", "set", "agent.write", "true").returncode == 0
    assert kms(env, "claude", "--no-write").returncode == 0
    assert record(env)["config"]["mcpServers"]["kms"]["env"]["KMS_AGENT_WRITE_TOOLS_ENABLED"] == "0"
    assert kms(env, "config", "get", "agent.write").stdout.strip() == "true", "--no-write is not saved"
    # --write under a parent that is off: claude still starts, with a warning
    assert kms(env, "config", "set", "agent.read", "off").returncode == 0
    run = kms(env, "claude", "--write")
    assert run.returncode == 0 and "agent.read is off" in run.stderr


def test_kms_left_out_when_agents_may_not_read(env: dict[str, str]) -> None:
    rows = {r["name"]: r for r in json.loads(kms(env, "servers", "list", "--json").stdout)}
    assert rows["kms"]["enabled"] is True and rows["kms"]["args"] == ["-E", "-P", "-m", "kmscli", "mcp"]
    assert kms(env, "config", "set", "agent.read", "off").returncode == 0
    rows = {r["name"]: r for r in json.loads(kms(env, "servers", "list", "--json").stdout)}
    assert rows["kms"]["enabled"] is False and rows["kms"]["args"][-1] == "mcp", "off, and what it would run"
    assert kms(env, "claude", "--", "x").returncode == 0
    assert record(env)["argv"] == ["x"], "no kms block (and no other server): no --mcp-config at all"
    kms(env, "servers", "enable", "playwright")
    assert kms(env, "claude").returncode == 0
    assert list(record(env)["config"]["mcpServers"]) == ["playwright"]


def test_a_bad_kms_variable_stops_the_launcher_before_claude(env: dict[str, str]) -> None:
    for var, value in (("KMS_WRITE_PER_MINUTE", "0"), ("KMS_AGENT_WRITE", "1")):
        run = kms({**env, var: value}, "claude", "--", "x")
        assert run.returncode == 2 and var in run.stderr and "Traceback" not in run.stderr
        assert not Path(env["FAKE_CLAUDE_RECORD"]).exists(), "claude was not started"


def test_isolated_leaves_kms_out(env: dict[str, str]) -> None:
    run = kms(env, "claude", "--isolated", "--", "x")
    assert run.returncode == 0, run.stderr
    assert record(env)["argv"] == ["x"], "no servers: no --mcp-config at all"
    kms(env, "servers", "enable", "playwright")
    assert kms(env, "claude", "--isolated").returncode == 0
    assert list(record(env)["config"]["mcpServers"]) == ["playwright"]


def test_vault_option_scopes_the_session(env: dict[str, str], tmp_path: Path) -> None:
    env["KMS_SERVERS_FILESYSTEM_ENABLED"] = "1"
    assert kms(env, "claude", "--vault", "notes").returncode == 0
    servers = record(env)["config"]["mcpServers"]
    assert servers["kms"]["env"]["KMS_VAULT"] == "notes"
    assert servers["filesystem"]["args"][-1] == str((tmp_path / "vault").resolve())
    assert sessions(env)[0].vault == "notes"
    run = kms(env, "claude", "--vault", "nope")
    assert run.returncode == 2 and "nope" in run.stderr


def test_print_config_redacts_and_does_not_launch(env: dict[str, str]) -> None:
    run = kms(env, "servers", "add", "gh", "--env", "GITHUB_TOKEN=ghp_supersecret", "--", "npx", "-y", "gh-mcp")
    assert run.returncode == 0, run.stderr
    assert "ghp_supersecret" not in run.stdout
    run = kms(env, "servers", "add", "docs", "--url", "https://d.test/mcp", "--header", "Authorization: Bearer abc")
    assert run.returncode == 0, run.stderr
    run = kms(env, "claude", "--print-config")
    assert run.returncode == 0, run.stderr
    doc = json.loads(run.stdout)
    assert set(doc["mcpServers"]) == {"kms", "gh", "docs"}
    assert doc["mcpServers"]["gh"]["env"]["GITHUB_TOKEN"] == "***"
    assert doc["mcpServers"]["docs"] == {
        "type": "http",
        "url": "https://d.test/mcp",
        "headers": {"Authorization": "***"},
    }
    assert "supersecret" not in run.stdout and "Bearer abc" not in run.stdout
    assert not Path(env["FAKE_CLAUDE_RECORD"]).exists(), "claude was not started"
    assert sessions(env) == []
    # the real session file does carry the secret (claude needs it), privately
    assert kms(env, "claude").returncode == 0
    assert record(env)["config"]["mcpServers"]["gh"]["env"]["GITHUB_TOKEN"] == "ghp_supersecret"


def test_missing_claude_is_127_with_install_hint(env: dict[str, str], tmp_path: Path) -> None:
    del env["KMS_CLAUDE_BIN"]
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    env["PATH"] = str(empty)
    run = kms(env, "claude")
    assert run.returncode == 127
    assert "npm install -g @anthropic-ai/claude-code" in run.stderr
    assert sessions(env) == [], "no session without claude"
    env["KMS_CLAUDE_BIN"] = str(tmp_path / "nope")
    run = kms(env, "claude")
    assert run.returncode == 127 and "KMS_CLAUDE_BIN" in run.stderr


def test_claude_found_on_path(env: dict[str, str], tmp_path: Path) -> None:
    del env["KMS_CLAUDE_BIN"]
    env["PATH"] = f"{tmp_path / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    assert kms(env, "claude", "--", "hi").returncode == 0
    assert record(env)["argv"][-1] == "hi"


def test_claude_killed_by_signal_is_mirrored(env: dict[str, str]) -> None:
    env["FAKE_CLAUDE_KILL_SELF"] = "1"
    run = kms(env, "claude")
    assert run.returncode == -signal.SIGTERM, "the launcher dies of the same signal"
    [row] = sessions(env)
    assert row.exit_code == 128 + signal.SIGTERM and row.ended_at is not None
    assert not Path(record(env)["config_path"]).exists()


def _record_or_empty(env: dict[str, str]) -> dict:
    try:
        return record(env)
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def _wait_ready(env: dict[str, str], proc: subprocess.Popen | None = None, timeout: float = 30) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            rec = record(env)
            if rec.get("ready"):
                return rec
        except (FileNotFoundError, json.JSONDecodeError):
            pass
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"launcher exited early: {proc.returncode}")
        time.sleep(0.05)
    raise AssertionError("fake claude never became ready")


def test_signals_sent_to_the_launcher_are_forwarded(env: dict[str, str]) -> None:
    env.update(FAKE_CLAUDE_WAIT="1", FAKE_CLAUDE_EXIT="42")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "claude"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        rec = _wait_ready(env, proc)
        assert Path(rec["config_path"]).exists()
        proc.send_signal(signal.SIGWINCH)
        proc.send_signal(signal.SIGHUP)
        # both reached claude (forwarded) before the SIGTERM that ends it
        until(lambda: {"SIGWINCH", "SIGHUP"} <= set(_record_or_empty(env).get("signals", [])), what="forwarded")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 42
    finally:
        if proc.poll() is None:
            proc.kill()
    rec = record(env)
    assert sorted(rec["signals"][:2]) == ["SIGHUP", "SIGWINCH"] and rec["signals"][2] == "SIGTERM"
    assert rec["signals"].count("SIGTERM") == 1
    assert set(rec["senders"]) == {proc.pid}, "forwarded by the launcher"
    assert not Path(rec["config_path"]).exists()
    assert sessions(env)[0].exit_code == 42


def test_an_interactive_session_ends_saying_how_to_resume_it_with_kms(env: dict[str, str]) -> None:
    """On a terminal, kms names the new conversation (--session-id) and, at its end, says
    `kms claude --resume ID` (claude's own hint names the removed config file)."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            os.execve(sys.executable, [sys.executable, "-m", "kmscli", "claude"], env)
        finally:
            os._exit(99)
    out = b""
    try:
        deadline = time.time() + 30
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    out += os.read(master, 4096)
                except OSError:
                    break
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
    finally:
        os.close(master)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, out
    argv = record(env)["argv"]
    assert argv[0].startswith("--mcp-config=") and argv[1].startswith("--settings=")
    assert argv[2].startswith("--session-id=")
    conversation = argv[2].split("=", 1)[1]
    assert f"kms claude --resume {conversation}" in out.decode(errors="replace").replace("\r\n", " ")


def test_new_conversation_ids_only_when_kms_should_pick_them() -> None:
    from kmscli.launcher import new_conversation_id

    assert new_conversation_id([], interactive=True)
    assert new_conversation_id(["--model", "x"], interactive=True)
    for args in (["-p", "hi"], ["--resume", "abc"], ["--resume=abc"], ["-c"], ["--session-id", "u"]):
        assert new_conversation_id(args, interactive=True) is None, args
    assert new_conversation_id([], interactive=False) is None


def test_terminal_ctrl_c_reaches_claude_once(env: dict[str, str]) -> None:
    """Ctrl-C on the terminal already signals claude; the launcher must not send a second one."""
    env.update(FAKE_CLAUDE_WAIT="1", FAKE_CLAUDE_EXIT="130")
    pid, master = pty.fork()
    if pid == 0:  # child: becomes the session leader of the new terminal
        try:
            os.execve(sys.executable, [sys.executable, "-m", "kmscli", "claude"], env)
        finally:
            os._exit(99)
    try:
        _wait_ready(env)
        # the launcher is in its forwarding loop now (the kernel's wait for a signal), as when a person types
        until(lambda: "sigtimedwait" in Path(f"/proc/{pid}/wchan").read_text(), what="the launcher forwarding")
        os.write(master, b"\x03")  # the terminal's INTR character
        deadline = time.time() + 30
        status = None
        while time.time() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    os.read(master, 4096)
                except OSError:
                    pass
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
        assert status is not None and os.WIFEXITED(status), status
        assert os.WEXITSTATUS(status) == 130
    finally:
        os.close(master)
        try:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass
    rec = record(env)
    assert rec["signals"] == ["SIGINT"] and rec["senders"] == ["kernel"]


def test_session_rows_api(tmp_path: Path) -> None:
    conn = connect(tmp_path / "kms.db")
    sid = start_session(conn, kind="launcher", argv=["claude", "-c"], vault="v", now=100.0)
    touch_session(conn, sid, now=150.0)  # the kms server reporting in keeps the launcher's row
    row = get_session(conn, sid)
    assert row is not None and row.kind == "launcher" and row.last_seen_at == 150.0 and row.active
    touch_session(conn, "sother", vault="w", now=160.0)  # a server started by another host
    other = get_session(conn, "sother")
    assert other is not None and other.kind == "server"
    assert [s.id for s in list_sessions(conn, active=True)] == ["sother", sid]
    assert end_session(conn, sid, 5, now=200.0) is True
    assert end_session(conn, "missing", 0) is False
    row = get_session(conn, sid)
    assert row is not None
    assert (row.ended_at, row.exit_code, row.argv) == (200.0, 5, ["claude", "-c"])
    assert [s.id for s in list_sessions(conn, active=False)] == [sid]
    assert [s.id for s in list_sessions(conn, kind="server")] == ["sother"]
    with pytest.raises(ValueError):
        start_session(conn, kind="robot")
    conn.close()


def test_doctor_reports(env: dict[str, str]) -> None:
    run = kms(env, "doctor", "--json")
    report = json.loads(run.stdout)
    assert report["claude"]["path"] == env["KMS_CLAUDE_BIN"]
    assert [v["name"] for v in report["database"]["vaults"]] == ["notes"]
    assert report["settings"]["path"] == env["KMS_CONFIG"]
    assert "kms" in report["session_servers"]
    assert "model" in report
    assert report["tiers"] == {"read": True, "write": False, "edit": False, "organize": False}
    text = kms(env, "doctor")
    assert "vault notes" in text.stdout and "sessions get: kms" in text.stdout
    assert "agent tiers: read on write off edit off organize off" in text.stdout
    on = {**env, "KMS_AGENT_WRITE_TOOLS_ENABLED": "1", "KMS_AGENT_EDIT_TOOLS_ENABLED": "1"}
    assert json.loads(kms(on, "doctor", "--json").stdout)["tiers"] == {
        "read": True,
        "write": True,
        "edit": True,
        "organize": False,
    }
    listing = {e["key"]: e for e in json.loads(kms(on, "config", "list", "--json").stdout)["settings"]}
    assert listing["agent.edit"]["value"] is True and listing["agent.organize"]["value"] is False
    assert listing["agent.edit"]["source"] == "env"


def test_config_cli(env: dict[str, str], tmp_path: Path) -> None:
    run = kms(env, "config", "set", "write.alowlist", "x")
    assert run.returncode == 2 and "write.allowlist" in run.stderr
    run = kms(env, "config", "set", "write.per_minute", "-5")
    assert run.returncode == 2 and "1 to 10000" in run.stderr
    cwd = tmp_path / "home"
    (cwd / "drafts").mkdir(parents=True)
    (cwd / "drafts" / "a.md").write_text("x")
    (cwd / "drafts" / "b.md").write_text("x")
    run = kms(env, "config", "set", "write.allowlist", "drafts/a.md", "drafts/b.md", cwd=cwd)
    assert run.returncode == 0 and "kms config set write.allowlist 'drafts/*'" in run.stderr
    assert kms(env, "config", "get", "write.allowlist").stdout.split() == ["drafts/a.md", "drafts/b.md"]
    assert kms(env, "config", "path").stdout.strip() == env["KMS_CONFIG"]
    listing = json.loads(kms(env, "config", "list", "--json").stdout)
    by_key = {s["key"]: s for s in listing["settings"]}
    assert by_key["write.allowlist"]["source"] == "file" and by_key["agent.read"]["auto"] is True
    env["KMS_WRITE_PER_MINUTE"] = "3"
    got = json.loads(kms(env, "config", "get", "write.per_minute", "--json").stdout)
    assert (got["value"], got["source"]) == (3, "env")
    assert kms(env, "config", "unset", "write.allowlist").returncode == 0
    assert kms(env, "config", "get", "write.allowlist").stdout == ""
    # edit: a non-interactive "editor" appends a line
    editor = tmp_path / "ed.sh"
    editor.write_text('#!/bin/sh\nprintf "\\n[write]\\nper_session = 5\\n" >> "$1"\n')
    editor.chmod(0o755)
    env["EDITOR"] = str(editor)
    assert kms(env, "config", "edit").returncode == 0
    assert kms(env, "config", "get", "write.per_session").stdout.strip() == "5"
    assert stat.S_IMODE(Path(env["KMS_CONFIG"]).stat().st_mode) == 0o600


def test_servers_cli(env: dict[str, str]) -> None:
    assert kms(env, "servers", "add", "x").returncode == 2
    assert kms(env, "servers", "add", "kms", "--", "a").returncode == 2
    assert kms(env, "servers", "add", "w", "--url", "https://w.test", "--env", "A=1").returncode == 2
    assert kms(env, "servers", "add", "s", "--env", "T=1", "--", "run", "--flag").returncode == 0
    rows = {r["name"]: r for r in json.loads(kms(env, "servers", "list", "--json").stdout)}
    assert set(rows) == {"kms", "playwright", "filesystem", "s"}
    assert rows["s"] == {**rows["s"], "enabled": True, "builtin": False, "command": "run", "args": ["--flag"]}
    assert rows["playwright"]["enabled"] is False
    assert kms(env, "servers", "disable", "s").returncode == 0
    assert kms(env, "servers", "enable", "playwright").returncode == 0
    run = kms(env, "servers", "enable", "playwrite")
    assert run.returncode == 2 and "playwright" in run.stderr
    rows = {r["name"]: r for r in json.loads(kms(env, "servers", "list", "--json").stdout)}
    assert rows["s"]["enabled"] is False and rows["playwright"]["enabled"] is True
    assert kms(env, "servers", "remove", "playwright").returncode == 2
    assert kms(env, "servers", "remove", "s").returncode == 0
    assert kms(env, "servers", "remove", "s").returncode == 2


def test_completions_current() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_completions.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr


def test_completion_protocol_matches_the_cli(env: dict[str, str]) -> None:
    """The generated scripts call ``kms`` with _KMS_COMPLETE; the CLI must answer with real candidates."""
    assert "_KMS_COMPLETE=complete_bash" in (ROOT / "completions" / "kms.bash").read_text()

    def complete(words: str) -> list[str]:
        e = {
            **env,
            "_KMS_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(words.split()) - 1),
        }
        if words.endswith(" "):
            e["COMP_CWORD"] = str(len(words.split()))
        return kms(
            e,
        ).stdout.split()

    assert "config" in complete("kms con")
    assert "write.allowlist" in complete("kms config set write.")
    assert "playwright" in complete("kms servers enable pl")


def test_stale_session_configs_are_swept(env: dict[str, str], monkeypatch) -> None:
    """A launcher killed with SIGKILL leaves its (maybe secret-bearing) config; the next start removes it."""
    from kmscli.compose import write_session_config

    monkeypatch.setenv("XDG_RUNTIME_DIR", env["XDG_RUNTIME_DIR"])
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    conn = connect(env["KMS_DB_PATH"])
    ended = start_session(conn, pid=os.getpid())
    end_session(conn, ended, 0)
    crashed = start_session(conn, pid=dead.pid)
    alive = start_session(conn, pid=os.getpid())
    conn.close()
    doc = {"mcpServers": {"x": {"command": "y", "env": {"TOKEN": "t"}}}}
    # (a doc with a server is always written: a path each)
    paths = {sid: cast(Path, write_session_config(doc, sid)) for sid in (ended, crashed, alive, "sunrecorded")}
    assert kms(env, "claude").returncode == 0
    assert not paths[ended].exists() and not paths[ended].parent.exists()
    assert not paths[crashed].exists()
    assert paths[alive].exists(), "a running session's config is left alone"
    assert paths["sunrecorded"].exists(), "a fresh unrecorded one may belong to a launcher starting up"
