"""A service token's scopes (``server.config.scopes``): the grammar, and that they only take away."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from server.config.allowlist import Allowlist
from server.config.scopes import ScopeError, Scopes
from server.config.session import SessionConfig


def test_a_tokens_scopes_only_take_away(tmp_path: Path) -> None:
    """``Scopes.narrow``: tiers above the ceiling off, the vault pinned, folders added to the allowlist, approval
    forced; never a tier, vault or folder the settings do not allow."""

    base = SessionConfig(
        db_path=tmp_path / "kms.db",
        config_path=tmp_path / "c.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=True,
        edit_enabled=False,
        session_id="s",
        allowlist=("drafts", "inbox"),
    )
    narrowed = Scopes.parse("tier:organize vault:work folder:drafts approval").narrow(base)
    assert narrowed.tier_enabled("write") and not narrowed.tier_enabled("edit")  # the settings' ceiling stays
    assert narrowed.vault == "work" and narrowed.approval == "always"
    allow = Allowlist(narrowed.allowlist).narrowed(narrowed.token_folders)
    assert allow.allows("drafts") and not allow.allows("inbox") and not allow.allows("notes")
    read_only = Scopes.parse("tier:read").narrow(base)
    assert not read_only.tier_enabled("write") and read_only.vault is None
    with pytest.raises(ScopeError):
        Scopes.parse("vault:work").narrow(dataclasses.replace(base, vault="home"))
    with pytest.raises(ScopeError):
        Scopes.parse("tier:everything")
    assert Scopes.parse(Scopes.parse("folder:a/* tier:edit, approval").text()) == Scopes.parse(
        "tier:edit folder:a/* approval"
    )
