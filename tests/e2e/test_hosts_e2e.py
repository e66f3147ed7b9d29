"""Gemini CLI and Codex CLI (real, from npm; scripts/fetch_hosts.sh) read what
``kms mcp-config HOST --install`` wrote. Gemini connects to the server (``Connected``); Codex's
``mcp list`` only reads its config, so it shows the entry and that it is enabled."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import apsw
import pytest
from support.cli import kms, ok

pytestmark = pytest.mark.e2e
BIN = Path(__file__).resolve().parents[2] / ".cache" / "npm-hosts" / "node_modules" / ".bin"


def host_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KMS_", "XDG_", "GEMINI", "CODEX", "OPENAI"))}
    return {**env, "HOME": str(home), "NO_COLOR": "1"}


@pytest.mark.timeout(180)
def test_gemini_cli_lists_the_installed_kms_as_connected(indexed: apsw.Connection, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    # the test's folder is not one the person trusted; Gemini would list the server as disabled
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    ok(kms("mcp-config", "gemini", "--install", HOME=str(home)))
    listed = subprocess.run(
        [str(BIN / "gemini"), "mcp", "list"],
        env=host_env(home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=150,
        stdin=subprocess.DEVNULL,
    )
    output = listed.stdout + listed.stderr  # Gemini CLI writes the listing to stderr
    line = next((x for x in output.splitlines() if "kms:" in x), "")
    assert "Connected" in line and "-m kmscli mcp" in line, output


@pytest.mark.timeout(120)
def test_codex_cli_lists_the_installed_kms(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    ok(kms("mcp-config", "codex", "--install", HOME=str(home)))
    listed = subprocess.run(
        [str(BIN / "codex"), "mcp", "list", "--json"],
        env=host_env(home),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=100,
        stdin=subprocess.DEVNULL,
    )
    assert listed.returncode == 0, listed.stderr
    [server] = [s for s in json.loads(listed.stdout) if s["name"] == "kms"]
    assert server["enabled"] is True, server
    assert server["transport"]["args"][-3:] == ["-m", "kmscli", "mcp"], server
    assert set(server["transport"]["env"]) >= {"KMS_DB_PATH", "KMS_CONFIG"}, server


@pytest.mark.timeout(180)
def test_gemini_and_codex_read_the_http_entries(indexed: apsw.Connection, tmp_path: Path) -> None:
    """``--install --http``: Gemini CLI lists kms over HTTP and connects to the running service with the token
    its entry expands from the environment; Codex lists the URL and the variable it reads the token from."""
    import signal
    import socket
    import sys
    import time

    from server.mcp import service

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    home = tmp_path / "home"
    (home / ".gemini").mkdir(parents=True)
    (home / ".gemini" / "settings.json").write_text(json.dumps({"security": {"folderTrust": {"enabled": False}}}))
    serve = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "serve", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while service.read_state(Path(os.environ["KMS_DB_PATH"])) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        ok(kms("mcp-config", "gemini", "--http", "--install", HOME=str(home)))
        ok(kms("mcp-config", "codex", "--http", "--install", HOME=str(home)))
        env = {
            **host_env(home),
            "KMS_TOKEN_GEMINI": ok(kms("token", "secret", "gemini")).stdout.strip(),
            "KMS_TOKEN_CODEX": ok(kms("token", "secret", "codex")).stdout.strip(),
        }
        listed = subprocess.run(
            [str(BIN / "gemini"), "mcp", "list"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=150,
            stdin=subprocess.DEVNULL,
        )
        output = listed.stdout + listed.stderr
        line = next((x for x in output.splitlines() if "kms:" in x), "")
        assert "Connected" in line and f"127.0.0.1:{port}/mcp" in line, output
        codex = subprocess.run(
            [str(BIN / "codex"), "mcp", "list", "--json"],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=100,
            stdin=subprocess.DEVNULL,
        )
        assert codex.returncode == 0, codex.stderr
        [server] = [s for s in json.loads(codex.stdout) if s["name"] == "kms"]
        assert server["enabled"] is True and f":{port}/mcp" in json.dumps(server["transport"]), server
        assert "KMS_TOKEN_CODEX" in json.dumps(server["transport"]), server
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
