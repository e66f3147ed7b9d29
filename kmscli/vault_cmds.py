"""Vaults: ``kms vault add``, ``list``, ``set`` and ``remove``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import apsw
import typer
from rich.markup import escape

from kmscli.handled_interrupt import interrupts_noticed
from kmscli.index_cmds import interrupted_index, run_index
from kmscli.output import EXIT_INTERRUPTED, JsonOpt, Table, cli_errors, console, err_console, open_db, print_json
from server.errors import KmsError
from server.humanize import stamp
from server.index.indexer import remove_vault
from server.index.link_vaults import workspace_view
from server.index.overview import overview
from server.vault import git
from server.vault.registry import GIT_MODES, add_vault, get_vault, set_dialect, set_git_mode, set_sync, vault_at
from server.vault.sync_tools import describe as describe_sync

if TYPE_CHECKING:
    pass

vault_app = typer.Typer(help="Register, list and forget vaults (folders of Markdown notes).", no_args_is_help=True)


@vault_app.command("add")
def vault_add(
    path: Annotated[str, typer.Argument(help="Folder of Markdown notes.")],
    name: Annotated[str | None, typer.Option("--name", help="Name (default: folder name).")] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Register only; index later.")] = False,
    dialect: Annotated[
        str | None,
        typer.Option("--dialect", help="obsidian, dendron, foam or logseq (default: detected from the folder)."),
    ] = None,
    git: Annotated[
        str | None,
        typer.Option(
            "--git",
            help="commit: every agent write unit is a git commit; sync: and fetch, merge and push (docs/git.md).",
        ),
    ] = None,
) -> None:
    """Register a vault (and index it). A folder registered before and never indexed (an interrupted
    ``kms vault add``) is indexed now."""

    with cli_errors():
        if git is not None:
            check_git_mode(path, git)  # before anything is registered
        conn = open_db(create=True)
        known = None
        try:
            vault = add_vault(conn, path, name, dialect)
        except KeyboardInterrupt:
            registered = vault_at(conn, path)
            if registered is not None:  # stopped after the commit, before add_vault returned
                interrupted_index(conn, registered.name)
            err_console.print(
                f"[yellow]stopped before {escape(str(path))} was registered: nothing kept; run `kms vault add "
                f"{escape(str(path))}` again[/]",
                highlight=False,
            )
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except KmsError as exc:
            known = vault_at(conn, path)
            if known is None or exc.kind != "already-exists":
                raise
            if known.last_indexed_at is not None or no_index:
                raise KmsError(
                    exc.kind,
                    f"{exc.message}; `kms index --vault {known.name}` brings its index up to date",
                    **exc.extra,
                ) from None
            console.print(
                f"Vault [bold]{escape(known.name)}[/] at {escape(str(known.root))} was registered but never indexed:"
                " indexing it now",
                soft_wrap=True,  # a path is never broken across lines
            )
            vault = known
        try:  # Ctrl-C from here on: the vault is registered, and the message says what to run next
            with interrupts_noticed():
                if vault is not known:
                    root = escape(str(vault.root))
                    console.print(
                        f"Added vault [bold]{escape(vault.name)}[/] at {root} ({vault.dialect})", soft_wrap=True
                    )
                    console.print(
                        f"kept in sync by {describe_sync(vault.sync)} (if not: kms vault set {escape(vault.name)}"
                        " sync=TOOL|none)",
                        highlight=False,
                    )
                    _say_workspace(conn, vault.id)
                if git is not None:
                    vault, _changed = set_git_mode(conn, vault.name, git)
                    console.print(f"git mode: {vault.git_mode}", highlight=False)
                if not no_index:
                    run_index(conn, full=False, vault=vault.name, embed=False)
        except KeyboardInterrupt:
            interrupted_index(conn, vault.name)


def _say_workspace(conn: apsw.Connection, vault_id: int) -> None:
    """The Dendron workspace a new vault is (or is a vault of): its vaults and the kms vault each one's
    ``dendron://`` links resolve into."""

    vault = get_vault(conn, vault_id)
    view = workspace_view(conn, vault)
    if view is None:
        return
    if view.vaults:
        how = "its root" if view.at_root else "a vault folder"
        console.print(
            f"Dendron workspace {view.root} (added by {how}), {len(view.vaults)} vault(s):",
            highlight=False,
            soft_wrap=True,
        )
    for m in view.vaults:
        if m.vault is None:
            where = f"no kms vault holds it yet (kms vault add {m.path})"
        elif m.vault == vault.name:
            where = f"this vault, folder {m.folder}/" if m.folder else "this vault"
        else:
            where = f"vault {m.vault}" + (f", folder {m.folder}/" if m.folder else "")
        console.print(f"  dendron://{m.name}/ ({m.fs_path}) -> {where}", markup=False, highlight=False, soft_wrap=True)
    if view.problem:
        name = escape(vault.name)
        hint = "" if vault.dialect == "dendron" else f" (a Dendron vault? kms vault set {name} dialect=dendron)"
        console.print(
            f"[yellow]note: {escape(str(view.problem))}; dendron:// links it does not name resolve by kms vault"
            f" name{hint}[/]",
            highlight=False,
            soft_wrap=True,
        )


