"""``kms mcp-config HOST``: each host's document parsed the way that host parses it, and ``--install`` /
``--uninstall`` on real config files in a temporary HOME (everything else kept, a backup, bad files refused)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from support.cli import kms, ok, refused, said

from kmscli import jsonc
from kmscli.hosts import HOSTS

JSON_HOSTS = {
    "claude-desktop": "mcpServers",
    "cursor": "mcpServers",
    "windsurf": "mcpServers",
    "gemini": "mcpServers",
    "vscode": "servers",
    "zed": "context_servers",
}


def kms_entry_of(host: str, stdout: str) -> dict:
    if host == "codex":
        return tomllib.loads(stdout)["mcp_servers"]["kms"]
    doc = json.loads(stdout) if HOSTS[host].fmt == "json" else json.loads(jsonc.strip(stdout))
    return doc[JSON_HOSTS[host]]["kms"]


@pytest.mark.parametrize("host", [*JSON_HOSTS, "codex"])
def test_every_host_gets_a_document_on_stdout_and_the_hint_on_stderr(host: str, tmp_path: Path) -> None:
    result = ok(kms("mcp-config", host, HOME=str(tmp_path)))
    entry = kms_entry_of(host, result.stdout)
    assert entry["command"] == sys.executable and entry["args"] == ["-E", "-P", "-m", "kmscli", "mcp"]
    assert entry["env"]["KMS_DB_PATH"] == str(Path(os.environ["KMS_DB_PATH"]).resolve())
    assert entry["env"]["KMS_CONFIG"] == str(Path(os.environ["KMS_CONFIG"]).resolve())
    assert not any(k.startswith("PYTHON") for k in entry["env"]), "Gemini CLI refuses PYTHONPATH"
    assert ("type" in entry) == (host == "vscode") and entry.get("type", "stdio") == "stdio"
    assert "--install" in said(result.stderr) and str(tmp_path) in said(result.stderr)


def test_host_option_is_the_argument(tmp_path: Path) -> None:
    assert ok(kms("mcp-config", "--host", "cursor")).stdout == ok(kms("mcp-config", "cursor")).stdout
    assert "choose one of" in said(refused(kms("mcp-config", "--host", "nosuch"), 2).stderr)


def test_codex_gets_every_kms_variable(tmp_path: Path) -> None:
    entry = kms_entry_of("codex", ok(kms("mcp-config", "codex", KMS_LOG_LEVEL="DEBUG")).stdout)
    assert entry["env"]["KMS_LOG_LEVEL"] == "DEBUG" and "KMS_DB_PATH" in entry["env"]
    cursor = kms_entry_of("cursor", ok(kms("mcp-config", "cursor", KMS_LOG_LEVEL="DEBUG")).stdout)
    assert "KMS_LOG_LEVEL" not in cursor["env"]


def test_claude_code_prints_the_add_command_and_json_for_mcp_json() -> None:
    line = ok(kms("mcp-config", "claude-code")).stdout
    assert line.startswith("claude mcp add --scope user kms -e KMS_DB_PATH=") and line.count("\n") == 1
    doc = json.loads(ok(kms("mcp-config", "claude-code", "--json")).stdout)
    assert doc["mcpServers"]["kms"]["args"][-1] == "mcp"


VSCODE_USER = """{
  // my servers
  "servers": {
    "other": {"type": "stdio", "command": "other-server"}, /* keep me */
  },
  "inputs": [],
}
"""


def test_install_merges_in_place_keeps_comments_and_uninstall_removes(tmp_path: Path) -> None:
    path = tmp_path / ".config" / "Code" / "User" / "mcp.json"
    path.parent.mkdir(parents=True)
    path.write_text(VSCODE_USER)
    result = ok(kms("mcp-config", "vscode", "--install", HOME=str(tmp_path), XDG_CONFIG_HOME=""))
    assert result.stdout == "" and "installed" in said(result.stderr)
    text = path.read_text()
    assert "// my servers" in text and "/* keep me */" in text
    doc = json.loads(jsonc.strip(text))
    assert set(doc["servers"]) == {"other", "kms"} and doc["inputs"] == []
    assert doc["servers"]["kms"]["type"] == "stdio"
    assert (path.parent / "mcp.json.kms-backup").read_text() == VSCODE_USER
    ok(kms("mcp-config", "vscode", "--install", HOME=str(tmp_path), XDG_CONFIG_HOME=""))  # again: replaces
    assert list(json.loads(jsonc.strip(path.read_text()))["servers"]) == ["other", "kms"]

    ok(kms("mcp-config", "vscode", "--uninstall", HOME=str(tmp_path), XDG_CONFIG_HOME=""))
    text = path.read_text()
    assert "// my servers" in text and json.loads(jsonc.strip(text)) == json.loads(jsonc.strip(VSCODE_USER))
    again = ok(kms("mcp-config", "vscode", "--uninstall", HOME=str(tmp_path), XDG_CONFIG_HOME=""))
    assert "nothing changed" in said(again.stderr)


@pytest.mark.parametrize("host", ["claude-desktop", "cursor", "windsurf", "gemini", "zed"])
def test_install_into_a_missing_or_existing_json_file(host: str, tmp_path: Path) -> None:
    path = tmp_path / "cfg.json"
    ok(kms("mcp-config", host, "--install", "--path", str(path)))
    assert kms_entry_of(host, path.read_text())["args"][-1] == "mcp"
    path.write_text(json.dumps({"theme": "dark", JSON_HOSTS[host]: {"x": {"command": "x"}}}))
    ok(kms("mcp-config", host, "--install", "--path", str(path)))
    doc = json.loads(jsonc.strip(path.read_text()))
    assert doc["theme"] == "dark" and set(doc[JSON_HOSTS[host]]) == {"x", "kms"}


def test_codex_install_keeps_the_toml_comments(tmp_path: Path) -> None:
    path = tmp_path / ".codex" / "config.toml"
    path.parent.mkdir()
    original = '# my codex\nmodel = "o3"  # the model\n\n[mcp_servers.other]\ncommand = "other"\n'
    path.write_text(original)
    ok(kms("mcp-config", "codex", "--install", HOME=str(tmp_path)))
    text = path.read_text()
    assert text.startswith(original) and "# the model" in text
    doc = tomllib.loads(text)
    assert set(doc["mcp_servers"]) == {"other", "kms"} and doc["model"] == "o3"
    ok(kms("mcp-config", "codex", "--uninstall", HOME=str(tmp_path)))
    assert tomllib.loads(path.read_text()) == tomllib.loads(original) and "# the model" in path.read_text()


@pytest.mark.parametrize(
    "host,bad",
    [("cursor", '{"mcpServers": {'), ("cursor", "// comment\n{}"), ("zed", '{"a": [1,}'), ("codex", "[mcp_servers\n")],
)
def test_a_file_it_cannot_parse_is_refused_and_left_alone(host: str, bad: str, tmp_path: Path) -> None:
    path = tmp_path / "cfg"
    path.write_text(bad)
    result = refused(kms("mcp-config", host, "--install", "--path", str(path)), 2)
    assert str(path) in said(result.stderr)
    assert path.read_text() == bad and not list(tmp_path.glob("*backup*"))


def test_claude_code_lists_the_installed_kms_as_connected(indexed, tmp_path: Path) -> None:
    """The real Claude Code CLI, with a temporary HOME, health-checks the server it finds in ~/.claude.json."""
    from support.claude_cli import claude_bin, claude_env

    home = tmp_path / "home"
    home.mkdir()
    ok(kms("mcp-config", "claude-code", "--install", HOME=str(home)))
    env = claude_env("http://127.0.0.1:9", home)
    env.update({k: v for k, v in os.environ.items() if k.startswith("KMS_")})
    listed = subprocess.run(
        [str(claude_bin()), "mcp", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    line = next((x for x in listed.stdout.splitlines() if x.startswith("kms:")), "")
    assert "Connected" in line and "-m kmscli mcp" in line, listed.stdout + listed.stderr


def test_the_printed_claude_mcp_add_line_registers_a_connected_kms(indexed, tmp_path: Path) -> None:
    """The line `kms mcp-config claude-code` prints, run as it is with the real Claude Code CLI."""
    import shlex

    from support.claude_cli import claude_bin, claude_env

    home = tmp_path / "home"
    home.mkdir()
    words = shlex.split(ok(kms("mcp-config", "claude-code")).stdout)
    assert words[0] == "claude"
    env = claude_env("http://127.0.0.1:9", home)
    added = subprocess.run(
        [str(claude_bin()), *words[1:]],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert added.returncode == 0, added.stdout + added.stderr
    listed = subprocess.run(
        [str(claude_bin()), "mcp", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    line = next((x for x in listed.stdout.splitlines() if x.startswith("kms:")), "")
    assert "Connected" in line, listed.stdout + listed.stderr


@pytest.mark.parametrize("host", ["claude-code", "claude-desktop", "cursor", "vscode", "windsurf", "zed", "gemini"])
def test_uninstall_from_a_missing_file_or_one_without_servers_changes_nothing(host: str, tmp_path: Path) -> None:
    """It raised KeyError on the servers key (service finding 7); now: nothing to uninstall, exit 0."""
    home = {"HOME": str(tmp_path), "XDG_CONFIG_HOME": ""}
    assert "nothing changed" in said(ok(kms("mcp-config", host, "--uninstall", **home)).stderr)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []
    other = tmp_path / "other.json"
    other.write_text('{"foo": 1}\n')
    result = ok(kms("mcp-config", host, "--uninstall", "--path", str(other), **home))
    assert "nothing changed" in said(result.stderr) and other.read_text() == '{"foo": 1}\n'
    assert not other.with_name("other.json.kms-backup").exists()
