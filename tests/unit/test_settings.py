"""Settings schema, file, environment and warnings (server/config/settings.py)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from server.config import docs, environment, schema, values
from server.config import servers as cs
from server.config import settings as st
from server.store.db import connect
from server.vault.registry import add_vault

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return tmp_path / "conf" / "config.toml"


def load(cfg: Path, env: dict[str, str] | None = None, has_vault: bool = True) -> st.Settings:
    return st.load_settings(cfg, env or {}, has_vault=has_vault)


def test_defaults_and_auto(cfg: Path) -> None:
    with_vault, without = load(cfg, has_vault=True), load(cfg, has_vault=False)
    assert with_vault.get("kms.enabled") is True and with_vault.get("agent.read") is True
    assert without.get("kms.enabled") is False and without.get("agent.read") is False
    for s in (with_vault, without):
        assert s.get("agent.write") is False
        assert s.get("write.per_minute") == 10
        assert s.get("write.per_session") == 200
        assert s.get("write.allowlist") == []
        assert s.get("servers.playwright.enabled") is False
        assert s.entries["kms.enabled"].auto and s.source("kms.enabled") == "default"
        assert s.problems == []


def test_has_vault_counted_from_db(tmp_path: Path, cfg: Path) -> None:
    db_path = tmp_path / "kms.db"
    env = {"KMS_DB_PATH": str(db_path)}
    assert st.load_settings(cfg, env).get("kms.enabled") is False  # no DB yet
    assert not db_path.exists(), "reading settings must not create the DB"
    conn = connect(db_path)
    assert st.load_settings(cfg, env).get("kms.enabled") is False  # DB, no vault
    (tmp_path / "v").mkdir()
    add_vault(conn, tmp_path / "v")
    conn.close()
    assert st.count_vaults(db_path) == 1
    assert st.load_settings(cfg, env).get("agent.read") is True


def test_set_get_unset_roundtrip_and_file_mode(cfg: Path) -> None:
    env: dict[str, str] = {}
    assert st.set_value("write.per_minute", ["25"], path=cfg, env=env, has_vault=True) == []
    assert st.set_value("agent.read", "off", path=cfg, env=env, has_vault=True) == []
    st.set_value("embed.model_dir", "~/models", path=cfg, env=env, has_vault=True)
    s = load(cfg)
    assert s.get("write.per_minute") == 25 and s.source("write.per_minute") == "file"
    assert s.get("agent.read") is False
    assert s.get("embed.model_dir") == "~/models"
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert stat.S_IMODE(cfg.parent.stat().st_mode) == 0o700
    assert not [p for p in cfg.parent.iterdir() if p.name.endswith(".tmp")], "temp file left behind"
    assert st.unset_value("write.per_minute", path=cfg, env=env) is True
    assert st.unset_value("write.per_minute", path=cfg, env=env) is False
    assert load(cfg).get("write.per_minute") == 10
    # 'auto' on an auto key is the same as unsetting it
    st.set_value("agent.read", "auto", path=cfg, env=env, has_vault=True)
    assert load(cfg).entries["agent.read"].auto
    assert "agent" not in cfg.read_text()  # the emptied table was pruned


@pytest.mark.parametrize(
    ("key", "values", "needle"),
    [
        ("agent.write", ["maybe"], "true/false"),
        ("agent.write", ["auto"], "true/false"),  # auto only for auto keys
        ("write.per_minute", ["ten"], "whole number"),
        ("write.per_minute", ["0"], "1 to 10000"),
        ("write.per_session", ["1", "2"], "expected one value"),
        ("write.allowlist", ["../secrets"], "'..'"),
        ("write.allowlist", ["/etc"], "vault-relative"),
        ("write.allowlist", ["notes/**"], "'**'"),
        ("write.allowlist", ["a\\b"], "'/'"),
    ],
)
def test_bad_values_name_the_valid_ones(cfg: Path, key: str, values: list[str], needle: str) -> None:
    with pytest.raises(schema.SettingValueError) as info:
        st.set_value(key, values, path=cfg, env={}, has_vault=True)
    assert needle in str(info.value)
    assert info.value.valid and info.value.valid in str(info.value)
    assert not cfg.exists(), "a rejected value must not be written"


def test_unknown_key_suggests_closest(cfg: Path) -> None:
    with pytest.raises(schema.UnknownSettingError) as info:
        st.set_value("write.alowlist", ["x"], path=cfg, env={})
    assert info.value.suggestions[0] == "write.allowlist"
    assert "Did you mean: write.allowlist" in str(info.value)
    with pytest.raises(schema.UnknownSettingError):
        load(cfg).get("agent.wirte")
    with pytest.raises(schema.UnknownSettingError):
        st.unset_value("nope", path=cfg, env={})


def test_globs_parse_normalize_and_dedupe(cfg: Path) -> None:
    st.set_value("write.allowlist", ["drafts/*", "inbox/", "inbox", "a,b", "/"], path=cfg, env={}, has_vault=True)
    assert load(cfg).get("write.allowlist") == ["drafts/*", "inbox", "a", "b", "/"]
    assert values.parse_value("write.allowlist", "x/*\ny, z") == ["x/*", "y", "z"]
    assert values.parse_value("write.allowlist", ".") == ["."]


def test_shell_expanded_glob_warns_with_quoted_form(cfg: Path, tmp_path: Path) -> None:
    (tmp_path / "drafts").mkdir()
    for name in ("a.md", "b.md"):
        (tmp_path / "drafts" / name).write_text("x")
    warnings = st.set_value(
        "write.allowlist", ["drafts/a.md", "drafts/b.md"], path=cfg, env={}, has_vault=True, cwd=tmp_path
    )
    assert any("kms config set write.allowlist 'drafts/*'" in w for w in warnings)
    # one existing file is enough
    (tmp_path / "notes.md").write_text("x")
    warnings = st.set_value("write.allowlist", ["notes.md"], path=cfg, env={}, has_vault=True, cwd=tmp_path)
    assert any("unquoted glob" in w for w in warnings)
    # a quoted glob that names no files is fine
    warnings = st.set_value("write.allowlist", ["drafts/*", "inbox"], path=cfg, env={}, has_vault=True, cwd=tmp_path)
    assert not any("unquoted" in w for w in warnings)


def test_child_on_under_parent_off_warns(cfg: Path) -> None:
    st.set_value("write.allowlist", ["inbox"], path=cfg, env={}, has_vault=True)
    st.set_value("agent.read", "false", path=cfg, env={}, has_vault=True)
    warnings = st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True)
    assert any("agent.read is off" in w and "kms config set agent.read true" in w for w in warnings)
    # with no vault, the auto parents are off too, and the hint says why
    st.unset_value("agent.read", path=cfg, env={})
    warnings = st.set_value("agent.write", "on", path=cfg, env={}, has_vault=False)
    assert any("agent.read and kms.enabled are off" in w and "kms vault add" in w for w in warnings)
    # no warning when the chain is on
    assert st.set_value("agent.write", "on", path=cfg, env={}, has_vault=True) == []
    assert load(cfg).active("agent.write") is True
    assert load(cfg, has_vault=False).active("agent.write") is False


def test_write_on_with_empty_allowlist_warns_that_it_means_everywhere(cfg: Path) -> None:
    warnings = st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True)
    assert any("write.allowlist is empty, so agents may write in every folder" in w for w in warnings)
    st.set_value("write.allowlist", "inbox", path=cfg, env={}, has_vault=True)
    assert st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True) == []


def test_env_overrides_file_and_is_reported(cfg: Path) -> None:
    st.set_value("write.per_minute", "30", path=cfg, env={}, has_vault=True)
    env = {
        "KMS_WRITE_PER_MINUTE": "5",
        "KMS_WRITE_ALLOWLIST": "drafts/*,inbox",
        "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
        "KMS_ENABLED": "0",
    }
    s = load(cfg, env)
    assert s.get("write.per_minute") == 5 and s.source("write.per_minute") == "env"
    assert s.entries["write.per_minute"].file_value == 30
    assert s.get("write.allowlist") == ["drafts/*", "inbox"]
    assert s.get("agent.write") is True and s.source("agent.write") == "env"
    assert s.get("kms.enabled") is False and not s.entries["kms.enabled"].auto
    assert s.source("agent.read") == "default"
    warnings = st.set_value("write.per_minute", "40", path=cfg, env=env, has_vault=True)
    assert any("$KMS_WRITE_PER_MINUTE" in w for w in warnings)
    # an empty list env var means "nowhere"
    assert load(cfg, {"KMS_WRITE_ALLOWLIST": ""}).get("write.allowlist") == []


def test_list_reports_sources(cfg: Path) -> None:
    st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True)
    entries = {e.key: e for e in st.list_settings(path=cfg, env={"KMS_WRITE_PER_SESSION": "7"}, has_vault=True)}
    assert list(entries) == list(schema.SETTINGS)
    assert entries["agent.write"].source == "file"
    assert entries["write.per_session"].source == "env" and entries["write.per_session"].value == 7
    assert entries["write.per_minute"].source == "default"
    assert entries["kms.enabled"].to_json()["default"] == "auto"


def test_bad_file_never_breaks_loading(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[agent]\nwrite = "yes please"\nwirte = true\n[write]\nper_minute = 20\n')
    s = load(cfg, {"KMS_WRITE_PER_SESSION": "lots"})
    assert s.get("agent.write") is False  # default used
    assert s.get("write.per_minute") == 20  # the good key still applies
    text = "\n".join(s.problems)
    assert "agent.write" in text and "unknown key 'agent.wirte'" in text and "did you mean agent.write" in text
    assert "$KMS_WRITE_PER_SESSION" in text
    # unknown keys survive a write
    st.set_value("write.per_session", "9", path=cfg, env={}, has_vault=True)
    assert "wirte" in cfg.read_text()


def test_unparsable_file_is_reported_and_not_overwritten(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text("this is = = not toml")
    s = load(cfg)
    assert s.problems and "Cannot read" in s.problems[0]
    with pytest.raises(schema.SettingsFileError):
        st.set_value("agent.write", "true", path=cfg, env={})
    assert cfg.read_text() == "this is = = not toml"


def test_override_for_one_session(cfg: Path) -> None:
    s = load(cfg).with_override("agent.write", True)
    assert s.get("agent.write") is True and s.source("agent.write") == "override"
    assert load(cfg).get("agent.write") is False  # not saved


def test_custom_servers_add_enable_remove(cfg: Path) -> None:
    st.add_custom_server(
        cs.CustomServer("gh", command="npx", args=["-y", "srv"], env={"GITHUB_TOKEN": "t"}), path=cfg, env={}
    )
    st.add_custom_server(
        cs.CustomServer("docs", url="https://x.test/mcp", headers={"Authorization": "Bearer z"}),
        path=cfg,
        env={},
    )
    with pytest.raises(schema.SettingValueError, match="exists"):
        st.add_custom_server(cs.CustomServer("gh", command="other"), path=cfg, env={})
    for bad in (
        cs.CustomServer("kms", command="x"),
        cs.CustomServer("playwright", command="x"),
        cs.CustomServer("bad name", command="x"),
        cs.CustomServer("both", command="x", url="https://x"),
        cs.CustomServer("ftp", url="ftp://x"),
        cs.CustomServer("mixed", url="https://x", env={"A": "b"}),
    ):
        with pytest.raises(schema.SettingValueError):
            st.add_custom_server(bad, path=cfg, env={})
    servers = load(cfg).custom_servers
    assert servers["gh"].kind == "stdio" and servers["gh"].env == {"GITHUB_TOKEN": "t"}
    assert servers["docs"].kind == "http" and servers["docs"].headers == {"Authorization": "Bearer z"}
    st.set_server_enabled("docs", False, path=cfg, env={})
    assert load(cfg).custom_servers["docs"].enabled is False
    st.set_server_enabled("playwright", True, path=cfg, env={}, has_vault=True)
    assert load(cfg).get("servers.playwright.enabled") is True
    with pytest.raises(cs.UnknownServerError, match="playwright"):
        st.set_server_enabled("playwrite", True, path=cfg, env={})
    assert st.remove_custom_server("gh", path=cfg, env={}) is True
    assert st.remove_custom_server("gh", path=cfg, env={}) is False
    assert list(load(cfg).custom_servers) == ["docs"]


def test_broken_custom_server_is_skipped_with_a_problem(cfg: Path) -> None:
    cfg.parent.mkdir(parents=True)
    cfg.write_text('[servers.custom.x]\nargs = ["a"]\n[servers.custom.ok]\ncommand = "run"\n')
    s = load(cfg)
    assert list(s.custom_servers) == ["ok"] and any("command or url" in p for p in s.problems)


def test_config_path_env_override(tmp_path: Path) -> None:
    assert st.default_config_path({"KMS_CONFIG": str(tmp_path / "c.toml")}) == tmp_path / "c.toml"
    assert st.default_config_path({}).name == "config.toml"


def test_schema_is_well_formed() -> None:
    envs = [s.env for s in schema.SETTINGS.values() if s.env]
    assert len(set(envs)) == len(envs) and all(e.startswith("KMS_") for e in envs)
    # privacy rules judge the shared index, and the history keeps what the shared index sees (whichever process
    # indexes), so no session may carry its own: settings file only; so are the shared database's backups
    assert [s.key for s in schema.SETTINGS.values() if not s.env] == [
        "privacy.frontmatter_key",
        "privacy.hide_folders",
        "privacy.hide_tags",
        "history.enabled",
        "history.keep_all_days",
        "history.keep_daily_days",
        "history.max_mb",
        "backup.enabled",
        "backup.keep",
        # which names are conflict copies is the shared index's too; which machine makes kms's own writes is
        # the machine's (its settings file), never one session's
        "sync.conflict_patterns",
        "sync.own_writes_here",
        # the service's sync timings are the machine's too (its watcher reads them), never one session's
        "sync.git_every",
        "sync.git_quiet",
        "sync.watcher_step_aside",
    ]
    for s in schema.SETTINGS.values():
        assert s.description and s.valid_values()
        if s.parent:
            assert s.parent in schema.SETTINGS
        if not s.auto:
            assert values.validate_value(s.key, s.default) == s.default
    required = {
        "kms.enabled",
        "agent.read",
        "agent.write",
        "write.allowlist",
        "write.per_minute",
        "write.per_session",
        "embed.model_dir",
        "embed.enabled",
    }
    assert required <= set(schema.SETTINGS)
    assert {f"servers.{n}.enabled" for n in schema.BUILTIN_SERVERS} <= set(schema.SETTINGS)
    assert schema.SETTINGS["agent.read"].env == "KMS_AGENT_TOOLS_ENABLED"
    assert schema.SETTINGS["agent.write"].env == "KMS_AGENT_WRITE_TOOLS_ENABLED"


def test_settings_doc_is_current() -> None:
    doc = ROOT / "docs" / "settings.md"
    assert doc.read_text() == docs.settings_markdown(), "run: python scripts/gen_settings_doc.py"


def test_core_does_not_import_front_ends() -> None:
    text = (ROOT / "server" / "config" / "settings.py").read_text()
    for banned in ("import typer", "import textual", "rich.console", "from kmscli", "import kmscli"):
        assert banned not in text


def test_env_text_roundtrip() -> None:
    assert environment.env_text(True) == "1" and environment.env_text(False) == "0"
    assert environment.env_text(["a/*", "b"]) == "a/*,b"
    for key in ("agent.write", "write.allowlist", "write.per_minute"):
        value = schema.SETTINGS[key].default if key != "write.allowlist" else ["x/*", "y"]
        assert values.parse_value(key, environment.env_text(value)) == value


def test_lock_file_does_not_break_concurrent_writers(cfg: Path) -> None:
    # Two writers in sequence through the lock keep both changes (read-modify-write under flock).
    st.set_value("write.per_minute", "11", path=cfg, env={}, has_vault=True)
    pid = os.fork()
    if pid == 0:  # pragma: no cover - child
        try:
            st.set_value("write.per_session", "22", path=cfg, env={}, has_vault=True)
        finally:
            os._exit(0)
    st.set_value("embed.enabled", "false", path=cfg, env={}, has_vault=True)
    os.waitpid(pid, 0)
    s = load(cfg)
    assert (s.get("write.per_minute"), s.get("write.per_session"), s.get("embed.enabled")) == (11, 22, False)


def test_settings_lock_excludes_a_second_process(cfg: Path) -> None:
    st.set_value("write.per_minute", "11", path=cfg, env={}, has_vault=True)
    child = (
        "import sys\nfrom server.config import settings as st\nprint('ready', flush=True)\n"
        "st.set_value('write.per_session', '22', path=sys.argv[1], env={}, has_vault=True)\n"
    )
    with st.settings_lock(cfg):
        proc = subprocess.Popen([sys.executable, "-c", child, str(cfg)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.0)  # blocked on the lock this process holds
        assert load(cfg).get("write.per_session") == 200, "nothing written while the lock is held"
    assert proc.wait(timeout=60) == 0
    s = load(cfg)
    assert (s.get("write.per_minute"), s.get("write.per_session")) == (11, 22)
