"""``kms claude`` on the kms service, with the fake ``claude`` of ``support.launcher``: an HTTP entry whose header
expands ``$KMS_SESSION_TOKEN``, a token for that one session that works while claude runs and is refused after;
a service that cannot be had leaves the stdio entry and a line on stderr; ``--print-config`` starts nothing."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.launcher import kms, launcher_env, on_the_service, record

from server.activity import tokens
from server.mcp import service
from server.store.db import connect


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    with on_the_service(launcher_env(tmp_path)) as e:
        yield e


def test_a_session_on_the_service_gets_a_token_of_its_own_revoked_at_exit(env: dict[str, str]) -> None:
    started = kms(env, "service", "start")
    assert started.returncode == 0, started.stderr
    run = kms(env, "claude", "--", "-p", "hello")
    assert run.returncode == 0 and run.stderr == "", run.stderr
    rec = record(env)
    entry = rec["config"]["mcpServers"]["kms"]
    state = service.read_state(Path(env["KMS_DB_PATH"]))
    assert state is not None and state.port == int(env["KMS_SERVICE_PORT"]), "kms service start reads service.port"
    assert entry == {
        "type": "http",
        "url": state.url,
        "headers": {"Authorization": "Bearer ${KMS_SESSION_TOKEN}"},
    }
    secret = rec["env"]["KMS_SESSION_TOKEN"]
    assert secret not in str(rec["config"])  # the file holds the variable, never the token
    hooks = rec["settings"]["hooks"]  # SessionStart a command; the others HTTP to the service, with the token
    assert hooks["SessionStart"][0]["hooks"][0]["type"] == "command"
    assert hooks["Stop"][0]["hooks"][0] == {
        "type": "http",
        "url": state.url.rsplit("/mcp", 1)[0] + "/hooks/stop",
        "headers": {"Authorization": "Bearer $KMS_SESSION_TOKEN"},
        "allowedEnvVars": ["KMS_SESSION_TOKEN"],
        "timeout": 30,
    }
    assert secret not in json.dumps(rec["settings"]) + json.dumps(rec["contract"])
    conn = connect(env["KMS_DB_PATH"])
    try:
        [token] = tokens.list_tokens(conn, include_ended=True)
        assert token.kind == "session" and token.revoked_at is not None, "revoked when claude exited"
        assert tokens.verify(conn, secret) is None
        launcher = conn.execute("SELECT id FROM sessions WHERE kind = 'launcher'").fetchall()
        assert [(token.session_id,)] == launcher, "the token stands for the launcher's session"
    finally:
        conn.close()
    assert kms(env, "service", "stop").returncode == 0


def test_a_service_that_cannot_be_had_leaves_stdio_and_says_so(env: dict[str, str]) -> None:
    with socket.socket() as taken:  # something else holds the port: the service cannot start
        taken.bind(("127.0.0.1", int(env["KMS_SERVICE_PORT"])))
        taken.listen(1)
        run = kms(env, "claude", "--", "-p", "hello")
    assert run.returncode == 0, run.stderr
    assert "could not be had" in run.stderr and "stdio" in run.stderr
    entry = record(env)["config"]["mcpServers"]["kms"]
    assert entry["args"][-3:] == ["-m", "kmscli", "mcp"] and "KMS_SESSION_TOKEN" not in record(env)["env"]
    conn = connect(env["KMS_DB_PATH"])
    try:
        assert tokens.list_tokens(conn, include_ended=True) == []
    finally:
        conn.close()


def test_print_config_starts_no_service_and_prints_the_service_entry_the_session_would_get(
    env: dict[str, str],
) -> None:
    """It printed the stdio entry while the session it described would run over the service."""
    run = kms(env, "claude", "--print-config")
    assert run.returncode == 0, run.stderr
    assert service.read_state(Path(env["KMS_DB_PATH"])) is None
    entry = json.loads(run.stdout)["mcpServers"]["kms"]
    assert entry.get("url") == f"http://127.0.0.1:{env['KMS_SERVICE_PORT']}/mcp", entry
    assert "command" not in entry
    stdio = json.loads(kms(env, "claude", "--stdio", "--print-config").stdout)["mcpServers"]["kms"]
    assert "command" in stdio and "url" not in stdio
