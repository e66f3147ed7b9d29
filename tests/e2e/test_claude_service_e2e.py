"""End to end with the REAL Claude Code CLI served by the kms service over HTTP: ``kms claude`` finds the
service down, starts it (health-checked), mints a token for its one session, hands claude an HTTP entry
whose header expands ``$KMS_SESSION_TOKEN``, and revokes the token when claude exits. The Messages API is
the local stand-in (loopback only). ``--stdio`` (and a service that cannot be had) keep the old path.
"""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from support.claude_cli import claude_bin, claude_env, claude_print_args, run_headless, stream_events
from support.fake_anthropic import FakeAnthropic
from support.sql import value

from server.activity import tokens
from server.mcp import service
from server.mcp.tools import REGISTRY

pytestmark = pytest.mark.e2e


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.timeout(240)
def test_kms_claude_starts_the_service_and_runs_over_http(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    claude = claude_bin()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    assert service.read_state(db_path) is None
    with FakeAnthropic(query="auth error handling") as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
            KMS_SERVICE_USE="1",
            KMS_SERVICE_START_WAIT="30",  # a loaded CI machine: the test is that the launcher starts it
            KMS_SERVICE_PORT=str(free_port()),
            ENABLE_TOOL_SEARCH="false",
        )  # every tool offered
        try:
            proc = run_headless(
                [sys.executable, "-m", "kmscli", "claude", "--", *claude_print_args("Find my notes on auth errors")],
                env=env,
                cwd=work,
            )
            state = service.read_state(db_path)
        finally:
            subprocess.run(
                [sys.executable, "-m", "kmscli", "service", "stop"], env=env, capture_output=True, timeout=60
            )
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}\nstdout:\n{proc.stdout[-3000:]}"
    assert proc.returncode == 0, debug
    assert state is not None, "kms claude should have started the service\n" + debug
    init = next(
        e for e in stream_events(proc.stdout) if e.get("subtype") == "init"
    )  # (hooks answer as system events first)
    assert {"name": "kms", "status": "connected"}.items() <= init["mcp_servers"][0].items(), debug
    offered = {n.removeprefix("mcp__kms__") for n in api.main_requests[0].tool_names if n.startswith("mcp__kms__")}
    assert offered == {s.name for s in REGISTRY if s.tier == "read"}, debug  # the session's ceiling: read
    assert api.tool_results and "Auth service error handling" in api.tool_results[-1].text, debug

    launcher = indexed.execute("SELECT id, exit_code FROM sessions WHERE kind = 'launcher'").fetchall()
    assert len(launcher) == 1 and launcher[0][1] == 0
    searched = indexed.execute("SELECT tool, query FROM session_searches WHERE session_id = ?", (launcher[0][0],))
    assert ("kms_search", "auth error handling") in searched.fetchall(), "the search, under the launcher's session"
    reads = value(indexed, "SELECT count(*) FROM note_reads WHERE session_id = ?", (launcher[0][0],))
    assert reads == 0, "search hits are not notes read (issue 32)"
    made = tokens.list_tokens(indexed, include_ended=True)
    assert [(t.kind, t.session_id, t.state(0) if t.revoked_at else "active") for t in made] == [
        ("session", launcher[0][0], "revoked")
    ], "the session's token is revoked when claude exits"
    assert service.read_state(db_path) is None


@pytest.mark.timeout(240)
def test_kms_claude_stdio_keeps_its_own_server(indexed: apsw.Connection, db_path: Path, tmp_path: Path) -> None:
    claude = claude_bin()
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    with FakeAnthropic(query="auth error handling") as api:
        env = claude_env(
            api.base_url,
            home,
            KMS_CLAUDE_BIN=str(claude),
            KMS_DB_PATH=str(db_path),
            KMS_CONFIG=str(tmp_path / "config.toml"),
            KMS_SERVICE_USE="1",
            KMS_SERVICE_START_WAIT="30",  # a loaded CI machine: the test is that the launcher starts it
            KMS_SERVICE_PORT=str(free_port()),
        )
        proc = run_headless(
            [
                sys.executable,
                "-m",
                "kmscli",
                "claude",
                "--stdio",
                "--",
                *claude_print_args("Find my notes on auth errors"),
            ],
            env=env,
            cwd=work,
        )
    debug = f"rc={proc.returncode}\n{api.describe()}\nstderr:\n{proc.stderr[-3000:]}"
    assert proc.returncode == 0, debug
    assert service.read_state(db_path) is None, "--stdio starts no service"
    assert api.tool_results and "Auth service error handling" in api.tool_results[-1].text, debug
    assert tokens.list_tokens(indexed, include_ended=True) == []
