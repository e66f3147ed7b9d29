"""Compose the MCP config a ``kms claude`` session gets, from settings. Pure functions.

Each built-in server is one small function ``(settings, session) -> (name, entry) | None``
so adding a server is adding a function; ``compose`` merges the enabled ones with the
person's custom servers into ``{"mcpServers": {...}}`` (the format ``claude --mcp-config``
reads). Only ``write_session_config``/``remove_session_config`` touch the disk: the file
can carry tokens (custom server env/headers), so it goes to a private directory (0700)
as a 0600 file, never into the cwd where it could be committed or read by others.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platformdirs import user_runtime_dir

from server.config.schema import BUILTIN_SERVERS
from server.config.servers import CustomServer
from server.config.session_contract import SessionConfig
from server.config.settings import Settings

Entry = dict[str, Any]
Built = tuple[str, Entry] | None
Builder = Callable[[Settings, "Session"], Built]

PLAYWRIGHT_PACKAGE = "@playwright/mcp@latest"
FILESYSTEM_PACKAGE = "@modelcontextprotocol/server-filesystem"


@dataclass(frozen=True)
class Session:
    """What a composed config depends on besides settings."""

    id: str
    db_path: Path
    cwd: Path
    vault_roots: tuple[Path, ...] = ()
    vault: str | None = None
    python: str = field(default_factory=lambda: sys.executable)
    service_url: str | None = None  # the kms service serving this session (its token in $KMS_SESSION_TOKEN)


# -E: no PYTHONPATH (or other PYTHON* variables) from the host; -P: no working directory on sys.path.
# Together no module of the person's project can shadow kms's own (`server`, `kmscli`). Not -I: that
# also drops the user site-packages, where `pip install --user kms` puts kms itself.
ISOLATION_FLAGS = ("-E", "-P")


def kms_command(python: str | None = None) -> tuple[str, list[str]]:
    """How to start ``kms mcp``: the running interpreter (absolute, so the venv is right), isolated."""
    return python or sys.executable, [*ISOLATION_FLAGS, "-m", "kmscli", "mcp"]


# ----------------------------------------------------------------------------- built-in servers


def kms_server(settings: Settings, session: Session) -> Built:
    """kms itself, told everything through ``SessionConfig.to_env`` so it needs no other state.

    Left out when agents may not read (``kms.enabled`` or ``agent.read`` effectively off): a
    server whose every tool refuses would only cost the session start-up time and context.
    """
    if not settings.active("agent.read"):
        return None
    if session.service_url is not None:  # the host expands ${VAR} from the environment kms claude gives it
        return "kms", {
            "type": "http",
            "url": session.service_url,
            "headers": {"Authorization": "Bearer ${KMS_SESSION_TOKEN}"},
        }
    config = session_config(settings, session)
    command, args = kms_command(session.python)
    return "kms", {"command": command, "args": args, "env": config.to_env()}


def session_config(settings: Settings, session: Session) -> SessionConfig:
    """The session contract of a launched session (carried by env over stdio, by its token to the service)."""
    return SessionConfig.from_settings(
        settings, db_path=session.db_path, session_id=session.id, vault=session.vault, project=str(session.cwd)
    )


def playwright_server(settings: Settings, session: Session) -> Built:
    """Microsoft's Playwright MCP (browser automation); off by default."""
    if not settings.get("servers.playwright.enabled"):
        return None
    return "playwright", {"command": "npx", "args": ["-y", PLAYWRIGHT_PACKAGE]}


def filesystem_server(settings: Settings, session: Session) -> Built:
    """The reference filesystem server, scoped to the session's vault roots (or the cwd)."""
    if not settings.get("servers.filesystem.enabled"):
        return None
    roots = [str(r) for r in session.vault_roots] or [str(session.cwd)]
    return "filesystem", {"command": "npx", "args": ["-y", FILESYSTEM_PACKAGE, *roots]}


BUILTIN_BUILDERS: dict[str, Builder] = {
    "kms": kms_server,
    "playwright": playwright_server,
    "filesystem": filesystem_server,
}
assert set(BUILTIN_BUILDERS) == {"kms", *BUILTIN_SERVERS}, "settings.BUILTIN_SERVERS and builders disagree"


