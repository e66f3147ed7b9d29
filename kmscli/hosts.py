"""Agent hosts other than ``kms claude``: the document each one reads, where it lives, and installing kms
into it in place.

One table (``HOSTS``) says, per host, the file, its format (JSON, JSON with comments, TOML), the key that
holds the servers and the shape of one entry; ``snippet`` prints it, ``install``/``uninstall`` merge it
into the real file. The kms entry itself is ``compose.standalone_kms_entry`` (the session contract
pins the database and the settings file; ``compose.kms_command`` starts it isolated), so no host ever
gets ``PYTHONPATH``. Editing keeps everything else in the file (comments too), writes a backup beside
it, and refuses a file it cannot parse.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit

from kmscli import jsonc
from kmscli.compose import Entry
from server.activity.tokens import HOST_TOKEN_VARS
from server.errors import KmsError

SERVER_NAME = "kms"


@dataclass(frozen=True)
class Host:
    """One agent host: where its config file lives and how a server entry looks in it."""

    name: str
    label: str
    fmt: str  # "json" | "jsonc" | "toml"
    key: tuple[str, ...]  # the object that holds the servers, from the root
    paths: Mapping[str, str]  # sys.platform (or "*") -> path with ~ and %APPDATA%
    shape: Callable[[Entry], Entry]
    note: str = ""

    def config_path(self, env: Mapping[str, str] | None = None) -> Path:
        """The host's user-level config file on this platform."""
        env = os.environ if env is None else env
        raw = self.paths.get(sys.platform) or self.paths["*"]
        home = env.get("HOME") or str(Path.home())
        raw = raw.replace("%APPDATA%", env.get("APPDATA") or str(Path(home) / "AppData" / "Roaming"))
        if raw.startswith("~"):
            raw = home + raw[1:]
        if raw.startswith("$XDG_CONFIG_HOME"):
            raw = (env.get("XDG_CONFIG_HOME") or str(Path(home) / ".config")) + raw[len("$XDG_CONFIG_HOME") :]
        return Path(raw)


def _plain(entry: Entry) -> Entry:
    return dict(entry)


def _typed(entry: Entry) -> Entry:
    return {"type": "stdio", **entry}


_MAC = "~/Library/Application Support"
HOSTS: dict[str, Host] = {
    h.name: h
    for h in (
        Host(
            "claude-code",
            "Claude Code",
            "json",
            ("mcpServers",),
            {"*": "~/.claude.json"},
            _plain,
            "user scope, every project (or commit the document as .mcp.json in one project)",
        ),
        Host(
            "claude-desktop",
            "Claude Desktop",
            "json",
            ("mcpServers",),
            {
                "darwin": f"{_MAC}/Claude/claude_desktop_config.json",
                "win32": "%APPDATA%/Claude/claude_desktop_config.json",
                "*": "$XDG_CONFIG_HOME/Claude/claude_desktop_config.json",
            },
            _plain,
            "then restart Claude Desktop",
        ),
        Host(
            "cursor",
            "Cursor",
            "json",
            ("mcpServers",),
            {"*": "~/.cursor/mcp.json"},
            _plain,
            "all projects (or .cursor/mcp.json in one project)",
        ),
        Host(
            "vscode",
            "VS Code",
            "jsonc",
            ("servers",),
            {
                "darwin": f"{_MAC}/Code/User/mcp.json",
                "win32": "%APPDATA%/Code/User/mcp.json",
                "*": "$XDG_CONFIG_HOME/Code/User/mcp.json",
            },
            _typed,
            "your user mcp.json (or .vscode/mcp.json in one project)",
        ),
        Host("windsurf", "Windsurf", "json", ("mcpServers",), {"*": "~/.codeium/windsurf/mcp_config.json"}, _plain),
        Host(
            "zed",
            "Zed",
            "jsonc",
            ("context_servers",),
            {
                "darwin": "~/.config/zed/settings.json",
                "win32": "%APPDATA%/Zed/settings.json",
                "*": "$XDG_CONFIG_HOME/zed/settings.json",
            },
            _plain,
        ),
        Host(
            "codex",
            "Codex CLI",
            "toml",
            ("mcp_servers",),
            {"*": "~/.codex/config.toml"},
            _plain,
            "Codex passes servers only a whitelist of variables, so every KMS_* is in env",
        ),
        Host("gemini", "Gemini CLI", "jsonc", ("mcpServers",), {"*": "~/.gemini/settings.json"}, _plain),
    )
}
ALIASES = {"claude": "claude-code", "code": "vscode", "vs-code": "vscode", "codex-cli": "codex", "gemini-cli": "gemini"}


