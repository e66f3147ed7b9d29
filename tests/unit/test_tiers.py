"""The tier chain's one home (``server/config/tiers.py``): derived from the settings schema, read by every gate."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path
from typing import Any

import pytest

from server.config import tiers
from server.config.schema import SETTINGS
from server.config.session_contract import SETTING_FIELDS, SessionConfig

SWITCHES = ("enabled", "read_enabled", "write_enabled", "edit_enabled", "organize_enabled")


def config(tmp_path: Path, **on: bool) -> SessionConfig:
    switches: dict[str, Any] = {name: on.get(name, False) for name in SWITCHES}
    return SessionConfig(db_path=tmp_path / "kms.db", config_path=tmp_path / "c.toml", session_id="s1", **switches)


def test_each_tier_needs_every_tier_before_it_as_the_schema_chains_them() -> None:
    assert tiers.TIERS == ("read", "write", "edit", "organize")
    assert tiers.RULES["read"].switches == ("kms.enabled", "agent.read")
    for lower, upper in itertools.pairwise(tiers.CHAIN):
        assert upper.switches == (*lower.switches, upper.key)  # the parent= chain, outermost first
        assert SETTINGS[upper.key].parent == lower.key
    assert tiers.RULES["write"].env == "KMS_AGENT_WRITE_TOOLS_ENABLED"  # the schema's variable, not a copy
    for key, name in tiers.SWITCH_FIELDS.items():  # every switch is carried by the session contract
        assert SETTING_FIELDS[name] == key


def test_a_tier_is_on_only_when_every_switch_of_its_chain_is(tmp_path: Path) -> None:
    for values in itertools.product((False, True), repeat=len(SWITCHES)):
        cfg = config(tmp_path, **dict(zip(SWITCHES, values, strict=True)))
        for depth, tier in enumerate(tiers.TIERS):
            assert tiers.tier_enabled(cfg, tier) is all(values[: depth + 2]), (values, tier)
            assert cfg.tier_enabled(tier) is tiers.tier_enabled(cfg, tier)


def test_the_disabled_message_names_the_settings_that_are_off_and_the_fix(tmp_path: Path) -> None:
    cfg = config(tmp_path, enabled=True, read_enabled=True, edit_enabled=True)
    message = tiers.disabled_message(cfg, "kms_edit", "edit")
    assert "kms_edit is turned off" in message
    assert "agent.write (KMS_AGENT_WRITE_TOOLS_ENABLED) is off" in message  # edit itself is on: not named
    assert "agent.edit" not in message and "`kms config set agent.write true`" in message
    off = tiers.disabled_message(dataclasses.replace(cfg, enabled=False), "kms_move", "organize")
    assert "kms.enabled (KMS_ENABLED) and agent.write" in off and "agent.organize (" in off and " are off" in off
    assert "kms config set agent.read" not in off  # agent.read is on


@pytest.mark.parametrize("write", [False, True])
def test_doctor_reports_the_tiers_of_the_chain(tmp_path: Path, write: bool) -> None:
    from kmscli.doctor import doctor_report

    env = {
        "KMS_DB_PATH": str(tmp_path / "kms.db"),
        "KMS_CONFIG": str(tmp_path / "c.toml"),
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "KMS_AGENT_WRITE_TOOLS_ENABLED": "1" if write else "0",
        "KMS_AGENT_EDIT_TOOLS_ENABLED": "1",
        "KMS_CLAUDE_BIN": str(tmp_path / "no-claude"),
    }
    report = doctor_report(env)
    assert report["tiers"] == {"read": True, "write": write, "edit": write, "organize": False}


def test_a_tier_the_token_cut_names_the_token_scope(tmp_path: Path) -> None:
    """Settings on, a token's ``tier:`` ceiling lower: the refusal names the scope, not the settings; a tier
    off in the settings as well is named with its fix too."""
    from server.config.scopes import Scopes

    on = {"enabled": True, "read_enabled": True, "write_enabled": True, "edit_enabled": True}
    cfg = SessionConfig.from_env({}, **on, organize_enabled=False)
    read = Scopes.parse("tier:read").narrow(cfg)
    message = tiers.disabled_message(read, "kms_create", "write")
    assert "tier:read" in message and "--scopes tier:write" in message and "kms config set" not in message
    both = tiers.disabled_message(read, "kms_move", "organize")
    assert "--scopes tier:organize" in both and "`kms config set agent.organize true`" in both
    assert "agent.write" not in both and "agent.edit" not in both  # on in the settings: the token cut them
    plain = tiers.disabled_message(cfg, "kms_move", "organize")
    assert "tier:" not in plain and "`kms config set agent.organize true`" in plain
