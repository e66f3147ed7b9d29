"""``kms token create --scopes`` with several ``vault:`` scopes: a vault that is not registered is refused (a
typed error, no token made); the vaults a token reaches are shown by ``kms token list`` (text and JSON)."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
from support.cli import kms, ok, refused, said

from server.activity import tokens
from server.vault.registry import add_vault


def three_vaults(conn: apsw.Connection, tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
        add_vault(conn, tmp_path / name, name)


def test_token_create_refuses_a_vault_that_is_not_registered(conn: apsw.Connection, tmp_path: Path) -> None:
    three_vaults(conn, tmp_path)
    out = refused(kms("token", "create", "--label", "cursor", "--scopes", "tier:read vault:a vault:nope"))
    text = said(out.stdout + out.stderr)
    assert "'nope'" in text and "vaults: a, b, c" in text and "kms_" not in text
    assert tokens.list_tokens(conn, include_ended=True) == []  # nothing made
    refused(kms("mcp-config", "cursor", "--http", "--scopes", "vault:nope"))
    assert tokens.list_tokens(conn, include_ended=True) == []


def test_a_token_for_two_vaults_is_listed_with_both(conn: apsw.Connection, tmp_path: Path) -> None:
    three_vaults(conn, tmp_path)
    made = ok(kms("token", "create", "--label", "cursor", "--scopes", "tier:write vault:a,vault:b"))
    assert "tier:write vault:a vault:b" in said(made.stdout)
    secret = made.stdout.strip().splitlines()[-1]
    assert tokens.verify(conn, secret, touch=False) is not None
    listed = ok(kms("token", "list")).stdout
    assert "cursor" in listed and "tier:write vault:a vault:b" in said(listed) and secret not in listed
    [entry] = json.loads(ok(kms("token", "list", "--json")).stdout)
    assert entry["scopes"] == "tier:write vault:a vault:b"
