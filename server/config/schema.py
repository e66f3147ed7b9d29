"""The settings schema: every key once, with its type, default, environment variable and help.

``SETTINGS`` is the single source for ``kms config``, the session contract
(``server/config/session_contract.py``), the TUI settings screen and ``docs/settings.md``. One grammar
turns text (the command line, an environment variable) into a typed value: ``values.parse_value``;
``values.validate_value`` checks typed values (as TOML reads them). ``ENV_VARS`` lists every ``KMS_*``
variable kms knows, so an unknown or misspelt one can be refused by name.
This module never imports typer, textual or rich: the TUI and the core use it too.
"""

from __future__ import annotations

from server.config import validators
from server.config.allowlist import describe
from server.config.schema_connections import CONNECTION_SETTINGS
from server.config.setting_errors import SettingsError as SettingsError  # the schema's errors, where callers look
from server.config.setting_errors import SettingsFileError as SettingsFileError
from server.config.setting_errors import SettingValueError as SettingValueError
from server.config.setting_errors import UnknownSettingError
from server.config.setting_row import AUTO, Setting

# ----------------------------------------------------------------------------- schema


# The built-in MCP servers besides kms itself (their builders live in kmscli/compose.py).
BUILTIN_SERVERS: dict[str, str] = {
    "playwright": "the Playwright MCP server for browser automation (`npx -y @playwright/mcp@latest`)",
    "filesystem": "the reference filesystem server, scoped to the vault roots or the cwd "
    "(`npx -y @modelcontextprotocol/server-filesystem`)",
}

