"""``kms mcp-config HOST --http``: each HTTP-capable host's entry for the kms service, a token of its own whose
secret never lands in the host's file (Claude Code asks kms through its headersHelper; the others expand an
environment variable), a new token each time (the old one revoked), ``--uninstall`` revoking it; Claude
Desktop and Zed keep their stdio entry and say why."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib
from pathlib import Path

import apsw
import pytest
from support.cli import kms, ok, refused, said

from kmscli import jsonc
from kmscli.hosts import HOSTS
from server.activity import tokens

HTTP_HOSTS = {
    "claude-code": "mcpServers",
    "cursor": "mcpServers",
    "windsurf": "mcpServers",
    "gemini": "mcpServers",
    "vscode": "servers",
    "codex": "mcp_servers",
}


def installed(host: str, home: Path) -> dict:
    path = HOSTS[host].config_path({"HOME": str(home)})
    text = path.read_text()
    if host == "codex":
        return tomllib.loads(text)["mcp_servers"]["kms"]
    return json.loads(jsonc.strip(text))[HTTP_HOSTS[host]]["kms"]


@pytest.mark.parametrize("host", HTTP_HOSTS)
def test_http_install_keeps_the_secret_out_of_the_hosts_file(host: str, tmp_path: Path, conn: apsw.Connection) -> None:
    home = tmp_path / "home"
    result = ok(kms("mcp-config", host, "--http", "--install", "--scopes", "tier:write", HOME=str(home)))
    entry = installed(host, home)
    url = entry.get("url") or entry.get("serverUrl")
    assert url == f"http://127.0.0.1:{os.environ['KMS_SERVICE_PORT']}/mcp", entry  # the suite's own port
    [token] = [t for t in tokens.list_tokens(conn) if t.label == f"host:{host}"]
    assert token.kind == "host" and token.scopes.text() == "tier:write"
    secret = ok(kms("token", "secret", host)).stdout.strip()
    assert tokens.verify(conn, secret) is not None
    file_text = HOSTS[host].config_path({"HOME": str(home)}).read_text()
    assert secret not in file_text and secret.split("_", 2)[2] not in file_text
    if host == "claude-code":  # Claude Code runs the helper for the header at each connection
        out = subprocess.run(
            entry["headersHelper"],
            shell=True,
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HOME": str(home)},
        )
        assert json.loads(out.stdout) == {"Authorization": f"Bearer {secret}"}, out.stderr
    elif host == "vscode":  # VS Code prompts for it once (a password input) and keeps it in its secret storage
        assert entry["headers"] == {"Authorization": "Bearer ${input:kms-token}"}
        doc = json.loads(jsonc.strip(HOSTS[host].config_path({"HOME": str(home)}).read_text()))
        assert [i for i in doc["inputs"] if i["id"] == "kms-token"] == [
            {
                "type": "promptString",
                "id": "kms-token",
                "description": "kms service token for VS Code (print it with: kms token secret vscode)",
                "password": True,
            }
        ]
        assert "kms token secret vscode" in said(result.stderr)
    else:
        var = tokens.HOST_TOKEN_VARS[host]
        assert var in json.dumps(entry) and var in said(result.stderr)
    ok(kms("mcp-config", host, "--http", "--install", HOME=str(home)))  # again: a new token, the old one revoked
    assert tokens.verify(conn, secret) is None
    assert [t.label for t in tokens.list_tokens(conn)] == [f"host:{host}"]
    ok(kms("mcp-config", host, "--http", "--uninstall", HOME=str(home)))
    assert tokens.list_tokens(conn) == []
    assert not HOSTS[host].config_path({"HOME": str(home)}).exists()  # kms made the file: it goes with kms


@pytest.mark.parametrize("host", ["claude-desktop", "zed"])
def test_stdio_only_hosts_say_why(host: str, tmp_path: Path, conn: apsw.Connection) -> None:
    result = refused(kms("mcp-config", host, "--http", "--install", HOME=str(tmp_path)), 2)
    assert "stdio" in said(result.stderr)
    assert tokens.list_tokens(conn) == [] and not HOSTS[host].config_path({"HOME": str(tmp_path)}).exists()


def test_vscode_keeps_its_other_inputs_and_servers(tmp_path: Path, conn: apsw.Connection) -> None:
    """The person's own inputs and servers in VS Code's mcp.json survive install and uninstall; kms's input goes
    with kms's server."""
    home = tmp_path / "home"
    path = HOSTS["vscode"].config_path({"HOME": str(home)})
    path.parent.mkdir(parents=True)
    path.write_text(
        '{\n  // mine\n  "inputs": [{"type": "promptString", "id": "gh", "description": "GitHub"}],\n'
        '  "servers": {"gh": {"type": "http", "url": "https://example.invalid/mcp"}}\n}\n'
    )
    ok(kms("mcp-config", "vscode", "--http", "--install", HOME=str(home)))
    ok(kms("mcp-config", "vscode", "--http", "--install", HOME=str(home)))  # twice: one kms input, not two
    doc = json.loads(jsonc.strip(path.read_text()))
    assert [i["id"] for i in doc["inputs"]] == ["gh", "kms-token"] and set(doc["servers"]) == {"gh", "kms"}
    ok(kms("mcp-config", "vscode", "--http", "--uninstall", HOME=str(home)))
    text = path.read_text()
    doc = json.loads(jsonc.strip(text))
    assert "// mine" in text and [i["id"] for i in doc["inputs"]] == ["gh"] and set(doc["servers"]) == {"gh"}


