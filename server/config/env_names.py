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