# Over HTTP (the kms service): each host's entry, its token read from where the host can read it and the
# host's file never holds it (Claude Code runs a helper; the others expand an environment variable).
STDIO_ONLY = {
    "claude-desktop": "Claude Desktop reads only stdio servers from its config file: it keeps `kms mcp` "
    "(kms mcp-config claude-desktop, without --http)",
    "zed": "Zed's HTTP servers are not written by kms yet: use its stdio entry (kms mcp-config zed, without --http)",
}


# VS Code asks for the token once (a password prompt) and keeps it in its own secret storage: the entry names
# this input, which goes in the document's top-level ``inputs`` beside the server.
VSCODE_INPUT = {
    "type": "promptString",
    "id": "kms-token",
    "description": "kms service token for VS Code (print it with: kms token secret vscode)",
    "password": True,
}


def _uses_input(entry: Entry | None) -> bool:
    return entry is not None and f"${{input:{VSCODE_INPUT['id']}}}" in json.dumps(entry)


def _inputs(host: Host, text: str, keep: bool) -> str:
    """``text`` with kms's prompted input in VS Code's ``inputs`` (``keep``) or without it; others unchanged."""
    if host.name != "vscode":
        return text
    doc = jsonc.parse(text)[0]
    found = doc.get("inputs") if isinstance(doc, dict) else None
    others = (
        [i for i in found if not (isinstance(i, dict) and i.get("id") == VSCODE_INPUT["id"])]
        if isinstance(found, list)
        else []
    )
    if keep:
        return jsonc.set_member(text, ("inputs",), [*others, VSCODE_INPUT])
    if isinstance(found, list) and len(others) == len(found):
        return text  # not ours to touch
    return jsonc.set_member(text, ("inputs",), others) if others else jsonc.remove_member(text, ("inputs",))[0]


def http_entry(host: Host, url: str, helper: str) -> Entry:
    """The host's entry for the kms service at ``url`` (``helper``: the command that prints the header)."""

    if host.name in STDIO_ONLY:
        raise KmsError("invalid-input", STDIO_ONLY[host.name])
    if host.name == "claude-code":
        return {"type": "http", "url": url, "headersHelper": helper}
    var = HOST_TOKEN_VARS[host.name]
    bearer = {"Authorization": f"Bearer ${{env:{var}}}"}
    shapes: dict[str, Entry] = {
        "cursor": {"url": url, "headers": bearer},
        "vscode": {"type": "http", "url": url, "headers": {"Authorization": f"Bearer ${{input:{VSCODE_INPUT['id']}}}"}},
        "windsurf": {"serverUrl": url, "headers": bearer},
        "codex": {"url": url, "bearer_token_env_var": var},
        "gemini": {"url": url, "type": "http", "headers": {"Authorization": f"Bearer ${{{var}}}"}},
    }
    return shapes[host.name]


def get_host(name: str) -> Host:
    """The host called ``name`` (or an alias); a ``usage`` KmsError naming the choices otherwise."""
    host = HOSTS.get(ALIASES.get(name.lower(), name.lower()))
    if host is None:
        raise KmsError("invalid-input", f"unknown host {name!r}; choose one of: {', '.join(HOSTS)}")
    return host


def host_entry(host: Host, entry: Entry, env: Mapping[str, str] | None = None) -> Entry:
    """The kms entry in the host's shape; Codex also gets the person's own ``KMS_*`` (it would drop them)."""
    entry = {**entry, "env": dict(entry.get("env") or {})}
    if host.name == "codex":
        env = os.environ if env is None else env
        own = {k: v for k, v in env.items() if k.startswith("KMS_") and k != "KMS_SESSION_ID"}
        entry["env"] = {**own, **entry["env"]}
    return host.shape(entry)


def document(host: Host, entry: Entry) -> str:
    """The whole document a host reads, holding only kms."""
    doc: Any = {SERVER_NAME: entry}
    for key in reversed(host.key):
        doc = {key: doc}
    if host.name == "vscode" and _uses_input(entry):
        doc = {"inputs": [VSCODE_INPUT], **doc}
    if host.fmt == "toml":
        return tomlkit.dumps(doc)
    return json.dumps(doc, indent=2) + "\n"


def snippet(host: Host, entry: Entry) -> tuple[str, str]:
    """(document for stdout, hint for stderr). Claude Code's document is its ``claude mcp add`` line."""
    where = f"{host.config_path()}" + (f"; {host.note}" if host.note else "")
    if host.name == "claude-code" and "command" in entry:
        envs = "".join(f" -e {shlex.quote(f'{k}={v}')}" for k, v in entry.get("env", {}).items())
        cmd = shlex.join([entry["command"], *entry["args"]])
        line = f"claude mcp add --scope user kms{envs} -- {cmd}\n"
        return line, (
            f"Run this to register kms with Claude Code, or `kms mcp-config claude-code --json` for "
            f"a .mcp.json, or `--install` to merge it into {host.config_path()}."
        )
    return document(host, entry), f"{host.label}: merge this into {where}. Or: kms mcp-config {host.name} --install"