def custom_entry(server: CustomServer) -> Entry:
    """A custom server as an ``mcpServers`` entry (stdio or http)."""
    if server.url:
        entry: Entry = {"type": "http", "url": server.url}
        if server.headers:
            entry["headers"] = dict(server.headers)
        return entry
    entry = {"command": server.command, "args": list(server.args)}
    if server.env:
        entry["env"] = dict(server.env)
    return entry


def compose(settings: Settings, session: Session, *, isolated: bool = False) -> dict[str, Any]:
    """``{"mcpServers": {...}}`` for every enabled server; ``isolated`` always leaves kms out."""
    servers: dict[str, Entry] = {}
    for name, build in BUILTIN_BUILDERS.items():
        if isolated and name == "kms":
            continue
        built = build(settings, session)
        if built is not None:
            servers[built[0]] = built[1]
    for name, server in sorted(settings.custom_servers.items()):
        if server.enabled and name not in servers:
            servers[name] = custom_entry(server)
    return {"mcpServers": servers}


# ----------------------------------------------------------------------------- private files


def _private_base() -> Path | None:
    """A per-user base for session dirs: the runtime dir when the platform has one, else the temp dir."""

    with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset, then guesses
        warnings.simplefilter("ignore")
        base = Path(user_runtime_dir("kms", appauthor=False))
    try:
        if base.parent.is_dir() and os.access(base.parent, os.W_OK | os.X_OK):
            base.mkdir(mode=0o700, exist_ok=True)
            if hasattr(os, "getuid") and base.stat().st_uid != os.getuid():
                return None  # someone else's directory: never put our files there
            os.chmod(base, 0o700)
            return base
    except OSError:
        pass
    return None  # tempfile.mkdtemp's default (TMPDIR or /tmp); mkdtemp makes the dir 0700 anyway


CONFIG_NAME = "mcp-config.json"
SETTINGS_NAME = "settings.json"  # the session's hooks (``claude --settings=FILE``)
CONTRACT_NAME = "session.json"  # the session contract the command hooks read (``kms hook --contract``)


def write_session_config(doc: dict[str, Any], session_id: str) -> Path | None:
    """Write the config privately (dir 0700, file 0600); None, writing nothing, when it has no servers."""
    if not doc.get("mcpServers") and not doc.get("servers"):
        return None
    safe_id = re.sub(r"[^A-Za-z0-9_-]", "", session_id)[:32] or "session"
    folder = Path(tempfile.mkdtemp(prefix=f"kms-{safe_id}-", dir=_private_base()))
    os.chmod(folder, 0o700)
    return write_private(folder / CONFIG_NAME, doc)