_SCHEMA: list[Setting] = [
    Setting(
        "kms.enabled",
        "bool",
        AUTO,
        "Master switch: give agent sessions the kms MCP server. Default: on once a vault is registered.",
        "KMS_ENABLED",
    ),
    Setting(
        "agent.read",
        "bool",
        AUTO,
        "Agents may search and read notes (the read tools). Default: on once a vault is registered.",
        "KMS_AGENT_TOOLS_ENABLED",
        parent="kms.enabled",
    ),
    Setting(
        "agent.write",
        "bool",
        False,
        "Agents may create and edit notes (the write tools), only inside write.allowlist. Off until you "
        "turn it on; `kms claude --write/--no-write` overrides it for one session.",
        "KMS_AGENT_WRITE_TOOLS_ENABLED",
        parent="agent.read",
    ),
    Setting(
        "agent.edit",
        "bool",
        False,
        "Agents may replace and delete text in notes (kms_edit), only inside write.allowlist; every edit is "
        "recorded and revertible. Needs agent.write. Off until you turn it on.",
        "KMS_AGENT_EDIT_TOOLS_ENABLED",
        parent="agent.write",
    ),
    Setting(
        "agent.organize",
        "bool",
        False,
        "Agents may move, rename and trash notes (kms_move, kms_rename, kms_trash; links are rewritten, "
        "nothing is deleted for good). Needs agent.edit. Off until you turn it on.",
        "KMS_AGENT_ORGANIZE_TOOLS_ENABLED",
        parent="agent.edit",
    ),
    Setting(
        "write.allowlist",
        "globs",
        [],
        "Where agents may add notes and text (create, append, insert, edit, move and rename targets, folder "
        "moves, trash). Each entry is a glob over a note's path inside the vault; `*`, `?` and `[...]` match "
        "within ONE name: `drafts/*` is every note directly in `drafts/` (not `drafts/x/y.md`), "
        "`inbox/*/notes/*` the notes directly in `inbox/<any>/notes/`, a plain folder name such as `drafts` "
        "that folder and every folder below it, `*` (or `/`) the notes in the vault root. "
        "Empty: every folder. Quote globs in the shell: `kms config set write.allowlist 'drafts/*' inbox`.",
        "KMS_WRITE_ALLOWLIST",
        validator=validators.check_globs,
        means=lambda value: [f"{p}: {describe(p)}" for p in value] or ["every folder (the list is empty)"],
    ),
    Setting(
        "write.per_minute",
        "int",
        10,
        "Most write-tool calls one agent session may make in any 60 seconds; 0 is refused (no unlimited).",
        "KMS_WRITE_PER_MINUTE",
        validator=validators.int_range(1, 10_000),
        valid="a whole number from 1 to 10000",
    ),
    Setting(
        "write.per_session",
        "int",
        200,
        "Most write-tool calls one agent session may make in total; 0 is refused (no unlimited).",
        "KMS_WRITE_PER_SESSION",
        validator=validators.int_range(1, 1_000_000),
        valid="a whole number from 1 to 1000000",
    ),
    Setting(
        "write.max_files_per_call",
        "int",
        50,
        "Most files one write call may touch (a rename rewriting links, kms_create_many); a call over it "
        "answers too-broad and changes nothing.",
        "KMS_WRITE_MAX_FILES_PER_CALL",
        validator=validators.int_range(1, 100_000),
        valid="a whole number from 1 to 100000",
    ),
    Setting(
        "write.approval",
        "text",
        "off",
        "Which write calls wait for your approval before they land: `off`, `bulk` (calls touching more than "
        "one file or more than write.approval_lines lines) or `always`. A waiting call shows its exact diff "
        "in the dashboard's pending pane; approve with `a` or `kms approve ID`, reject with `x` or `kms reject "
        "ID`. `kms claude --approve` sets `always` for one session.",
        "KMS_WRITE_APPROVAL",
        validator=validators.one_of("off", "bulk", "always"),
        valid="off, bulk or always",
    ),
    Setting(
        "write.approval_channel",
        "text",
        "both",
        "Where a call waiting for approval is decided: `host` or `both` also ask in the agent's host (Claude "
        "Code's own dialog, when it declares form elicitation; Accept applies, Esc leaves it to the dashboard), "
        "`dashboard` never does. The dashboard and `kms approve` decide in every mode; the first decision "
        "wins. With `host` the dashboard's bell waits while the host asks (it rings if the person dismisses the "
        "host's dialog); with `both` it rings at once. `kms claude -p` uses `dashboard`.",
        "KMS_WRITE_APPROVAL_CHANNEL",
        validator=validators.one_of("host", "dashboard", "both"),
        valid="host, dashboard or both",
    ),
    Setting(
        "write.approval_lines",
        "int",
        20,
        "With write.approval = bulk: a call touching more lines than this (added plus removed) waits for approval.",
        "KMS_WRITE_APPROVAL_LINES",
        validator=validators.int_range(0, 1_000_000),
        valid="a whole number from 0 to 1000000",
    ),
    Setting(
        "write.approval_timeout",
        "int",
        120,
        "Seconds a call waits for your decision; then it answers approval-timeout and nothing is written.",
        "KMS_WRITE_APPROVAL_TIMEOUT",
        validator=validators.int_range(1, 86_400),
        valid="a whole number of seconds from 1 to 86400",
    ),
    Setting(
        "review.mode",
        "text",
        None,
        "When you review agents' writes: `before` (each waits for your approval, as write.approval = always), "
        "`after` (they land at once and are listed for one-click undo: `kms pending --after`) or `off`. Unset: "
        "write.approval decides. A session forced to ask (`kms claude --approve`, a token's `approval` scope) "
        "is `before` whatever this says. See docs/approvals.md.",
        "KMS_REVIEW_MODE",
        validator=lambda v: None if v is None else validators.one_of("before", "after", "off")(v),
        valid="before, after or off (unset: write.approval decides)",
    ),
    Setting(
        "review.max_lines",
        "int",
        0,
        "A write touching more lines than this (added plus removed) waits for review whatever review.mode "
        "says; 0: no such threshold (with write.approval = bulk: write.approval_lines).",
        "KMS_REVIEW_MAX_LINES",
        validator=validators.int_range(0, 1_000_000),
        valid="a whole number from 0 to 1000000",
    ),
    Setting(
        "review.max_files",
        "int",
        0,
        "A write touching more files than this waits for review whatever review.mode says; 0: no such "
        "threshold (with write.approval = bulk: 1).",
        "KMS_REVIEW_MAX_FILES",
        validator=validators.int_range(0, 100_000),
        valid="a whole number from 0 to 100000",
    ),
    Setting(
        "embed.enabled",
        "bool",
        True,
        "Use the local embedding model for semantic search (falls back to full-text search when off or "
        "when the model is missing).",
        "KMS_EMBED_ENABLED",
    ),
    Setting(
        "embed.model_dir",
        "path",
        None,
        "Directory holding the embedding model files. Unset: the copy `kms model install` made (next to "
        "the database), then fastembed's cache.",
        "KMS_EMBED_MODEL_DIR",
    ),
    # Privacy rules judge notes for the whole index (every session shares it), so they are read
    # from the settings file only: no environment variable (env "").
    Setting(
        "privacy.frontmatter_key",
        "text",
        "private",
        "Hide from agents every note whose frontmatter sets this key to true (`private: true`); "
        "`visibility: private` always hides too. Empty: only `visibility: private`.",
        "",
        validator=validators.check_key,
        valid="a frontmatter key ('' = none)",
    ),
    Setting(
        "privacy.hide_folders",
        "globs",
        [],
        "Hide from agents every note in these folders, recursively: `journal/**`, `areas/health/**` "
        "(gitignore-style globs from the vault root; a bare `journal` means `journal/**`). Applies to "
        "every vault. A `.kmsignore` file (gitignore syntax) at a vault's root adds rules for that vault.",
        "",
        validator=validators.check_hide_folders,
        valid="vault-relative folder globs such as 'journal/**' 'areas/health/**'",
    ),
    Setting(
        "privacy.hide_tags",
        "globs",
        [],
        "Hide from agents every note carrying one of these tags (globs, case-insensitive, without '#'): "
        "`private`, `personal/*`.",
        "",
        validator=validators.check_hide_tags,
        valid="tags or tag globs such as 'private' 'personal/*'",
    ),
    Setting(
        "history.enabled",
        "bool",
        True,
        "Keep every version of every note kms sees change (its watcher, `kms index`, its own writes), "
        "compressed, so `kms history`, `kms diff` and `kms restore` can bring any of them back. Off: no new "
        "versions are kept (the ones kept stay until `kms history prune` or `kms history forget`).",
        "",
    ),
    Setting(
        "history.keep_all_days",
        "int",
        30,
        "Keep every version of a note this many days; older ones are thinned by `kms history prune` "
        "(the newest version of a note, and the last one before it was deleted, are always kept).",
        "",
        validator=validators.int_range(0, 36500),
        valid="a whole number of days from 0 to 36500",
    ),
    Setting(
        "history.keep_daily_days",
        "int",
        365,
        "After `history.keep_all_days`, keep one version a day (the day's last) up to this many days old; "
        "older versions go at `kms history prune`.",
        "",
        validator=validators.int_range(0, 36500),
        valid="a whole number of days from 0 to 36500",
    ),
    Setting(
        "history.max_mb",
        "int",
        1024,
        "The most the kept versions may take (compressed, in MB); `kms history prune` drops the oldest "
        "versions past it (never a note's newest). 0: no cap.",
        "",
        validator=validators.int_range(0, 1_000_000),
        valid="a whole number of MB (0 = no cap)",
    ),
    Setting(
        "backup.enabled",
        "bool",
        True,
        "Keep a daily copy of the database (history, provenance, sessions: what the vaults cannot rebuild) in "
        "`<database>.backup/` beside it, made in the background by the running service's watcher or by "
        "`kms index` once the newest copy is a day old; `kms repair` fills in from it what a damaged file lost. "
        "No copy is made while the disk could not hold two more. See docs/recovery.md.",
        "",
    ),
    Setting(
        "backup.keep",
        "int",
        3,
        "How many daily copies of the database `backup.enabled` keeps (the oldest go first).",
        "",
        validator=validators.int_range(1, 30),
        valid="a whole number of copies from 1 to 30",
    ),
    Setting(
        "embed.download",
        "bool",
        False,
        "Let kms download the embedding model from the model hub when it finds none (about 90 MB). Off: "
        "kms never reaches the network on its own; get the model with `kms model download` or "
        "`kms model install --from DIR`.",
        "KMS_EMBED_DOWNLOAD",
    ),
    Setting(
        "memory.folder",
        "text",
        "kms-memory",
        "Folder (in each vault) of the memory notes kms_remember keeps: one for the person, one per project. "
        "kms_remember may write there (only there, and only notes it names itself) even when write.allowlist "
        "does not list it; the other write tools still follow write.allowlist. Empty: agents keep no memory.",
        "KMS_MEMORY_FOLDER",
        validator=validators.check_memory_folder,
        valid="a vault-relative folder such as 'kms-memory' ('' = no memory)",
    ),
    Setting(
        "capture.enabled",
        "bool",
        True,
        "Session capture: `kms claude` starts each session with kms's orientation (the start brief) and, at "
        "compaction and at the end, writes one session note in capture.folder from kms's own records (what "
        "the session read, changed, searched, captured), through the write guard: revertible, approval "
        "honoured. A session that read, searched and wrote nothing gets no note. Needs agent.read.",
        "KMS_CAPTURE_ENABLED",
    ),
    Setting(
        "capture.folder",
        "text",
        "kms-sessions",
        "Folder (in the session's vault) of the session notes; never a hidden folder.",
        "KMS_CAPTURE_FOLDER",
        validator=validators.check_capture_folder,
        valid="a vault-relative folder such as 'kms-sessions' (not '': capture.enabled off turns capture off)",
    ),
    Setting(
        "capture.ask_agent",
        "int",
        0,
        "At the end of a turn (Stop), ask the agent once to record its decisions with kms_capture when the "
        "session changed at least this many notes and captured nothing. 0: never ask.",
        "KMS_CAPTURE_ASK_AGENT",
        validator=validators.int_range(0, 1000),
        valid="a whole number from 0 (off) to 1000",
        parent="capture.enabled",
    ),
    Setting(
        "capture.prompts",
        "bool",
        False,
        "Keep the person's prompts in the session note. Off: prompts are never stored.",
        "KMS_CAPTURE_PROMPTS",
        parent="capture.enabled",
    ),
    *CONNECTION_SETTINGS,
    *[
        Setting(
            f"servers.{name}.enabled",
            "bool",
            False,
            f"Add {desc} to `kms claude` sessions.",
            f"KMS_SERVERS_{name.upper()}_ENABLED",
        )
        for name, desc in BUILTIN_SERVERS.items()
    ],
]

SETTINGS: dict[str, Setting] = {s.key: s for s in _SCHEMA}


def setting(key: str) -> Setting:
    """The schema entry for ``key``; unknown keys raise with the closest suggestions."""
    try:
        return SETTINGS[key]
    except KeyError:
        raise UnknownSettingError(key, suggest_keys(key)) from None


def suggest_keys(key: str, limit: int = 3) -> list[str]:
    """Closest known keys (rapidfuzz), for 'did you mean'."""
    # deferred: rapidfuzz only to suggest a key for an unknown one
    from rapidfuzz import fuzz, process, utils

    choices = list(SETTINGS)
    found = process.extract(key, choices, scorer=fuzz.WRatio, processor=utils.default_process, limit=limit)
    return [name for name, score, _ in found if score >= 60]


# ----------------------------------------------------------------------------- value parsing
