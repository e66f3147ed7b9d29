"""MCP-config composition (kmscli/compose.py): builders, composer, private files, redaction, snippets."""

from __future__ import annotations

import json
import shlex
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from kmscli import compose as c
from kmscli.hosts import HOSTS, get_host, host_entry, snippet
from server.config import schema
from server.config import servers as cs
from server.config import settings as st
from server.config.redact import REDACTED, redact
from server.config.session_contract import SessionConfig
from server.errors import KmsError


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    return tmp_path / "config.toml"


def built(entry: c.Built) -> tuple[str, c.Entry]:
    """A server the builder did add."""
    assert entry is not None
    return entry


def settings_for(cfg: Path, env: dict[str, str] | None = None, has_vault: bool = True) -> st.Settings:
    return st.load_settings(cfg, env or {}, has_vault=has_vault)


def session(tmp_path: Path, **kw) -> c.Session:
    base = {"id": "s0123456789ab", "db_path": tmp_path / "kms.db", "cwd": tmp_path / "work"}
    return c.Session(**{**base, **kw})


def test_kms_builder_env_carries_the_effective_settings(cfg: Path, tmp_path: Path) -> None:
    st.set_value("write.allowlist", ["drafts/*", "inbox"], path=cfg, env={}, has_vault=True)
    st.set_value("write.per_minute", "7", path=cfg, env={}, has_vault=True)
    st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True)
    st.set_value("embed.model_dir", str(tmp_path / "models"), path=cfg, env={}, has_vault=True)
    name, entry = built(c.kms_server(settings_for(cfg), session(tmp_path, vault="notes")))
    assert name == "kms"
    assert entry["command"] == sys.executable and Path(entry["command"]).is_absolute()
    assert entry["args"] == ["-E", "-P", "-m", "kmscli", "mcp"]  # isolated from the project and PYTHONPATH
    env = entry["env"]
    assert env == {
        "KMS_DB_PATH": str(tmp_path / "kms.db"),
        "KMS_CONFIG": str(cfg),
        "KMS_SESSION_ID": "s0123456789ab",
        "KMS_VAULT": "notes",
        "KMS_PROJECT": str(tmp_path / "work"),  # the working directory: the session's identity (issue 14)
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "KMS_AGENT_WRITE_TOOLS_ENABLED": "1",
        "KMS_AGENT_EDIT_TOOLS_ENABLED": "0",
        "KMS_AGENT_ORGANIZE_TOOLS_ENABLED": "0",
        "KMS_WRITE_ALLOWLIST": "drafts/*,inbox",
        "KMS_WRITE_PER_MINUTE": "7",
        "KMS_WRITE_PER_SESSION": "200",
        "KMS_WRITE_MAX_FILES_PER_CALL": "50",
        "KMS_WRITE_APPROVAL": "off",
        "KMS_WRITE_APPROVAL_LINES": "20",
        "KMS_WRITE_APPROVAL_TIMEOUT": "120",
        "KMS_WRITE_APPROVAL_CHANNEL": "both",
        "KMS_REVIEW_MODE": "",  # unset: write.approval decides (server/config/review.py)
        "KMS_REVIEW_MAX_LINES": "0",
        "KMS_REVIEW_MAX_FILES": "0",
        "KMS_EMBED_MODEL_DIR": str(tmp_path / "models"),
        "KMS_EMBED_ENABLED": "1",
        "KMS_EMBED_DOWNLOAD": "0",  # no network unless asked (issue 17)
        "KMS_MEMORY_FOLDER": "kms-memory",
        "KMS_CAPTURE_ENABLED": "1",
        "KMS_CAPTURE_FOLDER": "kms-sessions",
        "KMS_CAPTURE_ASK_AGENT": "0",
        "KMS_CAPTURE_PROMPTS": "0",
    }
    # the server's own reader gives back what the launcher meant, whatever the file says later
    cfg.unlink()
    back = SessionConfig.from_env(env)
    assert back == SessionConfig.from_settings(
        settings_for(cfg.with_name("gone.toml")),
        db_path=tmp_path / "kms.db",
        session_id="s0123456789ab",
        vault="notes",
        config_path=cfg,
        write_enabled=True,
        per_minute=7,
        allowlist=("drafts/*", "inbox"),
        embed_model_dir=str(tmp_path / "models"),
        project=str(tmp_path / "work"),
    )


