"""``kms history NOTE|prune|forget``, ``kms diff`` and ``kms restore``: every version kms kept of a note."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from kmscli.output import (
    JsonOpt,
    KmsGroup,
    Table,
    cli_errors,
    console,
    open_db,
    print_json,
    print_verbatim,
    report_error,
)
from server.activity.note_history import diff, find_line, versions
from server.config.settings import load_settings
from server.errors import KmsError
from server.humanize import ago
from server.index.note_versions import forget, prune
from server.store.db import write_tx
from server.vault.git import note_commits
from server.vault.registry import get_vault
from server.writes.undo.restore import current_bytes, default_version, parse_when, preview_restore, restore


class _NoteOrCommand(KmsGroup):
    """``kms history NOTE`` shows a note's versions; ``prune`` and ``forget`` are commands of their own."""

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            args = ["show", *args]
        return super().resolve_command(ctx, args)


history_app = typer.Typer(
    cls=_NoteOrCommand,
    help="Every version kms kept of a note: `kms history NOTE` (`kms history show NOTE` for a note named like a"
    " command: prune, forget, show), `kms history prune`, `kms history forget NOTE`.",
    no_args_is_help=True,
)

NoteArg = Annotated[str, typer.Argument(help="The note: its id, path (also a deleted note's old path) or name.")]
VaultName = Annotated[str | None, typer.Option("--vault", help="The vault, when several have such a note.")]
AtOpt = Annotated[str | None, typer.Option("--at", help="The version the note had then: 2h (ago), 2026-12-01T14:30.")]
VersionOpt = Annotated[int | None, typer.Option("--version", help="Version number (`kms history NOTE`).")]


def _who(who: dict[str, Any]) -> str:
    if who["by"] == "agent":
        call = f" #{who['invocationId']}" if who.get("invocationId") else ""
        return f"agent {who['how']}{call} (session {who['sessionId']})"
    if who["by"] == "person":
        return f"you: {who['how']} #{who['invocationId']}"
    return "outside kms"


@history_app.command("show")
def history_show(
    note: NoteArg,
    vault: VaultName = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many versions, newest first.")] = 50,
    json_out: JsonOpt = False,
) -> None:
    """A note's versions, newest first: when, who, how, size change (what `kms history NOTE` runs)."""

    with cli_errors():
        conn = open_db()
        line = find_line(conn, note, vault)
        rows = versions(conn, line, limit=limit)
        commits = note_commits(get_vault(conn, line.vault), line.path, limit)
    if json_out:
        print_json(
            {
                "noteId": line.note_id,
                "vault": line.vault,
                "path": line.path,
                "deleted": line.rid is None,
                "versions": rows,
                **({"commits": commits} if commits is not None else {}),
            }
        )
        return
    gone = " [red](deleted)[/]" if line.rid is None else ""
    console.print(f"{escape(line.vault + ':' + line.path)} ({line.note_id}){gone}", highlight=False)
    table = Table("#", "when", "who", "seen by", "size", "change", "path")
    now = time.time()
    for v in rows:
        change = "" if v["how"] in ("deleted", "moved") else f"{v['sizeChange']:+d}"
        table.add_row(
            str(v["version"]), ago(v["at"], now, "?"), _who(v["who"]), v["how"], str(v["size"]), change, v["path"]
        )
    console.print(table)
    if commits:  # git mode: the note's commits, this machine's and every other's
        log = Table("commit", "when", "author", "session", "subject")
        for c in commits:
            log.add_row(str(c["commit"])[:10], ago(c["at"], now, "?"), c["author"], c["session"] or "", c["subject"])
        console.print("git commits (every machine's):", highlight=False)
        console.print(log)


@history_app.command("prune")
def history_prune(json_out: JsonOpt = False) -> None:
    """Apply the retention settings now (history.keep_all_days, history.keep_daily_days, history.max_mb)."""

    with cli_errors():
        conn = open_db()
        settings = load_settings()
        with write_tx(conn):
            report = prune(
                conn,
                keep_all_days=settings.get("history.keep_all_days"),
                keep_daily_days=settings.get("history.keep_daily_days"),
                max_bytes=settings.get("history.max_mb") * 1024 * 1024,
            )
    if json_out:
        print_json(report.__dict__)
        return
    console.print(
        f"dropped {report.versions} version(s), {report.notes} note(s) with none left; "
        f"{report.freed} bytes freed, {report.stored} bytes kept",
        highlight=False,
    )


