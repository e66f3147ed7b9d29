"""The ``kms`` command table: each command's name, where it lives (``module:attribute``), its help panel and
the line ``kms --help`` lists it with, in listing order; and the lazy group that serves it.

``kms --help`` (and a shell's completion of a command name) reads this table and imports no command module;
running a command imports its module only. So every command module imports what it needs at its top, and a
process pays only for the command it runs (``kms vault add`` loads no dashboard, ``kms search`` no service).
``tests/cli/test_cli_lazy.py`` checks that each row's line is what its command would show, and that
``kms --help`` is the same with every command loaded.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any

import typer
from typer.main import get_command, get_group

from kmscli.output import KmsGroup

# ``kms --help`` lists the commands in these panels, in this order (``vault`` first: a newcomer's first need).
VAULTS, AGENTS, REVIEW, SERVICE, SETTINGS = "Vaults", "Agents", "Review", "Service", "Settings"


@dataclass(frozen=True)
class Entry:
    """One command: ``target`` is ``module:function`` (a command) or ``module:typer_app`` (a group);
    ``context`` names a dict of click context settings in the same module."""

    name: str
    target: str
    panel: str
    listed: str  # the line ``kms --help`` shows (the command's first paragraph; checked against it by a test)
    context: str | None = None


def _c(name: str, target: str, panel: str, listed: str, context: str | None = None) -> Entry:
    return Entry(name, target, panel, listed, context)


# the commands first, then the groups, each in listing order (the order Typer gave them when it built the tree)
TABLE: tuple[Entry, ...] = (
    _c("index", "kmscli.index_cmds:index_cmd", VAULTS,
       "Bring the index up to date with the files (incremental unless --full)."),
    _c("status", "kmscli.index_cmds:status_cmd", VAULTS,
       "Database, vaults and index health at a glance, and the sessions connected now; hidden notes' names only "
       "with --include-hidden."),
    _c("search", "kmscli.notes_cmds:search_cmd", VAULTS,
       "Search notes (BM25 ranked, highlighted) and agent write records; hidden notes only with --include-hidden "
       "(keyword search)."),
    _c("show", "kmscli.notes_cmds:show_cmd", VAULTS, "Show one note (id, title or path)."),
    _c("tags", "kmscli.notes_cmds:tags_cmd", VAULTS, "Tags with their note counts, most used first."),
    _c("properties", "kmscli.notes_cmds:properties_cmd", VAULTS,
       "Properties the notes carry, with their most common values (for search --where)."),
    _c("recent", "kmscli.notes_cmds:recent_cmd", VAULTS, "Most recently changed notes."),
    _c("backlinks", "kmscli.notes_cmds:backlinks_cmd", VAULTS, "Notes that link to NOTE."),
    _c("unresolved", "kmscli.notes_cmds:unresolved_cmd", VAULTS,
       "Link names no note answers (what to create or fix), most linked first, with one note that links each."),
    _c("hide", "kmscli.notes_cmds:hide_cmd", VAULTS, "Hide a note from every agent-facing listing and search."),
    _c("unhide", "kmscli.notes_cmds:unhide_cmd", VAULTS, "Make a hidden note visible to agents again."),
    _c("hidden", "kmscli.notes_cmds:hidden_cmd", VAULTS,
       "List the notes agents never see (privacy rules and `kms hide`)."),
    _c("watch", "kmscli.index_cmds:watch_cmd", VAULTS, "Keep the index in sync while files change (Ctrl-C to stop)."),
    _c("embed", "kmscli.index_cmds:embed_cmd", VAULTS,
       "Compute embeddings for semantic search (incremental; interrupt and resume freely)."),
    _c("claude", "kmscli.launcher:claude_command", AGENTS,
       "Start Claude Code with kms (and your other enabled MCP servers) for this session.",
       context="CLAUDE_CONTEXT_SETTINGS"),
    _c("mcp-config", "kmscli.hosts_cmd:mcp_config_command", AGENTS,
       "Give another agent host the kms server: print its config document, or --install it in place."),
    _c("mcp", "kmscli.agent_cmds:mcp_cmd", AGENTS,
       "Serve the vault to an agent over MCP (stdio). Configured by KMS_* environment variables."),
    _c("hook", "kmscli.agent_cmds:hook_cmd", AGENTS,
       "An agent host's command hook: the event's JSON on stdin, kms's answer on stdout (docs/hooks.md). "
       "Fail-open: it always exits 0.",
       context="HOOK_CONTEXT_SETTINGS"),
    _c("demo", "kmscli.dashboard_cmds:demo_cmd", AGENTS,
       "Zero-setup demo: a scripted agent works on a copy of the sample vault while you watch."),
    _c("tui", "kmscli.dashboard_cmds:tui_cmd", REVIEW,
       "Live dashboard: agent sessions, writes (with review and revert), reads and settings."),
    _c("pending", "kmscli.control_cmds:pending_cmd", REVIEW,
       "Write calls waiting for your approval, oldest first, each with the exact diff it would apply; with "
       "`--after`, the writes that landed for review after (undo one with `kms revert ID`)."),
    _c("approve", "kmscli.control_cmds:approve_cmd", REVIEW,
       "Approve waiting writes: the agent's call applies each, or, staged by a session that does not wait "
       "(remote), it is applied now (conflict if the note changed since: nothing written)."),
    _c("reject", "kmscli.control_cmds:reject_cmd", REVIEW,
       "Reject waiting writes: nothing is written, the agent is told (with your reason)."),
    _c("log", "kmscli.notes_cmds:log_cmd", REVIEW,
       "Agent write calls (provenance), newest first; the calls on hidden notes only with --include-hidden."),
    _c("revert", "kmscli.changes_cmds:revert_cmd", REVIEW,
       "Take back one agent write as one unit (every file it touched), after showing what changes."),
    _c("diff", "kmscli.history_cmds:diff_cmd", REVIEW,
       "What changed between a version kms kept and the note now (or another version: --to); a deleted note "
       "shows its whole text removed and how to bring it back."),
    _c("restore", "kmscli.history_cmds:restore_cmd", REVIEW,
       "Bring a note (also a deleted one) back to a version kms kept, after showing the change; recorded as yours "
       "and revertible (`kms revert`)."),
    _c("serve", "kmscli.service_cmds:serve_cmd", SERVICE,
       "Run the kms service in the foreground (for systemd, launchd or a terminal); Ctrl-C stops it."),
    _c("doctor", "kmscli.doctor:doctor_command", SETTINGS,
       "Check claude, the index, the embedding model, settings, and what a session would get."),
    _c("repair", "kmscli.repair_cmd:repair_cmd", SETTINGS,
       "Rebuild a damaged database from your vaults, keeping every row still readable in it and filling in from "
       "the newest backup what it lost. Only a file that is (or was) a kms database is moved aside, and only once "
       "you agree (or with --yes)."),
    _c("vault", "kmscli.vault_cmds:vault_app", VAULTS,
       "Register, list and forget vaults (folders of Markdown notes)."),
    _c("model", "kmscli.model_cmds:model_app", VAULTS,
       "The local embedding model (all-MiniLM-L6-v2) for semantic search."),
    _c("hooks", "kmscli.plugin_cmds:hooks_app", AGENTS,
       "Install kms's hooks into your own Claude Code settings (docs/hooks.md)."),
    _c("plugin", "kmscli.plugin_cmds:plugin_app", AGENTS,
       "Export kms as a plugin for an agent host (docs/hooks.md)."),
    _c("servers", "kmscli.servers_cmd:servers_app", AGENTS,
       "MCP servers for `kms claude` sessions (built-in and your own)."),
    _c("session", "kmscli.control_cmds:session_app", REVIEW,
       "Agent sessions: list them, pause, resume or revoke their writes, undo one."),
    _c("history", "kmscli.history_cmds:history_app", REVIEW,
       "Every version kms kept of a note: `kms history NOTE` (`kms history show NOTE` for a note named like a "
       "command: prune, forget, show), `kms history prune`, `kms history forget NOTE`."),
    _c("trash", "kmscli.changes_cmds:trash_app", REVIEW,
       "The vaults' .trash/ folders: what agents trashed, restore it, empty it."),
    _c("conflicts", "kmscli.conflict_cmds:conflicts_app", REVIEW,
       "Notes with two versions (a sync tool's conflict copy, a git merge): list them with their diff, resolve."),
    _c("review", "kmscli.review_cmds:review_app", REVIEW,
       "The review pages in a browser: approve, reject and undo agents' work (docs/review.md)."),
    _c("service", "kmscli.service_cmds:service_app", SERVICE,
       "The kms service: one process serving every agent session over HTTP on loopback."),
    _c("token", "kmscli.service_cmds:token_app", SERVICE,
       "Bearer tokens for the kms service and remote grants: create (shown once), list, revoke."),
    _c("remote", "kmscli.remote_cmds:remote_app", SERVICE,
       "Remote mode: claude.ai, Claude on the phone and ChatGPT reach kms through OAuth (docs/remote.md)."),
    _c("config", "kmscli.config_cmd:config_app", SETTINGS,
       "Read and change kms settings (one TOML file; environment variables override keys)."),
)  # fmt: skip
BY_NAME = {e.name: e for e in TABLE}


def summary(doc: str | None) -> str | None:
    """A command's first paragraph as one line: the listing in ``kms --help`` showed a docstring's own
    line breaks mid-sentence."""
    return " ".join(doc.split("\n\n", 1)[0].split()) if doc else None


def load(entry: Entry, help_names: list[str]) -> Any:
    """The real click command of ``entry``: its module imported, its function or Typer app built
    (``help_names``: the help option's names, as its parent context has them)."""
    module_name, attr = entry.target.split(":")
    module = importlib.import_module(module_name)
    target = getattr(module, attr)
    command: Any
    if isinstance(target, typer.Typer):
        command = get_group(target)  # (not get_command: that would add the completion options to it)
        command.name = entry.name
    else:
        single = typer.Typer(add_completion=False)
        context = getattr(module, entry.context) if entry.context else None
        single.command(entry.name, short_help=summary(target.__doc__), context_settings=context)(target)
        command = get_command(single)
    command.rich_help_panel = entry.panel
    _flags_show_no_type(command, help_names)
    return command


def _flags_show_no_type(command: Any, help_names: list[str]) -> None:
    """Typer shows a ``<bool>`` type after every flag in ``--help`` (``--json <bool>``), which reads as if the
    flag took a value; a flag takes none, so it shows none (an empty metavar, which Typer shows as it is).
    The help option is made here (click keeps the one it makes) to be shown so too."""
    help_option = command.get_help_option(typer.Context(command, help_option_names=help_names))
    for param in [*command.params, *([help_option] if help_option else [])]:
        _no_type(param)
    for sub in getattr(command, "commands", {}).values():
        _flags_show_no_type(sub, help_names)


def _no_type(param: Any) -> None:
    if getattr(param, "is_flag", False) and param.metavar is None:
        param.metavar = ""


class LazyGroup(KmsGroup):
    """The root ``kms`` group over ``TABLE``: it lists every command from the table, and imports one only
    to run it (or to show its own help, or the docs generator's walk)."""

    listing = False  # while the root's help or a completion lists the commands: the table's lines serve

    def list_commands(self, ctx: Any) -> list[str]:
        return [*super().list_commands(ctx), *(e.name for e in TABLE if e.name not in self.commands)]

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        found = super().get_command(ctx, cmd_name)
        entry = BY_NAME.get(cmd_name)
        if found is not None or entry is None:
            return found
        if self.listing:
            stub = typer.core.TyperCommand(cmd_name, short_help=entry.listed, callback=None)
            stub.rich_help_panel = entry.panel
            return stub
        command = load(entry, ctx.help_option_names)
        self.add_command(command, cmd_name)
        return command

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        for param in params:  # the root's flags (--version, --help, the completion ones) as every command's
            _no_type(param)
        return params

    def format_help(self, ctx: Any, formatter: Any) -> None:
        self.listing = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.listing = False

    def shell_complete(self, ctx: Any, incomplete: str) -> Any:
        self.listing = True
        try:
            return super().shell_complete(ctx, incomplete)
        finally:
            self.listing = False