def test_kms_block_left_out_when_agents_may_not_read(cfg: Path, tmp_path: Path) -> None:
    st.set_value("agent.write", "true", path=cfg, env={}, has_vault=True)
    st.set_value("agent.read", "false", path=cfg, env={}, has_vault=True)
    assert c.kms_server(settings_for(cfg), session(tmp_path)) is None
    assert "kms" not in c.compose(settings_for(cfg), session(tmp_path))["mcpServers"]
    st.set_value("agent.read", "true", path=cfg, env={}, has_vault=True)
    st.set_value("kms.enabled", "false", path=cfg, env={}, has_vault=True)
    assert c.kms_server(settings_for(cfg), session(tmp_path)) is None
    st.unset_value("kms.enabled", path=cfg, env={})
    env = built(c.kms_server(settings_for(cfg), session(tmp_path)))[1]["env"]
    assert (env["KMS_ENABLED"], env["KMS_AGENT_TOOLS_ENABLED"], env["KMS_AGENT_WRITE_TOOLS_ENABLED"]) == ("1", "1", "1")
    assert env["KMS_EMBED_MODEL_DIR"] == "" and "KMS_VAULT" not in env  # no dir, every vault


def test_kms_builder_off_when_disabled_or_no_vault(cfg: Path, tmp_path: Path) -> None:
    assert c.kms_server(settings_for(cfg, has_vault=False), session(tmp_path)) is None
    assert c.kms_server(settings_for(cfg, {"KMS_ENABLED": "0"}), session(tmp_path)) is None
    assert c.kms_server(settings_for(cfg, {"KMS_AGENT_TOOLS_ENABLED": "0"}), session(tmp_path)) is None


def test_playwright_builder(cfg: Path, tmp_path: Path) -> None:
    assert c.playwright_server(settings_for(cfg), session(tmp_path)) is None
    st.set_value("servers.playwright.enabled", "on", path=cfg, env={}, has_vault=True)
    assert c.playwright_server(settings_for(cfg), session(tmp_path)) == (
        "playwright",
        {"command": "npx", "args": ["-y", "@playwright/mcp@latest"]},
    )


def test_filesystem_builder_scopes_to_vaults_or_cwd(cfg: Path, tmp_path: Path) -> None:
    assert c.filesystem_server(settings_for(cfg), session(tmp_path)) is None
    s = settings_for(cfg, {"KMS_SERVERS_FILESYSTEM_ENABLED": "1"})
    name, entry = built(c.filesystem_server(s, session(tmp_path)))
    assert name == "filesystem"
    assert entry["args"] == ["-y", "@modelcontextprotocol/server-filesystem", str(tmp_path / "work")]
    roots = (tmp_path / "a", tmp_path / "b")
    entry = built(c.filesystem_server(s, session(tmp_path, vault_roots=roots)))[1]
    assert entry["args"][2:] == [str(r) for r in roots]


def test_custom_entries(tmp_path: Path) -> None:
    stdio = cs.CustomServer("gh", command="npx", args=["-y", "x"], env={"GITHUB_TOKEN": "t"})
    assert c.custom_entry(stdio) == {"command": "npx", "args": ["-y", "x"], "env": {"GITHUB_TOKEN": "t"}}
    assert c.custom_entry(cs.CustomServer("p", command="run")) == {"command": "run", "args": []}
    http = cs.CustomServer("d", url="https://x.test/mcp", headers={"Authorization": "Bearer z"})
    assert c.custom_entry(http) == {
        "type": "http",
        "url": "https://x.test/mcp",
        "headers": {"Authorization": "Bearer z"},
    }


def test_compose_merges_enabled_and_isolated_drops_kms(cfg: Path, tmp_path: Path) -> None:
    st.set_value("servers.playwright.enabled", "true", path=cfg, env={}, has_vault=True)
    st.add_custom_server(cs.CustomServer("gh", command="npx", args=["gh"]), path=cfg, env={})
    st.add_custom_server(cs.CustomServer("off", command="x", enabled=False), path=cfg, env={})
    st.add_custom_server(cs.CustomServer("docs", url="https://d.test/mcp"), path=cfg, env={})
    s = settings_for(cfg)
    doc = c.compose(s, session(tmp_path))
    assert list(doc) == ["mcpServers"]
    assert list(doc["mcpServers"]) == ["kms", "playwright", "docs", "gh"]
    isolated = c.compose(s, session(tmp_path), isolated=True)
    assert "kms" not in isolated["mcpServers"] and "playwright" in isolated["mcpServers"]
    # nothing enabled -> empty
    assert c.compose(settings_for(tmp_path / "none.toml", has_vault=False), session(tmp_path)) == {"mcpServers": {}}
    assert c.compose(settings_for(tmp_path / "none.toml"), session(tmp_path), isolated=True) == {"mcpServers": {}}