@vault_app.command("list")
def vault_list(json_out: JsonOpt = False) -> None:
    """List registered vaults."""

    with cli_errors():
        vaults = overview(open_db()).vaults
    if json_out:
        print_json([v.to_json() for v in vaults])
        return
    table = Table("name", "root", "dialect", "sync", "notes", "hidden", "conflicts", "last indexed")
    for v in vaults:
        table.add_row(
            v.name,
            v.root,
            v.dialect or "-",
            describe_sync(v.sync),
            str(v.notes),
            str(v.hidden),
            str(v.conflicts or 0),
            stamp(v.last_indexed_at),
        )
    console.print(table if vaults else "No vaults yet: [bold]kms vault add PATH[/]")


VaultNameArg = Annotated[str, typer.Argument(help="The vault's name (kms vault list).")]


@vault_app.command("set")
def vault_set(
    name: VaultNameArg,
    assignment: Annotated[
        str,
        typer.Argument(
            help="dialect=obsidian|dendron|foam|logseq, git=off|commit|sync, or sync=TOOL[,TOOL] (git, syncthing, "
            "obsidian-sync, obsidian-git, nextcloud, dropbox, onedrive, icloud, google-drive) or sync=none",
            metavar="KEY=VALUE",
        ),
    ],
) -> None:
    """Change a vault's setting: its dialect (its notes are read again by the new rules), its git mode, or what
    keeps it in sync (which names are conflict copies follows it)."""

    with cli_errors():
        key, sep, value = assignment.partition("=")
        key = key.strip()
        if not sep or key not in ("dialect", "git", "sync"):
            raise KmsError(
                "invalid-input", f"expected dialect=NAME, git=off|commit|sync or sync=TOOL, got {assignment!r}"
            )
        conn = open_db()
        if key == "git":
            if value != "off":
                check_git_mode(str(get_vault(conn, name).root), value)
            vault, changed = set_git_mode(conn, name, value)
            said = "is" if not changed else "is now"
            console.print(f"vault [bold]{escape(vault.name)}[/] {said} in git mode {vault.git_mode}")
            return
        if key == "sync":
            vault, changed = set_sync(conn, name, value)
            said = describe_sync(vault.sync)
            if not changed:
                console.print(f"vault [bold]{escape(vault.name)}[/] is kept in sync by {said} already; nothing to do")
                return
            console.print(f"vault [bold]{escape(vault.name)}[/] is kept in sync by {said} now")
            run_index(conn, full=False, vault=vault.name, embed=False)  # its conflict copies, read by the new names
            return
        vault, changed = set_dialect(conn, name, value)
        if not changed:
            console.print(f"vault [bold]{escape(vault.name)}[/] is {vault.dialect} already; nothing to do")
            return
        console.print(f"vault [bold]{escape(vault.name)}[/] is now {vault.dialect}; reading its notes again")
        run_index(conn, full=True, vault=vault.name, embed=False)


def check_git_mode(folder: str, mode: str) -> None:
    """A git mode a folder can have: ``invalid-input`` for an unknown mode, a folder in no git work tree, or
    ``sync`` with a git older than ``merge-tree --write-tree`` (2.38)."""
    if mode not in GIT_MODES:
        raise KmsError("invalid-input", f"git mode must be one of {', '.join(GIT_MODES)}, not {mode!r}")
    if mode == "off":
        return
    try:
        git.open_repo(Path(folder).expanduser().resolve())
        if mode == "sync" and git.version() < git.MERGE_TREE_MIN:
            raise git.GitTooOld(f"git mode sync needs git {'.'.join(map(str, git.MERGE_TREE_MIN))} or newer")
    except git.GitError as e:
        raise KmsError("invalid-input", f"{e}; git mode needs the folder in a git work tree (git init)") from None


@vault_app.command("remove")
def vault_remove(name: VaultNameArg) -> None:
    """Forget a vault: its index rows go, its files are never touched; kms hide stamps are kept for it
    (added again under the same name, its hidden notes stay hidden)."""

    with cli_errors():
        vault = remove_vault(open_db(), name)
    console.print(
        f"Forgot vault [bold]{escape(vault.name)}[/] ({escape(str(vault.root))} untouched; its kms hide stamps are"
        " kept for a vault added again as that name)"
    )
