"""The ``KMS_*`` variables kms reads besides the settings' own (``server.config.schema`` lists both)."""

from __future__ import annotations

# Variables kms reads besides the settings' own (name -> what it is, valid values or None = any text).
OTHER_ENV: dict[str, tuple[str, str | None]] = {
    "KMS_DB_PATH": (
        "The index database (default: the platform data dir); `kms vault add` creates it, other commands say"
        " when there is none there.",
        "a file path",
    ),
    "KMS_CONFIG": ("The settings file (default: the platform config dir).", "a file path"),
    "KMS_SESSION_ID": ("The agent session a server belongs to (`kms claude` sets it).", None),
    "KMS_VAULT": ("Scope a session to one vault (`kms claude --vault`); unset: every vault.", "a vault's name"),
    "KMS_PROJECT": (
        "The project a session works on (`kms claude` passes its working directory): what "
        "kms_start reports as changed since that project's last session, and whose memory "
        "kms_remember keeps. Unset: the server's working directory (unless it is / or home).",
        "any text, usually a folder path",
    ),
    "KMS_LOG_LEVEL": ("Log level of `kms mcp` on stderr.", "DEBUG, INFO, WARNING, ERROR, CRITICAL"),
    "KMS_SERVICE_READ_TIMEOUT": (
        "Seconds the kms service waits for a request's headers, or for the next piece of its body, before it "
        "answers 408 and closes the connection (default 10; the whole body gets six times that).",
        "a number of seconds from 0.1 to 600",
    ),
    "KMS_CLAUDE_BIN": ("The `claude` executable `kms claude` starts.", "a path or a name on PATH"),
    "KMS_CRASH_AT": (
        "For tests of crash safety only: the process kills itself (SIGKILL) when a write reaches this named "
        "point (`server/writes/crash_points.py`). Never set it otherwise.",
        "write.journaled, write.landed, write.recorded (unset: never)",
    ),
    "KMS_SESSION_TOKEN": (
        "The bearer token of a `kms claude` session served by the kms service (`kms claude` "
        "sets it for the host's HTTP entry; revoked when the session ends).",
        None,
    ),
    "KMS_TOKEN_LEASE_S": (
        "For tests and ops: the seconds a `kms claude` session token lives past its launcher's last renewal "
        "(default 90; the launcher renews it every third of that, and a killed launcher's token lapses within it).",
        "a positive number of seconds",
    ),
    "KMS_SESSION_HOOKS": (
        "Set by `kms claude` (to its session id) in the host's environment when the session runs its own hooks: "
        "kms's installed hooks (`kms hooks install`, the plugin) then stand aside, so each event runs once "
        "(docs/hooks.md). Not for people to set.",
        None,
    ),
    **{
        f"KMS_TOKEN_{host.upper()}": (
            f"The kms service token {label} reads for its HTTP entry "
            f"(`kms mcp-config {host} --http`; `kms token secret {host}` prints it).",
            None,
        )
        for host, label in (
            ("cursor", "Cursor"),
            ("vscode", "VS Code"),
            ("windsurf", "Windsurf"),
            ("codex", "Codex CLI"),
            ("gemini", "Gemini CLI"),
        )
    },
}


def read_timeout_value(raw: str) -> float | None:
    """``KMS_SERVICE_READ_TIMEOUT``'s seconds (None: not a number from 0.1 to 600; '' is checked by the caller)."""
    try:
        seconds = float(raw)
    except ValueError:
        return None
    return seconds if 0.1 <= seconds <= 600 else None


def positive_seconds(raw: str) -> float | None:
    """``raw`` as a positive, finite number of seconds (``KMS_TOKEN_LEASE_S``), else None."""
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0 < value < float("inf") else None
