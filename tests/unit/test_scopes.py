"""A service token's scopes (``server.config.scopes``): the grammar, and that they only take away."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from server.config.allowlist import Allowlist
from server.config.scopes import ScopeError, Scopes
from server.config.session_contract import SessionConfig


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


def test_vault_is_repeatable_and_narrows_to_the_vaults_in_common(tmp_path: Path) -> None:
    """``vault:`` names one or more vaults; the session sees those the token and the settings both allow: one
    is ``vault`` (as ``kms claude --vault`` sets it), several are ``token_vaults``."""
    base = SessionConfig(
        db_path=tmp_path / "kms.db",
        config_path=tmp_path / "c.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=False,
        session_id="s",
    )
    two = Scopes.parse("tier:read vault:work, vault:notes vault:work")
    assert two.vaults == ("work", "notes") and two.text() == "tier:read vault:work vault:notes"
    assert Scopes.parse(two.text()) == two
    assert Scopes.parse("tier:read").vaults == ()
    both = two.narrow(base)
    assert (both.vault, both.token_vaults, both.vault_names) == (None, ("work", "notes"), ("work", "notes"))
    one = two.narrow(dataclasses.replace(base, vault="notes"))  # a launcher session of one vault
    assert (one.vault, one.token_vaults, one.vault_names) == ("notes", (), ("notes",))
    assert Scopes.parse("vault:notes vault:home").narrow(both).vault_names == ("notes",)  # narrowed twice
    with pytest.raises(ScopeError, match="vaults 'work', 'notes'"):
        two.narrow(dataclasses.replace(base, vault="home"))
    assert Scopes.parse("tier:read").narrow(both).vault_names == ("work", "notes")  # a scope never widens
    for bad in ("vault:", "vaults:a"):
        with pytest.raises(ScopeError):
            Scopes.parse(bad)


def test_a_vault_scope_renders_its_sql() -> None:
    """``server.vault.scope.VaultScope``: one helper for every query that narrows by vault."""
    from server.vault.scope import EVERY, VaultScope

    assert EVERY.sql() == ("", ()) and EVERY.rids_sql("t.rid") == ("", ()) and EVERY.sees(7)
    assert VaultScope.of(None) == EVERY and VaultScope.of(3) == VaultScope((3,))
    one, two = VaultScope.only([3]), VaultScope.only([3, 5, 3])
    assert one.sql("+n.vault_id") == (" AND +n.vault_id = ?", (3,))
    assert two.ids == (3, 5) and two.sql() == (" AND n.vault_id IN (?, ?)", (3, 5))
    assert two.named_sql() == (" AND n.vault_id IN (:vault0, :vault1)", {"vault0": 3, "vault1": 5})
    assert two.rids_sql("l.src_rid") == (
        " AND l.src_rid IN (SELECT rid FROM notes WHERE vault_id IN (?, ?))",
        (3, 5),
    )
    assert two.sees(5) and not two.sees(4)
    with pytest.raises(ValueError):
        VaultScope.only([])
