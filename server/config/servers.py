"""Person-added MCP servers (``[servers.custom.NAME]`` tables): the type and its validation.

Reading and writing the tables is the settings file's job (``server/config/settings.py``);
``kmscli/compose.py`` turns enabled ones into ``mcpServers`` entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from server.config.schema import BUILTIN_SERVERS, SettingsError, SettingValueError

CUSTOM_PREFIX = "servers.custom"
_SERVER_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$")


@dataclass(frozen=True)
class CustomServer:
    """A person-added MCP server: stdio (``command``) or HTTP (``url``)."""

    name: str
    command: str | None = None
    args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    enabled: bool = True

    @property
    def kind(self) -> str:
        return "http" if self.url else "stdio"

    def to_toml(self) -> dict[str, Any]:
        out: dict[str, Any] = {"enabled": self.enabled}
        if self.command is not None:
            out["command"] = self.command
            out["args"] = list(self.args)
        if self.env:
            out["env"] = dict(self.env)
        if self.url is not None:
            out["url"] = self.url
        if self.headers:
            out["headers"] = dict(self.headers)
        return out


def check_server_name(name: str) -> None:
    """Custom server names: letters, digits, '-' and '_', not a built-in's name."""
    if not _SERVER_NAME_RE.match(name):
        raise SettingValueError(
            f"{CUSTOM_PREFIX}.{name}", name, "bad server name", "letters, digits, '-' and '_' (max 64)"
        )
    if name in BUILTIN_SERVERS or name in ("kms", "custom"):
        raise SettingValueError(f"{CUSTOM_PREFIX}.{name}", name, f"'{name}' is a built-in server name", "another name")


def custom_server_from_toml(name: str, table: Any) -> CustomServer:
    """Validate one ``[servers.custom.NAME]`` table."""
    key = f"{CUSTOM_PREFIX}.{name}"
    check_server_name(name)
    if not isinstance(table, dict):
        raise SettingValueError(key, table, "expected a table", "command/args/env or url/headers")

    def str_map(field_name: str) -> dict[str, str]:
        raw = table.get(field_name, {})
        if not isinstance(raw, dict) or not all(isinstance(v, str) for v in raw.values()):
            raise SettingValueError(key, raw, f"{field_name} must map names to strings", "a table of strings")
        return {str(k): v for k, v in raw.items()}

    command, url = table.get("command"), table.get("url")
    if bool(command) == bool(url):
        raise SettingValueError(key, table, "give exactly one of command or url", "command=... or url=...")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise SettingValueError(key, enabled, "enabled must be true or false", "true/false")
    if (url and table.get("env")) or (command and table.get("headers")):
        raise SettingValueError(key, table, "env is for stdio servers, headers for http ones", "one kind")
    if url:
        if not isinstance(url, str) or not re.match(r"^https?://[^\s/]+", url):
            raise SettingValueError(key, url, f"{url!r} is not an http(s) URL", "http://... or https://...")
        return CustomServer(name, url=url, headers=str_map("headers"), enabled=enabled)
    args = table.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list) or not all(isinstance(a, str) for a in args):
        raise SettingValueError(key, table, "command must be a string and args a list of strings", "strings")
    return CustomServer(name, command=command, args=list(args), env=str_map("env"), enabled=enabled)


class UnknownServerError(SettingsError):
    """No built-in or custom server has this name."""

    def __init__(self, name: str, known: list[str]):
        # deferred: rapidfuzz only to suggest a name that was not found
        from rapidfuzz import process

        close = [m for m, score, _ in process.extract(name, known, limit=3) if score >= 60]
        self.name, self.known = name, known
        hint = f" Did you mean: {', '.join(close)}?" if close else ""
        super().__init__(f"No server named '{name}'.{hint} Known: {', '.join(known)}")