def write_private(path: Path, doc: dict[str, Any]) -> Path:
    """A new 0600 JSON file (in a session's private directory)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    return path


def remove_session_config(path: Path | None) -> None:
    """Remove the file and its private directory (tolerates either being gone already)."""
    if path is None:
        return
    for name in (path.name, SETTINGS_NAME, CONTRACT_NAME):
        try:
            (path.parent / name).unlink()
        except FileNotFoundError:
            pass
    try:
        path.parent.rmdir()
    except (FileNotFoundError, OSError):
        pass


def sweep_session_configs(is_stale: Callable[[str, float], bool]) -> int:
    """Remove session configs whose launcher died without cleaning up (SIGKILL, power loss).

    They may hold tokens, so each ``kms claude`` start sweeps our own leftovers.
    ``is_stale(session_id, mtime)`` decides (the launcher asks the sessions table).
    """
    bases = {b for b in (_private_base(), Path(tempfile.gettempdir())) if b is not None}
    removed = 0
    for base in bases:
        for folder in base.glob("kms-*-*"):
            path = folder / CONFIG_NAME
            try:
                info = folder.stat()
                if (hasattr(os, "getuid") and info.st_uid != os.getuid()) or not path.is_file():
                    continue
            except OSError:
                continue
            session_id = folder.name[len("kms-") :].rsplit("-", 1)[0]
            if is_stale(session_id, info.st_mtime):
                remove_session_config(path)
                removed += 1
    return removed


# ----------------------------------------------------------------------------- hooks

# the host's hook events kms listens to -> the ``kms hook`` argument (``server.writes.hook_events.EVENTS``)
HOOK_EVENTS: dict[str, str] = {
    "SessionStart": "session-start",
    "UserPromptSubmit": "user-prompt-submit",
    "PostToolUse": "post-tool-use",
    "PreCompact": "pre-compact",
    "PostCompact": "post-compact",
    "Stop": "stop",
    "SessionEnd": "session-end",
}
FILE_TOOL_MATCHER = "Write|Edit|MultiEdit|NotebookEdit"  # the host's tools whose calls name the file they change
HOOK_TIMEOUT_S = 30  # a capture at SessionEnd writes one note; the host stops waiting after this
TOKEN_VAR = "KMS_SESSION_TOKEN"


def hook_command(python: str | None, event: str, contract: Path | None = None, pins: tuple[str, ...] = ()) -> str:
    """The shell command of a command hook: kms isolated as its server is (``ISOLATION_FLAGS``); ``pins``:
    more options (``--db=FILE``, ``--config=FILE``)."""

    interpreter, _args = kms_command(python)
    words = [interpreter, *ISOLATION_FLAGS, "-m", "kmscli", "hook", event, *pins]
    if contract is not None:
        words.append(f"--contract={contract}")
    return " ".join(shlex.quote(w) for w in words)


def hook_entries(make: Callable[[str, str], Entry]) -> dict[str, Any]:
    """The ``hooks`` object of a host's settings: for each event kms listens to, one hook ``make(event,
    argument)`` (PostToolUse only for the host's file tools)."""
    hooks: dict[str, Any] = {}
    for event, arg in HOOK_EVENTS.items():
        entry: dict[str, Any] = {"hooks": [{**make(event, arg), "timeout": HOOK_TIMEOUT_S}]}
        if event == "PostToolUse":
            entry["matcher"] = FILE_TOOL_MATCHER
        hooks[event] = [entry]
    return hooks


def hooks_doc(settings: Settings, session: Session, contract: Path | None) -> dict[str, Any] | None:
    """The ``hooks`` of a ``kms claude`` session's settings file, or None when capture is off.

    SessionStart is a command hook (the host refuses any other kind there); the other events go to the kms
    service over HTTP when it serves the session (authenticated by the session's token, which the host
    expands from its environment), else to ``kms hook`` too."""
    if not settings.active("capture.enabled") or not settings.active("agent.read"):
        return None
    base = session.service_url.rsplit("/mcp", 1)[0] if session.service_url else None

    def make(event: str, arg: str) -> Entry:
        if base is not None and event != "SessionStart":
            return {
                "type": "http",
                "url": f"{base}/hooks/{arg}",
                "headers": {"Authorization": f"Bearer ${TOKEN_VAR}"},
                "allowedEnvVars": [TOKEN_VAR],
            }
        return {"type": "command", "command": hook_command(session.python, arg, contract)}

    return {"hooks": hook_entries(make)}


def standalone_hooks(settings: Settings, db_path: Path, python: str | None = None) -> dict[str, Any]:
    """kms's hooks for a host kms does not launch (a plugin, the person's own settings): command hooks pinning
    the database and the settings file (as ``standalone_kms_entry`` does), the session taken from the host's
    own session id (``kms hook``)."""
    pins = (f"--db={db_path.resolve()}", f"--config={settings.path.resolve()}")
    return hook_entries(lambda _event, arg: {"type": "command", "command": hook_command(python, arg, None, pins)})


def write_session_hooks(settings: Settings, session: Session, config_path: Path | None) -> Path | None:
    """Beside the session's ``--mcp-config``: its contract (for the command hooks) and its settings file
    (the hooks), both 0600, removed with it (``remove_session_config``). None when there are no hooks."""
    if config_path is None:
        return None
    contract = config_path.parent / CONTRACT_NAME
    doc = hooks_doc(settings, session, contract)
    if doc is None:
        return None
    write_private(contract, session_config(settings, session).to_env())
    return write_private(config_path.parent / SETTINGS_NAME, doc)


# ----------------------------------------------------------------------------- other hosts


def standalone_kms_entry(settings: Settings, db_path: Path, python: str | None = None) -> Entry:
    """kms for a host other than ``kms claude``: it pins the DB and the settings file, and reads
    the rest from that file at each start (so ``kms config set`` applies to the next session)."""
    config = SessionConfig.from_settings(
        settings, db_path=db_path.resolve(), session_id="", config_path=settings.path.resolve()
    )
    command, args = kms_command(python)
    return {"command": command, "args": args, "env": config.to_env(fields=("db_path", "config_path"))}
