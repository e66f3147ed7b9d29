"""``docs/settings.md``, generated from the schema (a test keeps the file current)."""

from __future__ import annotations

from server.config.env_names import OTHER_ENV
from server.config.schema import SETTINGS
from server.config.values import format_value


def settings_markdown() -> str:
    """``docs/settings.md``, generated from the schema (a test keeps the file current)."""
    lines = [
        "# kms settings",
        "",
        "<!-- Generated from server/config/schema.py by scripts/gen_settings_doc.py; do not edit. -->",
        "",
        "Settings live in one TOML file: `kms config path` prints where (`$KMS_CONFIG` overrides it).",
        "Precedence, lowest first: default, config file, environment variable, per-session flag",
        "(`kms claude --write/--no-write`). `kms config list` shows each value and where it came from.",
        "",
        "Set keys with `kms config set KEY VALUE...`, e.g. `kms config set write.allowlist inbox 'drafts/*'`",
        "(quote globs so the shell does not expand them). In environment variables switches are",
        "`1`/`0` (also true/false, on/off) and lists are comma-separated.",
        "",
        "| Key | Type | Default | Environment | Description |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in SETTINGS.values():
        default = "auto (on once a vault is registered)" if s.auto else format_value(s.default)
        desc = s.description.replace("|", "\\|")
        env = f"`{s.env}`" if s.env else "(settings file only)"
        lines.append(f"| `{s.key}` | {s.type} | {default} | {env} | {desc} Valid: {s.valid_values()}. |")
    lines += [
        "",
        "## Other environment variables",
        "",
        "`kms mcp` refuses to start on an unknown `KMS_*` variable or an invalid value (one line on stderr,",
        "exit 2), so a typo never silently changes what a session may do. Besides the settings' own:",
        "",
        "| Variable | Valid | Description |",
        "| --- | --- | --- |",
        *(f"| `{name}` | {valid or 'any text'} | {desc} |" for name, (desc, valid) in OTHER_ENV.items()),
        "",
        "## Custom MCP servers",
        "",
        "`kms servers add` stores extra servers for `kms claude` sessions as tables:",
        "",
        "```toml",
        "[servers.custom.github]    # stdio: kms servers add github --env GITHUB_TOKEN=... -- npx -y pkg",
        'command = "npx"',
        'args = ["-y", "@modelcontextprotocol/server-github"]',
        'env = { GITHUB_TOKEN = "..." }',
        "enabled = true",
        "",
        "[servers.custom.docs]      # http: kms servers add docs --url https://... --header 'K: V'",
        'url = "https://example.com/mcp"',
        'headers = { Authorization = "Bearer ..." }',
        "enabled = true",
        "```",
        "",
        "The file is written with mode 0600 because it may hold tokens; `--print-config` redacts them.",
        "",
        "## The file's version",
        "",
        "The file carries `settings_version` (a top-level key kms writes; a file without it is version 1).",
        "A file of an older version is read in its own grammar and rewritten once in the current one, so",
        "nothing a person allowed before is refused, nor anything more allowed (`kms config list` says what",
        "it changed):",
        "",
        "- version 2: `write.allowlist` entries are globs over a note's path (`drafts/*` the notes directly in",
        "  `drafts/`, `drafts` that folder and below). A version 1 entry named the folder a note had to be in,",
        "  so each becomes the notes directly in those folders: `drafts` -> `drafts/*`, `drafts/*` ->",
        "  `drafts/*/*`, `/` -> `*`. A service token's `folder:` scopes are upgraded the same way (m026).",
        "",
    ]
    return "\n".join(lines)