def test_a_revoked_host_token_is_not_handed_out(tmp_path: Path, conn: apsw.Connection) -> None:
    """``kms token secret``/``header`` of a revoked token would only earn the host a 401 with no hint why:
    refused, naming the revocation and the fix."""
    home = tmp_path / "home"
    ok(kms("mcp-config", "cursor", "--http", "--install", HOME=str(home)))
    [token] = [t for t in tokens.list_tokens(conn) if t.label == "host:cursor"]
    ok(kms("token", "revoke", "host:cursor"))
    for command in ("secret", "header"):
        result = refused(kms("token", command, "cursor"))
        assert "kms_" not in result.stdout
        assert said(result.stderr) == (
            f"error (revoked): the token of cursor ({token.id}) is revoked: run `kms mcp-config cursor --http` "
            "for a new one"
        )
    ok(kms("mcp-config", "cursor", "--http", "--install", HOME=str(home)))  # the fix it names works
    assert tokens.verify(conn, ok(kms("token", "secret", "cursor")).stdout.strip()) is not None


@pytest.mark.parametrize("http", [False, True], ids=["plain", "http"])
def test_uninstall_revokes_the_host_token_and_deletes_its_secret_either_way(
    http: bool, tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    """Issue 37: ``--uninstall`` without ``--http`` used to leave the host's token working and its secret on
    disk; whichever way kms is taken out of the host, the token is refused after and the secret is gone."""
    from server.store.db import service_folder

    home = tmp_path / "home"
    ok(kms("mcp-config", "cursor", "--http", "--install", HOME=str(home)))
    secret = ok(kms("token", "secret", "cursor")).stdout.strip()
    kept = service_folder(db_path) / "hosts" / "cursor.token"
    assert kept.read_text() == secret and tokens.verify(conn, secret) is not None
    result = ok(kms("mcp-config", "cursor", *(["--http"] if http else []), "--uninstall", HOME=str(home)))
    assert "1 token(s) of cursor revoked" in said(result.stderr)
    assert tokens.verify(conn, secret) is None and tokens.list_tokens(conn) == []
    assert not kept.exists()
    refused(kms("token", "secret", "cursor"))
    again = ok(kms("mcp-config", "cursor", "--uninstall", HOME=str(home)))
    assert "nothing changed" in said(again.stderr)