def test_every_builtin_has_a_settings_switch() -> None:
    assert set(c.BUILTIN_BUILDERS) == {"kms", *schema.BUILTIN_SERVERS}


def test_session_config_is_private_and_cleaned_up(cfg: Path, tmp_path: Path, monkeypatch) -> None:
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.chdir(tmp_path)
    doc = c.compose(settings_for(cfg), session(tmp_path))
    path = c.write_session_config(doc, "s0123456789ab")
    assert path is not None and path.is_file()
    assert json.loads(path.read_text()) == doc
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert runtime in path.parents and tmp_path not in (path.parent, path.parent.parent.parent)
    assert not list(tmp_path.glob("*.json")), "never written to the cwd"
    c.remove_session_config(path)
    assert not path.exists() and not path.parent.exists()
    c.remove_session_config(path)  # idempotent
    c.remove_session_config(None)


def test_session_config_falls_back_to_a_private_temp_dir(cfg: Path, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "missing" / "dir"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # the stdlib caches $TMPDIR
    path = c.write_session_config({"mcpServers": {"x": {"command": "y"}}}, "../../evil id")
    assert path is not None and path.parent.parent == tmp_path
    assert ".." not in path.parent.name and " " not in path.parent.name
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    c.remove_session_config(path)
    assert not path.parent.exists()


def test_no_servers_writes_nothing(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    assert c.write_session_config({"mcpServers": {}}, "s1") is None
    assert list(tmp_path.iterdir()) == []


def test_redact_masks_secret_looking_values() -> None:
    doc: dict[str, Any] = {
        "mcpServers": {
            "a": {
                "command": "x",
                "args": ["--api-key=abc123", "--verbose", "plain"],
                "env": {
                    "GITHUB_TOKEN": "ghp_x",
                    "OPENAI_API_KEY": "sk-123",
                    "DB_PASSWORD": "p",
                    "SOME_SECRET": "s",
                    "HEADER_VALUE": "Bearer abc",
                    "OTHER": "sk-abcdefghijkl",
                    "KMS_SESSION_ID": "s0123",
                    "KMS_WRITE_PER_SESSION": "200",
                    "EMPTY_TOKEN": "",
                },
            },
            "b": {
                "type": "http",
                "url": "https://h.test/mcp?token=zzz&x=1",
                "headers": {"Authorization": "Basic dXNlcg==", "X-Trace": "on", "x-api-key": "k"},
            },
        }
    }
    out = redact(doc)
    env = out["mcpServers"]["a"]["env"]
    for k in ("GITHUB_TOKEN", "OPENAI_API_KEY", "DB_PASSWORD", "SOME_SECRET", "HEADER_VALUE", "OTHER"):
        assert env[k] == REDACTED, k
    assert env["KMS_SESSION_ID"] == "s0123" and env["KMS_WRITE_PER_SESSION"] == "200"
    assert env["EMPTY_TOKEN"] == ""
    assert out["mcpServers"]["a"]["args"] == ["--api-key=***", "--verbose", "plain"]
    b = out["mcpServers"]["b"]
    assert b["url"] == "https://h.test/mcp?token=***&x=1"
    assert b["headers"] == {"Authorization": "***", "X-Trace": "on", "x-api-key": "***"}
    assert doc["mcpServers"]["a"]["env"]["GITHUB_TOKEN"] == "ghp_x", "the input is not modified"


@pytest.mark.parametrize("host", list(HOSTS))
def test_snippets_for_each_host(host: str, cfg: Path, tmp_path: Path) -> None:
    entry = c.standalone_kms_entry(settings_for(cfg), tmp_path / "kms.db", python="/opt/py/bin/python")
    shaped = host_entry(HOSTS[host], entry, env={})
    assert shaped["command"] == "/opt/py/bin/python" and shaped["args"] == ["-E", "-P", "-m", "kmscli", "mcp"]
    # the DB and the settings file, nothing else: the server reads the rest from the file at each start
    assert shaped["env"] == {"KMS_DB_PATH": str(tmp_path / "kms.db"), "KMS_CONFIG": str(cfg)}
    text, hint = snippet(HOSTS[host], shaped)
    if host == "claude-code":
        words = shlex.split(text)
        assert words[:5] == ["claude", "mcp", "add", "--scope", "user"] and words[5] == "kms"
        assert words[words.index("--") + 1 :] == ["/opt/py/bin/python", "-E", "-P", "-m", "kmscli", "mcp"]
        assert f"KMS_DB_PATH={tmp_path / 'kms.db'}" in words and f"KMS_CONFIG={cfg}" in words
    else:
        assert "/opt/py/bin/python" in text and "--install" in hint
    with pytest.raises(KmsError):
        get_host("emacs")
