"""End to end with the REAL Claude Code CLI: settings -> composition -> private config file ->
spawn -> ``kms mcp`` -> vault, driven by a local stand-in for the Anthropic Messages API.

Claude exits 0 even when a tool is denied or a server fails, so the test asserts on effects:
the tool result the stand-in received and the read-tracking row in the database.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from support.claude_cli import claude_bin, claude_env, claude_print_args, run_headless, stream_events
from support.fake_anthropic import FakeAnthropic
from support.sql import value

pytestmark = pytest.mark.e2e


@pytest.mark.timeout(240)
def test_kms_claude_runs_real_claude_that_searches_the_vault(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    claude = claude_bin()  # installed by scripts/test.sh (scripts/fetch_claude.sh); missing = failure
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with FakeAnthropic(query="auth error handling") as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
        )
        proc = run_headless(
            [sys.executable, "-m", "kmscli", "claude", "--", *claude_print_args("Find my notes on auth errors")],
            env=env,
            cwd=work,
        )
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}\nstdout:\n{proc.stdout[-3000:]}"
    assert proc.returncode == 0, debug
    events = stream_events(proc.stdout)
    init = next(e for e in events if e.get("subtype") == "init")  # (hooks answer as system events first)
    assert {"name": "kms", "status": "connected"}.items() <= init["mcp_servers"][0].items(), debug
    assert api.tool_results, "no tool_result reached the API\n" + debug
    result = api.tool_results[-1]
    assert not result.is_error, result.text
    assert "Auth service error handling" in result.text

    session = indexed.execute("SELECT id, exit_code, ended_at FROM sessions WHERE kind = 'launcher'").fetchall()
    assert len(session) == 1 and session[0][1] == 0 and session[0][2] is not None
    searched = indexed.execute("SELECT tool, query FROM session_searches WHERE session_id = ?", (session[0][0],))
    assert ("kms_search", "auth error handling") in searched.fetchall(), "the search, under the launcher's session"
    reads = indexed.execute("SELECT count(*) FROM note_reads WHERE session_id = ?", (session[0][0],)).fetchall()
    assert reads == [(0,)], "search hits are not notes read (issue 32)"
    assert not list(work.iterdir()), "nothing may be written to the working directory"


@pytest.mark.timeout(300)
def test_kms_claude_resume_gets_a_fresh_config_and_the_old_conversation(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    """`kms claude -p PROMPT` (no `--`: the prompt is never read as a config file), then
    `kms claude --resume ID` and `kms claude --continue`: each resumed session reaches kms through its
    own new config (the first one's was removed when it ended)."""
    claude = claude_bin()
    home = tmp_path / "home"
    home.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    with FakeAnthropic(query="auth error handling") as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
        )

        def kms_claude(*args: str) -> subprocess.CompletedProcess[str]:
            return run_headless(
                [sys.executable, "-m", "kmscli", "claude", *args],
                env=env,
                cwd=work,
            )

        first = kms_claude(*claude_print_args("summarize my notes"))
        debug = f"{api.describe()}\nstderr:\n{first.stderr[-3000:]}\nstdout:\n{first.stdout[-2000:]}"
        assert first.returncode == 0, debug
        init = next(
            e for e in stream_events(first.stdout) if e.get("subtype") == "init"
        )  # (hooks answer as system events first)
        session_id = init["session_id"]
        asked = len(api.message_requests)
        second = kms_claude("--resume", session_id, *claude_print_args("and once more"))
        debug = f"{api.describe()}\nstderr:\n{second.stderr[-3000:]}\nstdout:\n{second.stdout[-2000:]}"
        resumed = api.message_requests[asked:]
        third = kms_claude("--continue", *claude_print_args("and a third time"))
    assert second.returncode == 0, debug
    assert third.returncode == 0, third.stderr[-3000:]
    init3 = next(
        e for e in stream_events(third.stdout) if e.get("subtype") == "init"
    )  # (hooks answer as system events first)
    assert {"name": "kms", "status": "connected"}.items() <= init3["mcp_servers"][0].items(), third.stdout
    assert init3["session_id"] != "" and len(api.tool_results) == 3
    init2 = next(
        e for e in stream_events(second.stdout) if e.get("subtype") == "init"
    )  # (hooks answer as system events first)
    assert {"name": "kms", "status": "connected"}.items() <= init2["mcp_servers"][0].items(), debug
    assert not api.tool_results[1].is_error, debug
    assert any("summarize my notes" in json.dumps(r.body) for r in resumed), "the old conversation came back"
    assert value(indexed, "SELECT count(*) FROM sessions WHERE kind = 'launcher' AND exit_code = 0") == 3


@pytest.mark.timeout(300)
def test_kms_claude_approve_waits_for_the_person(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    """`kms claude --write --approve`: the real Claude Code calls kms_create, kms stages it (nothing written),
    the test plays the person with `kms approve ID` in another process, and the call returns the real result."""
    import time

    from server.activity import approvals

    claude = claude_bin()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    vault_root = Path(value(indexed, "SELECT root FROM vaults"))
    target = vault_root / "inbox" / "Approved by the person.md"
    note = {"title": "Approved by the person", "folder": "inbox", "content": "written only after kms approve"}
    with FakeAnthropic(tool_name="mcp__kms__kms_create", tool_input=note) as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
        )
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "kmscli",
                "claude",
                "--write",
                "--approve",
                "--",
                *claude_print_args("File a note in my inbox"),
            ],
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 200
            while not (waiting := approvals.list_pending(indexed)):
                assert proc.poll() is None, f"claude ended before staging anything\n{api.describe()}"
                assert time.monotonic() < deadline, f"nothing was staged\n{api.describe()}"
                time.sleep(0.1)
            assert waiting[0].tool == "kms_create" and not target.exists()  # staged, not written
            approve = subprocess.run(
                [sys.executable, "-m", "kmscli", "approve", str(waiting[0].id)],
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert approve.returncode == 0, approve.stderr
            stdout, stderr = proc.communicate(timeout=200)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{stderr[-3000:]}\nstdout:\n{stdout[-3000:]}"
    assert proc.returncode == 0, debug
    assert api.tool_results and not api.tool_results[-1].is_error, debug
    assert "inbox/Approved by the person.md" in api.tool_results[-1].text, debug
    assert "written only after kms approve" in target.read_text()
    rows = indexed.execute("SELECT tool, actor, status FROM tool_invocations ORDER BY id").fetchall()
    assert rows == [("approve", "person", "success"), ("kms_create", "agent", "success")]
    session = value(indexed, "SELECT id FROM sessions WHERE kind = 'launcher'")
    pending = approvals.get(indexed, waiting[0].id)
    assert pending is not None and pending.session_id == session
