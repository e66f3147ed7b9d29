"""The session contract (server/config/session_contract.py): one writer, one reader, one grammar."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from server.config import settings as st
from server.config.environment import env_vars
from server.config.session_contract import SessionConfig, SessionConfigError

NAME = hs.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,20}", fullmatch=True)
SEGMENT = hs.from_regex(r"[A-Za-z0-9_][A-Za-z0-9 _.-]{0,10}[A-Za-z0-9_]|[*?A-Za-z0-9_]", fullmatch=True)
GLOB = hs.one_of(hs.just("/"), hs.just("."), hs.lists(SEGMENT, min_size=1, max_size=3).map("/".join))
PATH = hs.lists(NAME, min_size=1, max_size=3).map(lambda parts: Path("/", *parts))


@hs.composite
def configs(draw: hs.DrawFn) -> SessionConfig:
    """Every config the composer can write: effective switches (a child is off when its parent is)."""
    enabled = draw(hs.booleans())
    read = enabled and draw(hs.booleans())
    write = read and draw(hs.booleans())
    edit = write and draw(hs.booleans())
    return SessionConfig(
        db_path=draw(PATH),
        config_path=draw(PATH),
        enabled=enabled,
        read_enabled=read,
        write_enabled=write,
        edit_enabled=edit,
        organize_enabled=edit and draw(hs.booleans()),
        session_id=draw(NAME),
        max_files_per_call=draw(hs.integers(1, 100_000)),
        per_minute=draw(hs.integers(1, 10_000)),
        per_session=draw(hs.integers(1, 1_000_000)),
        allowlist=tuple(draw(hs.lists(GLOB, max_size=4, unique=True))),
        embed_model_dir=draw(hs.none() | PATH.map(str)),
        embed_enabled=draw(hs.booleans()),
        vault=draw(hs.none() | NAME),
        project=draw(hs.none() | PATH.map(str) | NAME),
        memory_folder=draw(hs.none() | hs.lists(NAME, min_size=1, max_size=2).map("/".join)),
    )


@given(configs())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_trip_through_the_servers_reader(cfg: SessionConfig) -> None:
    env = cfg.to_env()
    assert all(name in env_vars() for name in env)
    assert SessionConfig.from_env(env) == cfg


def test_absent_variables_fall_back_to_the_file_then_the_defaults(tmp_path: Path, indexed: object) -> None:
    cfg_file = tmp_path / "config.toml"
    st.set_value("agent.write", "on", path=cfg_file, env={}, has_vault=True)
    st.set_value("write.per_minute", "7", path=cfg_file, env={}, has_vault=True)
    env = {"KMS_DB_PATH": str(tmp_path / "kms.db"), "KMS_CONFIG": str(cfg_file)}
    cfg = SessionConfig.from_env(env)
    # auto: on, because a vault is registered in that DB; file values; defaults for the rest
    assert (cfg.enabled, cfg.read_enabled, cfg.write_enabled) == (True, True, True)
    assert (cfg.per_minute, cfg.per_session, cfg.allowlist, cfg.vault) == (7, 200, (), None)
    assert cfg.config_path == cfg_file and cfg.session_id.startswith("s")
    # the environment wins over the file, and a child switch is off when its parent is
    cfg = SessionConfig.from_env({**env, "KMS_AGENT_TOOLS_ENABLED": "off", "KMS_WRITE_PER_MINUTE": "3"})
    assert (cfg.enabled, cfg.read_enabled, cfg.write_enabled, cfg.per_minute) == (True, False, False, 3)
    # 'auto' is valid where the schema says so, and resolves as load_settings does
    assert SessionConfig.from_env({**env, "KMS_ENABLED": "auto", "KMS_AGENT_TOOLS_ENABLED": "AUTO"}).read_enabled
    empty = {"KMS_DB_PATH": str(tmp_path / "none.db"), "KMS_CONFIG": str(tmp_path / "none.toml")}
    assert not SessionConfig.from_env({**empty, "KMS_ENABLED": "auto"}).enabled  # no vault registered there


def test_overrides_and_subsets(tmp_path: Path) -> None:
    env = {"KMS_DB_PATH": str(tmp_path / "kms.db"), "KMS_CONFIG": str(tmp_path / "c.toml")}
    cfg = SessionConfig.from_env(env, vault="a", watch=False, session_id="s1")
    assert (cfg.vault, cfg.watch, cfg.session_id) == ("a", False, "s1")
    assert cfg.to_env(fields=("db_path", "config_path")) == env
    with pytest.raises(ValueError, match="watch"):
        cfg.to_env(fields=("watch",))


BAD_VALUES = [
    ("KMS_ENABLED", "maybe", "true/false"),
    ("KMS_AGENT_TOOLS_ENABLED", "2", "true/false"),
    ("KMS_AGENT_WRITE_TOOLS_ENABLED", "auto", "true/false"),  # only the read switches default to auto
    ("KMS_AGENT_EDIT_TOOLS_ENABLED", "auto", "true/false"),
    ("KMS_AGENT_ORGANIZE_TOOLS_ENABLED", "edit", "true/false"),
    ("KMS_WRITE_MAX_FILES_PER_CALL", "0", "1 to 100000"),
    ("KMS_WRITE_APPROVAL", "sometimes", "off, bulk or always"),
    ("KMS_WRITE_APPROVAL_CHANNEL", "terminal", "host, dashboard or both"),
    ("KMS_WRITE_APPROVAL_LINES", "-1", "0 to 1000000"),
    ("KMS_WRITE_APPROVAL_TIMEOUT", "0", "1 to 86400"),
    ("KMS_REVIEW_MODE", "later", "before, after or off"),
    ("KMS_REVIEW_MAX_LINES", "-1", "0 to 1000000"),
    ("KMS_REVIEW_MAX_FILES", "many", "0 to 100000"),
    ("KMS_WRITE_ALLOWLIST", "/etc", "folder globs"),
    ("KMS_WRITE_ALLOWLIST", "drafts/**", "folder globs"),
    ("KMS_WRITE_ALLOWLIST", "../up", "folder globs"),
    ("KMS_WRITE_PER_MINUTE", "abc", "1 to 10000"),
    ("KMS_WRITE_PER_MINUTE", "0", "1 to 10000"),  # no 'unlimited', in any reader
    ("KMS_WRITE_PER_MINUTE", "10001", "1 to 10000"),
    ("KMS_WRITE_PER_SESSION", "-1", "1 to 1000000"),
    ("KMS_WRITE_PER_SESSION", "off", "1 to 1000000"),
    ("KMS_EMBED_ENABLED", "sometimes", "true/false"),
    ("KMS_SERVERS_PLAYWRIGHT_ENABLED", "x", "true/false"),
    ("KMS_SERVERS_FILESYSTEM_ENABLED", "yes please", "true/false"),
    ("KMS_LOG_LEVEL", "loud", "DEBUG"),
    ("KMS_TOKEN_LEASE_S", "soon", "a positive number of seconds"),
    ("KMS_TOKEN_LEASE_S", "-5", "a positive number of seconds"),
    ("KMS_EMBED_DOWNLOAD", "perhaps", "true/false"),
    ("KMS_WRITE_PER_MINUT", "3", "KMS_WRITE_PER_MINUTE"),  # unknown: did you mean
    ("KMS_VAULTS", "a", "KMS_VAULT"),
    ("KMS_MEMORY_FOLDER", "../notes", "vault-relative folder"),
    ("KMS_MEMORY_FOLDER", "memory/*", "vault-relative folder"),
    ("KMS_NOPE", "1", "docs/settings.md"),
    ("KMS_SERVICE_USE", "maybe", "true/false"),
    ("KMS_SERVICE_PORT", "80", "1024 to 65535"),
    ("KMS_SERVICE_PORT", "http", "1024 to 65535"),
    ("KMS_SERVICE_START_WAIT", "0", "1 to 60"),
    ("KMS_SERVICE_START_WAIT", "2s", "1 to 60"),
    ("KMS_SERVICE_READ_TIMEOUT", "0", "0.1 to 600"),
    ("KMS_SERVICE_READ_TIMEOUT", "ten", "0.1 to 600"),
    ("KMS_CAPTURE_ENABLED", "sometimes", "true/false"),
    ("KMS_CAPTURE_FOLDER", "../sessions", "vault-relative folder"),
    ("KMS_CAPTURE_ASK_AGENT", "-1", "0 (off) to 1000"),
    ("KMS_CAPTURE_PROMPTS", "all", "true/false"),
    ("KMS_REMOTE_ENABLED", "maybe", "true/false"),
    ("KMS_REMOTE_URL", "http://box.example.net", "https:// origin"),
    ("KMS_REMOTE_PORT", "80", "1024 to 65535"),
    ("KMS_REMOTE_MAX_SCOPES", "admin", "tier:write"),
    ("KMS_REMOTE_REDIRECT_URIS", "http://evil.test/cb", "https:// URIs"),
    ("KMS_REMOTE_FETCH_CLIENT_METADATA", "often", "true/false"),
]


@pytest.mark.parametrize(("var", "value", "valid"), BAD_VALUES)
def test_invalid_or_unknown_variables_are_refused_by_name(var: str, value: str, valid: str, tmp_path: Path) -> None:
    env = {"KMS_DB_PATH": str(tmp_path / "kms.db"), "KMS_CONFIG": str(tmp_path / "c.toml"), var: value}
    with pytest.raises(SessionConfigError) as e:
        SessionConfig.from_env(env)
    assert e.value.var == var and e.value.value == value
    assert var in str(e.value) and repr(value) in str(e.value) and valid in str(e.value)
    assert "\n" not in str(e.value)


# Any text is valid for these here; KMS_DB_PATH and KMS_VAULT are checked against the database by `kms mcp`
# (tests/cli/test_spawned_server.py).
FREE_TEXT = {
    "KMS_CRASH_AT",  # a test's fault-injection point: a name no check could call wrong (server/writes/crash_points.py)
    "KMS_DB_PATH",
    "KMS_CONFIG",
    "KMS_SESSION_ID",
    "KMS_VAULT",
    "KMS_CLAUDE_BIN",
    "KMS_EMBED_MODEL_DIR",
    "KMS_PROJECT",
    "KMS_SESSION_TOKEN",
    "KMS_SESSION_HOOKS",
    "KMS_TOKEN_CURSOR",
    "KMS_TOKEN_VSCODE",
    "KMS_TOKEN_WINDSURF",
    "KMS_TOKEN_CODEX",
    "KMS_TOKEN_GEMINI",
}


def test_bad_values_cover_every_variable_that_can_be_wrong() -> None:
    assert FREE_TEXT <= set(env_vars())
    assert set(env_vars()) - FREE_TEXT <= {var for var, _value, _valid in BAD_VALUES}


def test_edit_and_organize_tiers_need_every_tier_below_and_are_frozen(tmp_path: Path) -> None:
    cfg_path = tmp_path / "c.toml"
    base = {
        "KMS_DB_PATH": str(tmp_path / "kms.db"),
        "KMS_CONFIG": str(cfg_path),
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
    }
    off = SessionConfig.from_env(base)
    assert not off.tier_enabled("edit") and not off.tier_enabled("organize") and off.max_files_per_call == 50
    organize_only = SessionConfig.from_env(
        {**base, "KMS_AGENT_ORGANIZE_TOOLS_ENABLED": "1", "KMS_AGENT_WRITE_TOOLS_ENABLED": "1"}
    )
    assert not organize_only.tier_enabled("organize") and not organize_only.organize_enabled  # edit is off
    on = SessionConfig.from_env(
        {
            **base,
            "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
            "KMS_AGENT_EDIT_TOOLS_ENABLED": "1",
            "KMS_AGENT_ORGANIZE_TOOLS_ENABLED": "1",
            "KMS_WRITE_MAX_FILES_PER_CALL": "7",
        }
    )
    assert on.tier_enabled("edit") and on.tier_enabled("organize") and on.max_files_per_call == 7
    st.set_value("agent.edit", "false", path=cfg_path, env={}, has_vault=True)  # a later change: not this session's
    assert on.tier_enabled("edit")
    file_only = SessionConfig.from_env({k: v for k, v in base.items()} | {"KMS_AGENT_WRITE_TOOLS_ENABLED": "1"})
    assert not file_only.tier_enabled("edit")
    st.set_value("agent.edit", "true", path=cfg_path, env={}, has_vault=True)
    assert SessionConfig.from_env({**base, "KMS_AGENT_WRITE_TOOLS_ENABLED": "1"}).tier_enabled("edit")


def test_a_snapshot_gives_the_session_back_in_another_process(tmp_path: Path) -> None:
    """What a detached staged call keeps of its session (``pending_writes.session_json``) rebuilds it exactly,
    through JSON; a field a later version added is ignored, one an older row lacks takes its default."""
    import json

    cfg = SessionConfig(
        tmp_path / "kms.db",
        tmp_path / "config.toml",
        True,
        True,
        True,
        "s0123456789ab",
        allowlist=("notes/*",),
        token_folders=("drafts/*",),
        token_vaults=("a", "b"),
        token_id="t1",
        token_tier="write",
        review_detached=True,
        review_mode="after",
        project="/work/p",
    )
    data = json.loads(json.dumps(cfg.snapshot()))
    assert SessionConfig.from_snapshot(data) == cfg
    data["a_field_from_the_future"] = 1
    del data["review_max_files"]
    assert SessionConfig.from_snapshot(data, watch=False) == dataclasses.replace(cfg, watch=False)
