"""``kms revert`` (take back one agent call, as one unit) and ``kms trash list|restore|empty``."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from kmscli.output import JsonOpt, Table, cli_errors, console, open_db, print_json, print_verbatim, report_error
from server.errors import KmsError
from server.humanize import ago

trash_app = typer.Typer(
    help="The vaults' .trash/ folders: what agents trashed, restore it, empty it.", no_args_is_help=True
)


def _show_preview(plan: dict[str, Any]) -> None:
    console.print(
        f"#{plan['invocationId']} {plan['tool']} on {plan['vault']}:{plan['path']}", markup=False, highlight=False
    )
    if plan.get("files"):
        console.print("[dim]what the call changed, file by file (a revert takes all of it back):[/]")
    for f in plan.get("files", []):
        where = f"{f['newPath']} → {f['path']}" if f.get("newPath") else f["path"]
        mark = "[green]✓[/]" if f["ok"] else f"[red]✗ {escape(f['problem'])}[/]"
        console.print(f"{mark} {escape(where)}", highlight=False)
        print_verbatim(f["diff"])
    if "files" not in plan:
        if plan.get("removeText"):
            console.print("remove:", markup=False)
            print_verbatim(plan["removeText"], end="\n")
        for key, change in (plan.get("restore") or {}).items():
            console.print(f"restore {key}: {change['from']!r} → {change['to']!r}", markup=False)


def revert_cmd(
    invocation_id: Annotated[int, typer.Argument(help="The invocation id (`kms log`, the dashboard).")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Revert without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Take back one agent write as one unit (every file it touched), after showing what changes."""
    from server.writes.undo import revert

    with cli_errors():
        conn = open_db()
        plan = revert.preview_revert(conn, invocation_id)
        if not json_out:
            _show_preview(plan)
        if not plan["canRevert"]:
            if json_out:
                print_json(plan)
                raise typer.Exit(1)
            raise report_error(KmsError("conflict", f"can't revert: {plan['reason']}"))  # on stderr, as errors are
        if not yes and not typer.confirm("Revert it?", default=False):
            console.print("nothing changed")
            raise typer.Exit(1)
        done = revert.revert(conn, invocation_id)
    if json_out:
        print_json(done)
        return
    console.print(f"[green]reverted #{invocation_id}[/] (recorded as #{done['invocationId']})", highlight=False)


@trash_app.command("list")
def trash_list(json_out: JsonOpt = False) -> None:
    """What is in the trash, newest first."""
    import time

    from server.writes.undo.trash import listing

    with cli_errors():
        items = listing(open_db())
    if json_out:
        print_json(
            [
                {
                    **t.to_json(),
                    "trashedBy": by
                    and {"invocationId": by.invocation_id, "session": by.session_id, "actor": by.actor, "at": by.at},
                }
                for t, by in items
            ]
        )
        return
    if not items:
        console.print("The trash is empty.")
        return
    table = Table("trashed", "vault", "path", "bytes", "by")
    now = time.time()
    for t, by in items:
        table.add_row(
            ago(t.trashed_at, now, "?"),
            t.vault,
            t.path,
            str(t.size),
            f"session {by.session_id} (#{by.invocation_id})" if by else "by hand",
        )
    console.print(table)


@trash_app.command("restore")
def trash_restore(
    note: Annotated[str, typer.Argument(help="Its path (as `kms trash list` shows it) or its name.")],
    json_out: JsonOpt = False,
) -> None:
    """Put a trashed note back where it was (with its id, when kms trashed it)."""
    from server.writes.undo.trash import restore

    with cli_errors():
        done = restore(open_db(), note)
    if json_out:
        print_json(done)
        return
    console.print(f"[green]restored[/] {escape(done['vault'] + ':' + done['path'])}", highlight=False)


@trash_app.command("empty")
def trash_empty(
    older_than: Annotated[
        str | None,
        typer.Option(
            "--older-than",
            help="Only what was trashed before this long ago, e.g. 30d, 12h, 2w. Trashed = the latest of kms's"
            " record of the move and the file's ctime/mtime (a rename into .trash/ keeps the mtime, not the ctime).",
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Delete trashed notes for good (the only way kms deletes anything)."""
    import time

    from server.writes.undo.trash import empty, list_trash, parse_duration

    with cli_errors():
        conn = open_db()
        cutoff = parse_duration(older_than) if older_than else None
        now = time.time()
        doomed = [t for t in list_trash(conn) if cutoff is None or now - t.trashed_at >= cutoff]
        if not doomed:
            if json_out:
                print_json([])
            else:
                console.print("Nothing to delete.")
            return
        if not yes and not typer.confirm(f"Delete {len(doomed)} file(s) for good?", default=False):
            console.print("nothing deleted")
            raise typer.Exit(1)
        gone = empty(conn, cutoff, now=now)
    if json_out:
        print_json([t.to_json() for t in gone])
        return
    console.print(f"deleted {len(gone)} file(s) for good")