@history_app.command("forget")
def history_forget(
    note: NoteArg,
    vault: VaultName = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Forget without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Purge every version kms kept of a note (for privacy); the note itself is not touched."""

    with cli_errors():
        conn = open_db()
        line = find_line(conn, note, vault)
        count = len(versions(conn, line))
        if not yes and not typer.confirm(f"Forget all {count} version(s) of {line.vault}:{line.path}?", default=False):
            console.print("nothing changed")
            raise typer.Exit(1)
        with write_tx(conn):
            gone = forget(conn, line.hid)
    if json_out:
        print_json({"noteId": line.note_id, "path": line.path, "forgotten": gone})
        return
    console.print(f"forgot {gone} version(s) of {line.vault}:{line.path}", markup=False, highlight=False)


def diff_cmd(
    note: NoteArg,
    at: AtOpt = None,
    version: VersionOpt = None,
    to: Annotated[
        str | None, typer.Option("--to", help="Compare with this version number or time (default: the file now).")
    ] = None,
    vault: VaultName = None,
    json_out: JsonOpt = False,
) -> None:
    """What changed between a version kms kept and the note now (or another version: --to); a deleted
    note shows its whole text removed and how to bring it back."""

    with cli_errors():
        conn = open_db()
        now = time.time()
        line = find_line(conn, note, vault)
        when = parse_when(at, now) if at else None
        to_number = int(to) if to and to.isdigit() else None
        to_at = parse_when(to, now) if to and to_number is None else None
        current = current_bytes(conn, line) if to is None else None
        if version is None and when is None:  # no version named: the newest one unlike the note now
            version = default_version(conn, line, current)
        out = diff(
            conn, line, number=version, at=when, to_number=to_number, to_at=to_at, current=current, to_now=to is None
        )
    if json_out:
        print_json(out)
        return
    print_verbatim(out["diff"] or "(no difference)", end="" if out["diff"] else "\n")
    if out["deleted"]:
        back = f"kms restore {line.path} --version {out['from']['version']}"
        console.print(f"(the note is deleted; `{back}` brings it back)", markup=False, highlight=False)


def restore_cmd(
    note: NoteArg,
    at: AtOpt = None,
    version: VersionOpt = None,
    vault: VaultName = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Restore without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Bring a note (also a deleted one) back to a version kms kept, after showing the change; recorded
    as yours and revertible (`kms revert`)."""

    if at is None and version is None:
        raise report_error(KmsError("invalid-input", "give --at TIME or --version N (`kms history NOTE` lists them)"))
    with cli_errors():
        conn = open_db()
        when = parse_when(at, time.time()) if at else None
        plan = preview_restore(conn, note, number=version, at=when, vault=vault)
        if plan["same"]:
            if json_out:
                print_json({**plan, "changed": False})
            else:
                said = f"{plan['vault']}:{plan['path']} already is version {plan['version']}"
                console.print(said, markup=False, highlight=False)
            return
        if not json_out:
            what = "bring back" if not plan["exists"] else "restore"
            console.print(
                f"{what} {plan['vault']}:{plan['path']} to version {plan['version']}:", markup=False, highlight=False
            )
            print_verbatim(plan["diff"])
        if not yes and not typer.confirm("Restore it?", default=False):
            console.print("nothing changed")
            raise typer.Exit(1)
        done = restore(conn, note, number=plan["version"], expect=plan["expect"], vault=vault)
    if json_out:
        print_json(done)
        return
    console.print(
        f"[green]restored[/] {done['vault']}:{done['path']} to version {done['restoredVersion']} "
        f"(recorded as #{done['invocationId']}; `kms revert {done['invocationId']}` takes it back)",
        highlight=False,
    )
