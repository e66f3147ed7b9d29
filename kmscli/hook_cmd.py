"""``kms hook EVENT``: an agent host's command hook (Claude Code's ``type: "command"``), the event's JSON on
stdin, kms's answer (if any) as JSON on stdout.

It runs as ``python -E -P -m kmscli hook ...`` (no module of the project can shadow kms, as for ``kms mcp``),
skips Typer and Rich (``kmscli/entry.py``), and is fail-open: whatever goes wrong, it prints nothing and
exits 0, so a session always starts and never stops on kms's account; what went wrong is one line in
``kms-hooks.log`` beside the database.

Each event once: inside a ``kms claude`` session that runs its own hooks (``$KMS_SESSION_HOOKS``), a hook
installed by ``kms hooks install`` or the plugin (no ``--contract``) stands aside and prints nothing: the
launcher's set, which carries the session's contract and its token, takes the event.

The session: ``--contract FILE`` (the ``KMS_*`` variables ``kms claude`` wrote for this session, 0600, beside
its ``--mcp-config``), else the environment (``--db`` and ``--config`` pin the database and the settings file,
as a plugin's MCP entry does; ``KMS_SESSION_ID``, else one derived from the host's own session id, so every
event of one host session lands on one kms session). The rules are the core's
(``server.writes.hook_events``); this module only reads, calls and prints.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

SESSION_HOOKS_VAR = "KMS_SESSION_HOOKS"
"""Set by ``kms claude`` (to its session id) in claude's environment when the session runs its own hooks: an
installed hook (no ``--contract``: ``kms hooks install``, the plugin) then stands aside, so each event of a
``kms claude`` session is taken once, by the launcher's set (docs/hooks.md)."""
MAX_EVENT_BYTES = 16 * 1024 * 1024  # a PostToolUse event carries the tool's whole answer
LOG_NAME = "kms-hooks.log"
USAGE = "usage: kms hook EVENT [--contract FILE | --db FILE --config FILE]   (EVENT: {})".format


def log_path(env: Mapping[str, str]) -> Path:
    # deferred: the hook's module imports nothing that can fail outside its fail-open guard (a Ctrl-C or a
    # broken import mid-import is logged, and the host still gets exit 0)
    from server.store.db import default_db_path

    return default_db_path(env).parent / LOG_NAME


def log_line(env: Mapping[str, str], message: str) -> None:
    """One line in kms's hook log (best effort: a hook that cannot log still exits 0)."""
    try:
        path = log_path(env)
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} pid {os.getpid()} {' '.join(message.split())[:2000]}\n")
    except Exception:  # noqa: S110 - fail-open: nothing may stop the host
        pass


def host_session_id(host_session: str) -> str:
    """A kms session id for a host session kms did not launch: stable, so its events share one record."""
    return "c" + hashlib.sha256(host_session.encode()).hexdigest()[:12]


def session_env(contract: Path | None, env: Mapping[str, str], event: Mapping[str, Any]) -> dict[str, str]:
    """The ``KMS_*`` variables that describe the session (``SessionConfig.from_env`` reads them)."""
    if contract is not None:
        loaded = json.loads(contract.read_text(encoding="utf-8"))
        if not isinstance(loaded, dict) or not all(isinstance(v, str) for v in loaded.values()):
            raise ValueError(f"{contract}: not a session contract")
        return dict(loaded)
    own = {k: v for k, v in env.items() if k.startswith("KMS_")}
    if not own.get("KMS_SESSION_ID"):
        host = event.get("session_id")
        if not isinstance(host, str) or not host:
            raise ValueError("the event names no session, and KMS_SESSION_ID is not set")
        own["KMS_SESSION_ID"] = host_session_id(host)
        if not own.get("KMS_PROJECT") and isinstance(event.get("cwd"), str):
            own["KMS_PROJECT"] = event["cwd"]
    return own


def _options(argv: Sequence[str], names: Sequence[str]) -> tuple[list[str], dict[str, str]]:
    """The words that are not ``--name=VALUE`` / ``--name VALUE`` options, and those options."""
    args, options, words = [], {}, list(argv)
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if name in names:
            options[name] = value if eq else words.pop(0)
        else:
            args.append(word)
    return args, options


def run(argv: Sequence[str], stdin: Any, env: Mapping[str, str]) -> dict[str, Any] | None:
    """One hook call; raises on anything wrong (``main`` turns that into a log line and exit 0)."""
    # deferred: inside the fail-open guard (as in log_path)
    from server.config.session_contract import SessionConfig
    from server.store.db import connect
    from server.writes.hook_events import EVENTS, handle

    args, options = _options(argv, ("--contract", "--db", "--config"))
    contract = Path(options["--contract"]) if "--contract" in options else None
    pinned = {var: options[opt] for opt, var in (("--db", "KMS_DB_PATH"), ("--config", "KMS_CONFIG")) if opt in options}
    env = {**env, **pinned}
    if len(args) != 1 or args[0] not in EVENTS:
        raise ValueError(USAGE(", ".join(EVENTS)))
    raw = stdin.read(MAX_EVENT_BYTES + 1)
    if len(raw) > MAX_EVENT_BYTES:
        raise ValueError("the event is larger than 16 MiB")
    if contract is None and env.get(SESSION_HOOKS_VAR):
        return None  # an installed hook inside a kms claude session that runs its own: they take this event
    event = json.loads(raw or "{}")
    if not isinstance(event, dict):
        raise ValueError("the event is not a JSON object")
    event.setdefault("hook_event_name", EVENTS[args[0]])
    session = session_env(contract, env, event)
    config = SessionConfig.from_env(session, watch=False)
    conn = connect(config.db_path)
    try:
        return handle(conn, config, event)
    finally:
        conn.close()


def main(argv: Sequence[str], env: Mapping[str, str] | None = None) -> int:
    """The whole command: always 0 (fail-open); the answer, if any, on stdout."""
    env = os.environ if env is None else env
    try:
        answer = run(argv, sys.stdin.buffer if hasattr(sys.stdin, "buffer") else sys.stdin, env)
    except BaseException as e:  # noqa: BLE001 - fail-open, by design
        log_line(env, f"kms hook {' '.join(argv)}: {type(e).__name__}: {e}")
        return 0
    if answer is not None:
        sys.stdout.write(json.dumps(answer, ensure_ascii=False) + "\n")
        sys.stdout.flush()
    return 0
