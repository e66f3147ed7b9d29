"""Where kms's hooks are installed for Claude Code outside ``kms claude``: the person's settings
(``kms hooks install``), a project's (``kms hooks install --file .claude/settings.json``), a plugin named on
claude's command line (``--plugin-dir``, ``kms plugin export``).

Only for saying so (``kms claude``, ``kms doctor``): which set runs is decided by the hook itself
(``kmscli.hook_cmd``: an installed hook stands aside inside a ``kms claude`` session that runs its own), so a
place not looked at here (a plugin enabled from a marketplace, managed settings) is handled all the same.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from kmscli import jsonc

MARK = "-m kmscli hook "  # what makes a hook kms's (its command)


def is_ours(group: Any) -> bool:
    """A matcher group kms wrote: every hook in it is a ``kms hook`` command."""
    hooks = group.get("hooks") if isinstance(group, dict) else None
    if not isinstance(hooks, list) or not hooks:
        return False
    return all(isinstance(h, dict) and MARK in str(h.get("command", "")) for h in hooks)


def user_settings(env: Mapping[str, str] | None = None) -> Path:
    """The person's own Claude Code settings file (``kms hooks install``'s default)."""
    env = os.environ if env is None else env
    return Path(env.get("HOME") or Path.home()) / ".claude" / "settings.json"


def _plugin_dirs(claude_args: Sequence[str]) -> list[Path]:
    words, out = list(claude_args), []
    for i, word in enumerate(words):
        name, eq, value = word.partition("=")
        if name == "--plugin-dir":
            value = value if eq else (words[i + 1] if i + 1 < len(words) else "")
            if value:
                out.append(Path(value).expanduser() / "hooks" / "hooks.json")
    return out


def holds_kms_hooks(path: Path) -> bool:
    """Whether the settings (or plugin hooks) file at ``path`` has any of kms's hooks; an unreadable one has none."""
    try:
        doc, _span = jsonc.parse(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, jsonc.JsoncError):
        return False
    hooks = doc.get("hooks") if isinstance(doc, dict) else None
    groups = hooks.values() if isinstance(hooks, dict) else ()
    return any(is_ours(g) for listed in groups if isinstance(listed, list) for g in listed)


def installed(cwd: Path, env: Mapping[str, str] | None = None, claude_args: Sequence[str] = ()) -> list[Path]:
    """The files a Claude Code started in ``cwd`` (with ``claude_args``) reads that hold kms's hooks."""
    candidates = [
        user_settings(env),
        cwd / ".claude" / "settings.json",
        cwd / ".claude" / "settings.local.json",
        *_plugin_dirs(claude_args),
    ]
    seen: list[Path] = []
    for path in candidates:
        if path not in seen and holds_kms_hooks(path):
            seen.append(path)
    return seen
