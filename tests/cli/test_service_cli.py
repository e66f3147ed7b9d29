"""``kms service`` and ``kms token`` as a person uses them: real subprocesses, a real background service on a
free loopback port, real tokens. The service killed outright mid-session: the next call fails cleanly, and
``kms service start`` picks up with nothing lost (the token, its session, its rate-limit count)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from support.net import free_port

from server.mcp import service


@pytest.fixture
def kms(db_path: Path, tmp_path: Path) -> Iterator[Any]:
    env = {**os.environ, "KMS_SERVICE_PORT": str(free_port())}
    env.pop("PYTHONUNBUFFERED", None)

    def run(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run(
            [sys.executable, "-m", "kmscli", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert not check or proc.returncode == 0, proc.stderr + proc.stdout
        assert "Traceback" not in proc.stderr, proc.stderr
        return proc

    run.port = int(env["KMS_SERVICE_PORT"])  # type: ignore[attr-defined]  # an attribute set on the function
    try:
        yield run
    finally:
        state = service.read_state(db_path)
        if state is not None:
            os.kill(state.pid, signal.SIGKILL)


async def search(url: str, secret: str) -> dict[str, Any]:
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {secret}"})
    async with http, Client(streamable_http_client(url, http_client=http)) as c:
        result = await c.call_tool("kms_search", {"query": "auth"})
        return dict(result.structured_content)


def test_service_start_status_stop_and_tokens(kms: Any, indexed: apsw.Connection, db_path: Path) -> None:
    assert "no kms service is running" in kms("service", "status").stdout
    started = kms("service", "start", "--port", str(kms.port))
    state = service.read_state(db_path)
    assert state is not None and state.url in started.stdout
    status = json.loads(kms("service", "status", "--json").stdout)
    assert status["running"] and status["answers"] and status["pid"] == state.pid
    made = kms("token", "create", "--label", "cursor", "--scopes", "tier:read")
    secret = made.stdout.strip().splitlines()[-1]
    assert secret.startswith("kms_")
    listed = kms("token", "list", "--json").stdout
    assert "cursor" in listed and secret.split("_", 2)[2] not in listed  # never the secret
    assert "kms_" not in kms("service", "status").stdout
    assert anyio.run(search, state.url, secret)["hits"]
    again = kms("service", "start", "--port", str(kms.port))  # one instance per database
    assert service.read_state(db_path) == state and state.url in again.stdout
    token_id = json.loads(listed)[0]["id"]
    kms("token", "revoke", token_id)
    with pytest.raises(Exception):  # noqa: B017 - the SDK's own error for a 401
        anyio.run(search, state.url, secret)
    kms("service", "stop")
    assert service.read_state(db_path) is None
    bad = kms("token", "create", "--label", "x", "--scopes", "tier:everything", check=False)
    assert bad.returncode != 0 and "tier:everything" in (bad.stderr + bad.stdout)


def test_a_killed_service_fails_cleanly_and_a_new_one_picks_up(
    kms: Any, indexed: apsw.Connection, db_path: Path
) -> None:
    kms("service", "start", "--port", str(kms.port))
    state = service.read_state(db_path)
    assert state is not None
    secret = kms("token", "create", "--label", "agent", "--scopes", "tier:read").stdout.strip().splitlines()[-1]
    assert anyio.run(search, state.url, secret)["hits"]
    os.kill(state.pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while service.read_state(db_path) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    with pytest.raises(Exception):  # noqa: B017 - connection refused: the host's call fails, no hang
        anyio.run(search, state.url, secret)
    kms("service", "start", "--port", str(kms.port))
    again = service.read_state(db_path)
    assert again is not None and again.pid != state.pid
    assert anyio.run(search, again.url, secret)["hits"]  # the same token, its session, after the restart
    kms("service", "stop")  # (its searches are flushed as it stops)
    token = json.loads(kms("token", "list", "--json").stdout)[0]
    searchers = {r[0] for r in indexed.execute("SELECT DISTINCT session_id FROM session_searches")}
    assert searchers == {token["sessionId"]}, "one session across the restart: the token's"


def test_kms_serve_with_a_variable_that_does_not_fit_says_so_in_one_line(db_path: Path) -> None:
    """A ``KMS_*`` value out of range stops ``kms serve`` before it binds: one line naming the variable, no
    traceback, no state file left behind."""
    env = {**os.environ, "KMS_WRITE_PER_MINUTE": "100000"}
    proc = subprocess.run(
        [sys.executable, "-m", "kmscli", "serve", "--port", str(free_port())],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr and "│" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        "error (invalid-input): KMS_WRITE_PER_MINUTE='100000': 100000 is outside 1..10000 (write.per_minute). "
        "Valid: a whole number from 1 to 10000"
    ]
    assert service.read_state(db_path) is None


def plant_state(db_path: Path, pid: int, port: int, **extra: Any) -> None:
    """A state file left by a service that died without cleaning up, naming a pid now used by another process."""
    data = {"pid": pid, "host": "127.0.0.1", "port": port, "version": "0.1.0", "db_path": str(db_path)}
    service.state_path(db_path).parent.mkdir(parents=True, exist_ok=True)
    service.state_path(db_path).write_text(json.dumps({**data, "started_at": 1796201011.0, **extra}))


@pytest.mark.parametrize("proc_start", [None, "12345"], ids=["older-file", "other-start-time"])
def test_a_reused_pid_is_never_signalled_nor_taken_for_the_service(
    kms: Any, indexed: apsw.Connection, db_path: Path, proc_start: str | None
) -> None:
    """The pid in a stale state file now belongs to an unrelated process: ``status`` says no service runs,
    ``stop`` leaves that process alone, ``start`` starts a real service; each says the file was stale."""
    other = subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL)
    extra = {} if proc_start is None else {"proc_start": proc_start}
    try:
        plant_state(db_path, other.pid, kms.port, **extra)
        status = kms("service", "status")
        assert "no kms service is running" in status.stdout and "stale" in status.stderr
        assert not service.state_path(db_path).exists()  # cleaned
        plant_state(db_path, other.pid, kms.port, **extra)
        stopped = kms("service", "stop")
        assert "no kms service is running" in stopped.stdout and "stale" in stopped.stderr
        assert other.poll() is None, "kms service stop killed an unrelated process"
        plant_state(db_path, other.pid, kms.port, **extra)
        kms("service", "start", "--port", str(kms.port))
        state = service.read_state(db_path)
        assert state is not None and state.pid != other.pid and state.proc_start is not None
        assert json.loads(kms("service", "status", "--json").stdout)["answers"]
        kms("service", "restart")
        assert other.poll() is None
        kms("service", "stop")
        assert service.read_state(db_path) is None and other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_start_on_a_taken_port_says_so_at_once(kms: Any, indexed: apsw.Connection, db_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", kms.port))
        taken.listen(1)
        began = time.monotonic()
        proc = kms("service", "start", "--port", str(kms.port), check=False)
        took = time.monotonic() - began
    assert proc.returncode not in (0, None)
    assert f"error (conflict): port {kms.port} is in use" in proc.stderr, proc.stderr
    assert "did not answer" not in proc.stderr and took < 10, took
    assert service.read_state(db_path) is None


def test_start_with_allow_remote_hands_it_to_the_service(kms: Any, indexed: apsw.Connection, db_path: Path) -> None:
    """127.0.0.2 is no loopback *name* kms accepts without --allow-remote, yet bindable on every Linux."""
    proc = kms("service", "start", "--host", "127.0.0.2", "--allow-remote", "--port", str(kms.port), check=False)
    assert proc.returncode == 0, proc.stderr
    state = service.read_state(db_path)
    assert state is not None and state.host == "127.0.0.2" and state.url in proc.stdout
    kms("service", "stop")


def test_start_with_another_port_while_one_runs_says_where_it_runs(
    kms: Any, indexed: apsw.Connection, db_path: Path
) -> None:
    kms("service", "start", "--port", str(kms.port))
    state = service.read_state(db_path)
    assert state is not None
    elsewhere = free_port()
    moved = kms("service", "start", "--port", str(elsewhere), check=False)
    assert moved.returncode not in (0, None)
    assert f"already runs at {state.url}" in moved.stderr and f"kms service restart --port {elsewhere}" in moved.stderr
    other_host = kms("service", "start", "--host", "::1", check=False)
    assert other_host.returncode not in (0, None) and "already runs" in other_host.stderr
    assert state.url in kms("service", "start", "--port", str(kms.port)).stdout  # the same address: fine
    assert state.url in kms("service", "start").stdout  # no address asked: the one that runs
    assert service.read_state(db_path) == state
    kms("service", "stop")


def test_revoking_a_host_tokens_session_says_the_token_must_be_replaced(
    kms: Any, indexed: apsw.Connection, db_path: Path
) -> None:
    """A host token stands for one session for good: revoking that session leaves the token unable to write
    ever again, and ``kms session revoke``, ``resume`` and ``kms token list`` say so and how to replace it."""
    kms("service", "start", "--port", str(kms.port))
    state = service.read_state(db_path)
    assert state is not None
    secret = kms("token", "create", "--label", "writer", "--scopes", "tier:write").stdout.strip().splitlines()[-1]
    assert anyio.run(search, state.url, secret)["hits"]  # the token's session exists now
    [token] = json.loads(kms("token", "list", "--json").stdout)
    assert token["writes"] == "active"
    renew = "`kms token create --label 'writer' --scopes 'tier:write'`"
    revoked = " ".join(kms("session", "revoke", token["sessionId"]).stdout.split())
    assert f"token {token['id']} (writer), which can never write again" in revoked
    assert renew in revoked and f"`kms token revoke {token['id']}`" in revoked
    resumed = kms("session", "resume", token["sessionId"], check=False)
    assert resumed.returncode == 2 and renew in " ".join(resumed.stderr.split())
    assert "start a new session" not in resumed.stderr
    listed = " ".join(kms("token", "list").stdout.split())
    assert f"active, writes revoked (session {token['sessionId']}): replace it with {renew}" in listed
    assert json.loads(kms("token", "list", "--json").stdout)[0]["writes"] == "revoked"
    kms("service", "stop")