# ----------------------------------------------------------------------------- editing the real file


def read_config(path: Path) -> str:
    """A host's config file as text ("" when there is none yet)."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as e:
        raise KmsError("invalid-input", f"cannot read {path}: {e}") from None


def _edit(host: Host, text: str, entry: Entry | None) -> tuple[str, bool]:
    """``text`` with kms set (``entry``) or removed (None); whether anything changed."""
    path = (*host.key, SERVER_NAME)
    if host.fmt == "toml":
        try:
            doc = tomlkit.parse(text)
        except Exception as e:
            raise KmsError("invalid-input", f"not valid TOML ({e})") from None
        table: Any = doc
        for key in host.key:
            if key not in table:
                if entry is None:
                    return text, False
                table[key] = tomlkit.table(is_super_table=True)
            table = table[key]
        if entry is None:
            if SERVER_NAME not in table:
                return text, False
            del table[SERVER_NAME]
            _drop_empty_tables(doc, host.key)
            return re.sub(r"\n{2,}\Z", "\n", tomlkit.dumps(doc)), True  # (not the blank line the table had)
        table[SERVER_NAME] = entry
        return tomlkit.dumps(doc), True
    if host.fmt == "json" and text.strip():
        try:
            json.loads(text)
        except ValueError as e:
            raise KmsError("invalid-input", f"not valid JSON ({e})") from None
    try:
        if entry is None:
            text, removed = jsonc.remove_member(text, path)
            if not removed:  # no servers map (a missing file, another app's config): nothing to tidy
                return text, False
            for depth in range(len(host.key), 0, -1):  # a servers map kms leaves empty goes too
                _, span = jsonc.parse(text)
                for key in host.key[:depth]:
                    span = span.members[key][1]
                if span.members or jsonc.strip(text[span.start + 1 : span.end - 1]).strip():
                    break  # other servers, or a comment the person wrote in it
                text = jsonc.remove_member(text, host.key[:depth])[0]
            return _inputs(host, text, keep=False), True
        return _inputs(host, jsonc.set_member(text, path, entry), keep=_uses_input(entry)), True
    except jsonc.JsoncError as e:
        raise KmsError("invalid-input", f"cannot parse it ({e}); fix it or merge the document by hand") from None


def _drop_empty_tables(doc: Any, key: tuple[str, ...]) -> None:
    """Remove the tables of ``key`` (deepest first) that removing kms left empty."""
    for depth in range(len(key), 0, -1):
        parent: Any = doc
        for k in key[: depth - 1]:
            parent = parent[k]
        if len(parent[key[depth - 1]]) or parent[key[depth - 1]].trivia.comment:
            return
        del parent[key[depth - 1]]


def _empty_document(host: Host, text: str) -> bool:
    """Nothing but an empty object (JSON) or nothing at all (TOML): what an install into a new file leaves."""
    return not text.strip() if host.fmt == "toml" else re.fullmatch(r"\s*\{\s*\}\s*", text) is not None


def write_with_backup(path: Path, old: str, new: str) -> Path | None:
    """Write ``new`` atomically; the previous content (if any) goes to ``<name>.kms-backup`` beside it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    backup = None
    if path.exists():
        backup = path.with_name(path.name + ".kms-backup")
        shutil.copy2(path, backup)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(new)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return backup


def install(host: Host, entry: Entry, path: Path | None = None) -> tuple[Path, Path | None]:
    """Merge kms into the host's config file in place; (the file, its backup)."""
    path = path or host.config_path()
    old = read_config(path)
    try:
        new, _ = _edit(host, old, entry)
    except KmsError as e:
        raise KmsError(e.kind, f"{path}: {e.message}") from None
    return path, write_with_backup(path, old, new)


def uninstall(host: Host, path: Path | None = None) -> tuple[Path, Path | None, bool]:
    """Remove kms from the host's config file; (the file, its backup, whether kms was there)."""
    path = path or host.config_path()
    old = read_config(path)
    try:
        new, changed = _edit(host, old, None)
    except KmsError as e:
        raise KmsError(e.kind, f"{path}: {e.message}") from None
    if not changed:
        return path, None, False
    backup = path.with_name(path.name + ".kms-backup")
    if _empty_document(host, new):  # kms made the file (or was all it held): no file, no backup left
        path.unlink()
        if backup.exists() and _empty_document(host, read_config(backup)):
            backup.unlink()
        return path, None, True
    if backup.exists() and read_config(backup) == new:  # back to what it was before kms: that backup says nothing
        write_with_backup(path, old, new)
        backup.unlink(missing_ok=True)
        return path, None, True
    return path, write_with_backup(path, old, new), True
