"""``kms repair``: move a damaged database aside and rebuild it from the vaults (server/index/repair.py)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from kmscli.output import JsonOpt, cli_errors, console, err_console, print_json
from server.index.repair import needs_repair, repair_database
from server.store.db import default_db_path


def repair_cmd(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the database looks healthy.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Move the file aside without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Rebuild a damaged database from your vaults, keeping every row still readable in it and filling in
    from the newest backup what it lost. Only a file that is (or was) a kms database is moved aside, and
    only once you agree (or with --yes)."""

    db = default_db_path()
    with cli_errors():
        damage = needs_repair(db, force=force)
    if damage is not None and not yes:
        err_console.print(f"[bold]{escape(damage)}[/]", highlight=False, soft_wrap=True)
        if not typer.confirm(
            f"Move {db} aside (kept beside it as {db.name}.damaged-<time>) and rebuild it from your vaults?",
            default=False,
            err=True,
        ):
            err_console.print(f"nothing changed: {db} is left as it is", markup=False, highlight=False)
            raise typer.Exit(1)
    with cli_errors():
        report = repair_database(db, force=force)
    if json_out:
        print_json(report.to_json())
        return
    if report.moved_to is None:
        console.print(
            f"the database is healthy, nothing to repair ({report.db_path}); --force rebuilds it anyway",
            markup=False,
            highlight=False,
        )
        return
    console.print(f"[bold]damage[/]: {escape(str(report.damage))}", highlight=False, soft_wrap=True)
    console.print(
        f"moved aside to {report.moved_to} (kept; delete it once you are satisfied)", markup=False, highlight=False
    )
    if report.header_rebuilt:
        console.print("the file's header was garbage: its pages were read with a guessed page size", highlight=False)
    console.print(
        f"rebuilt {report.db_path}: {len(report.vaults)} vault(s) "
        f"({', '.join(report.vaults) or 'none'}), {report.notes_indexed} notes indexed from the files",
        markup=False,
        highlight=False,
    )
    for table, count in report.recovered.items():
        lost = report.unreadable.get(table)
        console.print(f"  recovered {count} {table}" + (f" [yellow]— {lost}[/]" if lost else ""), highlight=False)
    console.print(f"  restored {report.hidden_restored} hidden stamp(s)", highlight=False)
    if report.backup:
        filled = ", ".join(f"{n} {t}" for t, n in report.from_backup.items()) or "nothing the damaged file lacked"
        console.print(f"  from the backup {report.backup}: {filled}", markup=False, highlight=False, soft_wrap=True)
    else:
        console.print("  no backup to fill in from (backup.enabled keeps daily copies)", highlight=False)
    for table, why in report.unreadable.items():
        if table not in report.recovered:
            console.print(f"  [yellow]lost[/] {table}: {escape(str(why))}", highlight=False)
    for error in report.errors:
        console.print(f"  [red]![/] {escape(str(error))}", highlight=False, soft_wrap=True)
    if not report.vaults:
        console.print("no vault could be read back: register them again with `kms vault add PATH`", highlight=False)
    if report.recovered.get("embeddings"):
        console.print("run `kms embed` to rebuild the semantic index (stored vectors are reused)", highlight=False)
