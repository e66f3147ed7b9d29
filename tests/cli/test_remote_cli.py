"""``kms remote``: enable (validated), status, pair (a code the consent page takes once), off (the panic switch
closes a running service's remote listener at once), doctor (names what is wrong, never crashes), and remote
grants in ``kms token list|revoke``."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import apsw
import httpx
import pytest
from support.cli import kms, ok, refused, said
from support.remote import authorize, exchange, remote_config, remote_service, wait_until

from server.activity import remote_pairing
from server.errors import KmsError


def test_enable_validates_and_status_says_it(tmp_path: Path) -> None:
    refused(kms("remote", "enable", "--url", "http://box.example.net"), 2)
    refused(kms("remote", "enable", "--url", "https://box.example.net/path"), 2)
    done = ok(kms("remote", "enable", "--url", "https://box.tail1234.ts.net/", "--port", "9123"))
    assert "https://box.tail1234.ts.net/mcp" in said(done.stdout)
    status = json.loads(ok(kms("remote", "status", "--json")).stdout)
    assert status["enabled"] and status["url"] == "https://box.tail1234.ts.net" and status["port"] == 9123
    assert status["maxScopes"] == "tier:write" and not status["listening"] and status["grants"] == []
    ok(kms("remote", "disable"))
    assert json.loads(ok(kms("remote", "status", "--json")).stdout)["enabled"] is False


def test_pair_prints_a_single_use_code(conn: apsw.Connection) -> None:
    out = said(ok(kms("remote", "pair")).stdout)
    code = out.split("pairing code: ")[1].split()[0]
    assert len(code) == 9 and code[4] == "-"
    remote_pairing.use_code(conn, code)
    with pytest.raises(KmsError) as again:
        remote_pairing.use_code(conn, code)
    assert again.value.kind == "invalid-input"


def _closed(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_off_closes_the_running_listener_and_grants_show_as_tokens(
    db_path: Path, tmp_path: Path, conn: apsw.Connection
) -> None:
    with remote_service(db_path, tmp_path) as remote, httpx.Client(timeout=10) as http:
        port = int(remote.base.rsplit(":", 1)[1])
        client_id, verifier, code = authorize(http, conn, remote.base)
        assert exchange(http, remote.base, client_id, verifier, code).status_code == 200
        listed = said(ok(kms("token", "list")).stdout)
        assert "claude.ai via remote" in listed and "[remote] tier:write" in listed
        status = json.loads(ok(kms("remote", "status", "--json")).stdout)
        assert status["listening"] and [g["client"] for g in status["grants"]] == ["claude.ai"]
        assert said(ok(kms("remote", "doctor")).stdout).count("ok ") == 6
        via = http.get(
            f"{remote.base}/.well-known/oauth-authorization-server",
            headers={"x-forwarded-for": "203.0.113.9", "x-forwarded-proto": "http"},
        )
        assert via.status_code == 200
        plain = json.loads(refused(kms("remote", "doctor", "--json"), 1).stdout)
        assert [f["check"] for f in plain if not f["ok"]] == ["forwarding"]
        off = ok(kms("remote", "off"))
        assert "listener is closed" in said(off.stdout)
        assert _closed(port)
        assert http.get(remote.state.url.removesuffix("/mcp") + "/health").status_code == 200  # local path goes on
        # on again: the running service opens it again
        remote_config(tmp_path, port)
        wait_until(lambda: not _closed(port), 10, "the listener to open again")
        grant = status["grants"][0]["id"]
        assert f"revoked {grant}" in said(ok(kms("token", "revoke", grant)).stdout)
        assert json.loads(ok(kms("remote", "status", "--json")).stdout)["grants"] == []


def test_doctor_names_what_is_wrong(db_path: Path, tmp_path: Path) -> None:
    off = refused(kms("remote", "doctor"), 1)
    assert "kms remote enable --url" in said(off.stdout)
    ok(kms("remote", "enable", "--url", "https://kms.invalid"))
    down = refused(kms("remote", "doctor"), 1)
    assert "the kms service is not running" in said(down.stdout) and "kms service start" in said(down.stdout)
    with remote_service(db_path, tmp_path, url="https://kms.invalid"):
        found = json.loads(kms("remote", "doctor", "--json").stdout)
        checks = {f["check"]: f for f in found}
        assert checks["settings"]["ok"] and checks["listener"]["ok"] and checks["metadata"]["ok"], found
        assert not checks["public"]["ok"] and "unreachable" in checks["public"]["message"]
