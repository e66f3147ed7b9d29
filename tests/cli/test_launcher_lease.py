"""Issue 37: a ``kms claude`` session token is a lease its launcher renews. While the launcher runs the token
keeps working past its lease (renewed); once the launcher is killed outright (SIGKILL: no ``finally``, no
revoke) the real service refuses the token within one lease and the session shows ended. The lease is
shortened through ``KMS_TOKEN_LEASE_S`` (for tests and ops)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
from support.launcher import launcher_env, on_the_service

from server.mcp import service

LEASE_S = 3.0


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    lease = {
        "KMS_TOKEN_LEASE_S": str(LEASE_S),
        "FAKE_CLAUDE_WAIT": "1",  # the stand-in claude runs until signalled (30 s at most)
    }
    with on_the_service({**launcher_env(tmp_path), **lease}) as e:
        yield e


def status(url: str, secret: str) -> int:
    """What the service answers an ``initialize`` made with ``secret`` (200: accepted, 401: refused)."""
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {secret}"}
    return httpx2.post(url, json=body, headers=headers, timeout=10).status_code


def wait_for(what: str, check, timeout: float):  # noqa: ANN001, ANN201 - a test's poll
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.1)
    raise AssertionError(f"not within {timeout} s: {what}")


def ready(env: dict[str, str]) -> dict | None:
    with contextlib.suppress(OSError, ValueError):
        rec = json.loads(Path(env["FAKE_CLAUDE_RECORD"]).read_text())
        return rec if rec.get("ready") else None
    return None


def sessions(env: dict[str, str]) -> list[dict]:
    """``kms session list --json``: what the person is shown."""
    listed = subprocess.run(
        [sys.executable, "-m", "kmscli", "session", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(listed.stdout)


def session_state(env: dict[str, str], session_id: str) -> str | None:
    return next((s["state"] for s in sessions(env) if s["id"] == session_id), None)


def test_a_killed_launchers_token_lapses_within_its_lease_and_its_session_ends(env: dict[str, str]) -> None:
    launcher = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "claude", "--", "-p", "hello"],
        env=env,
        cwd=env["HOME"] if Path(env["HOME"]).is_dir() else None,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    claude_pid = None
    try:
        rec = wait_for("the stand-in claude runs", lambda: ready(env), 60)
        claude_pid = rec["pid"]
        secret = rec["env"]["KMS_SESSION_TOKEN"]
        state = service.read_state(Path(env["KMS_DB_PATH"]))
        assert state is not None
        assert status(state.url, secret) == 200
        # the wait is the test: two leases long, only the launcher's renewals keep the token alive
        time.sleep(LEASE_S * 2)
        assert status(state.url, secret) == 200, "the running launcher renews its token's lease"
        [session_id] = [s["id"] for s in sessions(env) if s["kind"] == "launcher"]
        assert session_state(env, session_id) == "live"
        launcher.send_signal(signal.SIGKILL)
        killed = time.monotonic()
        launcher.wait(10)
        wait_for("the service refuses the token", lambda: status(state.url, secret) == 401, LEASE_S + 5)
        assert time.monotonic() - killed <= LEASE_S + 2, "refused within one lease (and a sweep) of the kill"
        wait_for("the session shows ended", lambda: session_state(env, session_id) == "ended", 15)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(10)
        if claude_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(claude_pid, signal.SIGKILL)
