"""``kms plugin export claude-code DIR`` and ``kms hooks install|uninstall`` (issue 26): kms's hooks for
people who run Claude Code themselves. The plugin holds the MCP entry, the hooks and a skill; the install
merges into the person's settings, keeping their own hooks and comments, with a backup."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import kms, ok, refused, said

from kmscli import jsonc
from kmscli.compose import HOOK_EVENTS


def test_the_plugin_has_the_mcp_entry_the_hooks_and_a_skill(tmp_path: Path) -> None:
    dest = tmp_path / "plugin"
    run = ok(kms("plugin", "export", "claude-code", str(dest)))
    assert "mcp__plugin_kms_kms__" in said(run.stderr)  # the tool names inside a plugin
    files = sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file())
    assert files == [".claude-plugin/plugin.json", ".mcp.json", "hooks/hooks.json", "skills/kms/SKILL.md"]
    assert all(oct(p.stat().st_mode & 0o777) == "0o600" for p in dest.rglob("*") if p.is_file())
    assert json.loads((dest / ".claude-plugin/plugin.json").read_text())["name"] == "kms"
    entry = json.loads((dest / ".mcp.json").read_text())["mcpServers"]["kms"]
    assert entry["args"] == ["-E", "-P", "-m", "kmscli", "mcp"]
    assert entry["env"]["KMS_DB_PATH"] == str(Path(os.environ["KMS_DB_PATH"]).resolve())
    hooks = json.loads((dest / "hooks/hooks.json").read_text())["hooks"]
    assert set(hooks) == set(HOOK_EVENTS)
    start = hooks["SessionStart"][0]["hooks"][0]
    assert start["type"] == "command" and " -E -P -m kmscli hook session-start --db=" in start["command"]
    assert hooks["PostToolUse"][0]["matcher"] == "Write|Edit|MultiEdit|NotebookEdit"
    assert (dest / "skills/kms/SKILL.md").read_text().startswith("---\nname: kms\n")
    refused(kms("plugin", "export", "claude-code", str(dest)), 2)  # never over an existing plugin
    refused(kms("plugin", "export", "cursor", str(tmp_path / "other")), 2)


def test_install_keeps_the_persons_hooks_and_comments_and_uninstall_takes_only_kms(tmp_path: Path) -> None:
    settings = tmp_path / "settings.json"
    mine = {"hooks": [{"type": "command", "command": "notify-send done"}]}
    original = '{\n  // my settings\n  "model": "opus",\n  "hooks": {"Stop": [' + json.dumps(mine) + "]}\n}\n"
    settings.write_text(original)
    ok(kms("hooks", "install", "--file", str(settings)))
    doc, _ = jsonc.parse(settings.read_text())
    assert "// my settings" in settings.read_text() and doc["model"] == "opus"
    assert doc["hooks"]["Stop"][0] == mine and len(doc["hooks"]["Stop"]) == 2
    assert set(doc["hooks"]) == set(HOOK_EVENTS)
    assert Path(str(settings) + ".kms-backup").read_text() == original
    again = ok(kms("hooks", "install", "--file", str(settings)))
    assert "already" in said(again.stderr) and len(jsonc.parse(settings.read_text())[0]["hooks"]["Stop"]) == 2
    ok(kms("hooks", "uninstall", "--file", str(settings)))
    doc, _ = jsonc.parse(settings.read_text())
    assert doc["hooks"] == {"Stop": [mine]} and doc["model"] == "opus"
    assert "no kms hooks" in said(ok(kms("hooks", "uninstall", "--file", str(settings))).stderr)
    settings.write_text("{ not json")
    refused(kms("hooks", "install", "--file", str(settings)), 2)
    assert settings.read_text() == "{ not json"
