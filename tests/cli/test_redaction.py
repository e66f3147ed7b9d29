"""Secrets in custom servers never reach the screen: one rule set (server/config/redact.py) for
``kms servers list [--json]``, ``kms doctor --json``, ``kms config list [--json]`` and
``kms claude --print-config``; ``--show-secrets`` prints them on purpose."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.cli import kms

from server.config.redact import REDACTED, redact

# 18 secret shapes, each a distinct marker that must never be printed
SECRETS = {
    "pg_password": "pgPW1x9",
    "https_password": "httpsPW2y8",
    "sig": "SIGvalue3z7",
    "token_param": "TOKparam4w6",
    "slack_hook": "T000/B000/HOOKpath5v5",
    "sentry": "SENTRYkey6u4",
    "json_token": "JSONtok7t3",
    "password_flag": "FLAGpw8s2",
    "p_attached": "ATTpw9r1",
    "github": "ghp_GITHUB10q0aaaaaaaaaaaa",
    "authorization": "Bearer AUTHhdr11p9",
    "api_key_header": "APIKEYhdr12o8",
    "token_eq_flag": "EQtok13n7",
    "env_secret": "ENVsecret14m6",
    "aws": "AKIAAWSKEY15L5ABCD",
    "kv_arg": "KVpw16k4",
    "cookie_header": "COOKIE17j3",
    "openai": "sk-OPENAI18i2abcdef",
}


def config_with_secrets(path: Path) -> Path:
    s = SECRETS
    path.write_text(f"""
[servers.custom.db]
command = "dbtool"
args = ["postgres://admin:{s["pg_password"]}@db.test:5432/app", "--password", "{s["password_flag"]}",
        "-p{s["p_attached"]}", "--api-token={s["token_eq_flag"]}", "DB_PASSWORD={s["kv_arg"]}",
        '{{"auth": {{"token": "{s["json_token"]}"}}}}', "--verbose"]
[servers.custom.db.env]
GITHUB_TOKEN = "{s["github"]}"
SENTRY_DSN = "https://{s["sentry"]}@o1.ingest.sentry.io/42"
MY_SECRET = "{s["env_secret"]}"
AWS_ID = "{s["aws"]}"
OPENAI = "{s["openai"]}"
LOG_LEVEL = "debug"

[servers.custom.api]
url = "https://user:{s["https_password"]}@api.test/mcp?sig={s["sig"]}&token={s["token_param"]}&page=2"
[servers.custom.api.headers]
Authorization = "{s["authorization"]}"
X-Api-Key = "{s["api_key_header"]}"
Cookie = "{s["cookie_header"]}"
X-Trace = "on"

[servers.custom.hook]
url = "https://hooks.slack.com/services/{s["slack_hook"]}"
""")
    return path


def leaked(text: str) -> list[str]:
    return [name for name, value in SECRETS.items() if value in text or value.split()[-1] in text]


@pytest.fixture
def cfg(tmp_path: Path) -> dict[str, str]:
    return {"KMS_CONFIG": str(config_with_secrets(tmp_path / "config.toml"))}


@pytest.mark.parametrize(
    "args",
    [
        ["servers", "list"],
        ["servers", "list", "--json"],
        ["doctor", "--json"],
        ["config", "list", "--json"],
        ["config", "list"],
    ],
)
def test_no_command_prints_any_of_the_18_secrets(cfg: dict[str, str], args: list[str]) -> None:
    result = kms(*args, COLUMNS="400", **cfg)
    assert result.exit_code in (0, 1), result.output  # doctor: 1 without claude on PATH
    assert leaked(result.output) == []
    if args != ["config", "list"]:  # the table lists settings only, not the servers
        assert REDACTED in result.output and "dbtool" in result.output
    if "--json" in args:
        assert "debug" in result.stdout  # not everything is masked: LOG_LEVEL stays
        json.loads(result.stdout)


@pytest.mark.parametrize("args", [["servers", "list", "--json"], ["config", "list", "--json"], ["doctor", "--json"]])
def test_show_secrets_prints_them_on_purpose(cfg: dict[str, str], args: list[str]) -> None:
    result = kms(*args, "--show-secrets", **cfg)
    shown = json.loads(result.stdout)
    assert shown and SECRETS["github"] in result.stdout and SECRETS["pg_password"] in result.stdout


def test_redaction_keeps_what_is_not_secret() -> None:
    doc = {
        "args": ["--verbose", "-v", "--port", "8080", "plain", "https://ok.test/x?page=2"],
        "env": {"LOG_LEVEL": "debug", "KMS_SESSION_ID": "s1", "KMS_WRITE_PER_SESSION": "200"},
        "settings": [{"key": "agent.read", "value": True}, {"key": "write.per_session", "value": 200}],
    }
    assert redact(doc) == doc
    assert redact({"x": "y"}) is not None and redact([1, None, True]) == [1, None, True]


def test_print_config_masks_all_18(cfg: dict[str, str], indexed: object) -> None:
    result = kms("claude", "--print-config", **cfg)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"db", "api", "hook"} <= set(doc["mcpServers"]) and leaked(result.stdout) == []


def test_print_config_show_secrets_prints_them_on_purpose(cfg: dict[str, str], indexed: object) -> None:
    result = kms("claude", "--print-config", "--show-secrets", **cfg)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert {"db", "api", "hook"} <= set(doc["mcpServers"]) and REDACTED not in result.stdout
    assert SECRETS["github"] in result.stdout and SECRETS["pg_password"] in result.stdout
    alone = kms("claude", "--show-secrets", **cfg)  # never starts claude with a flag that means nothing there
    assert alone.exit_code == 2 and "only goes with --print-config" in alone.output


def test_no_setting_is_masked_for_its_name(tmp_path: Path) -> None:
    """Every settings key, each set in the file: none holds a secret, so each prints as it is, in the
    table and in both JSON documents (``privacy.frontmatter_key`` holds a property name)."""
    from server.config import schema
    from server.config.values import format_value

    values = {
        "privacy.frontmatter_key": "secret_stuff",
        "memory.folder": "mem",
        "write.approval": "always",
        "embed.model_dir": str(tmp_path / "models"),
        "write.allowlist": ["drafts/**"],
    }
    path = tmp_path / "every.toml"
    for key, setting in schema.SETTINGS.items():
        value = values.get(key, setting.default if setting.default is not None else True)
        kms("config", "set", key, format_value(value), KMS_CONFIG=str(path))
    env = {"KMS_CONFIG": str(path), "COLUMNS": "400"}
    shown = {
        s["key"]: s["value"]
        for s in json.loads(kms("config", "list", "--json", "--show-secrets", **env).stdout)["settings"]
    }
    assert set(shown) == set(schema.SETTINGS) and shown["privacy.frontmatter_key"] == "secret_stuff"
    listed = {s["key"]: s["value"] for s in json.loads(kms("config", "list", "--json", **env).stdout)["settings"]}
    assert listed == shown
    doctor = json.loads(kms("doctor", "--json", **env).stdout)["settings"]["values"]
    assert doctor == shown
    table = kms("config", "list", **env).stdout
    assert REDACTED not in table
    for key in schema.SETTINGS:
        assert any(line.split("│")[1].strip() == key for line in table.splitlines() if line.count("│") > 2), key
    assert "secret_stuff" in table
