"""``kms conflicts``: the notes two machines changed apart (a sync tool's conflict copy, a git merge that did
not go clean), each with its diff, and ``kms conflicts resolve``. Thin over ``server.writes.conflict_resolve``."""

from __future__ import annotations

import os
import shlex
import subprocess
from typing import Annotated

import typer

from kmscli.output import JsonOpt, VaultOpt, cli_errors, console, open_db, print_json
from server.errors import KmsError
from server.humanize import stamp
from server.vault.registry import get_vault
from server.writes.conflict_resolve import listing, resolve_conflict, view

conflicts_app = typer.Typer(
    help="Notes with two versions (a sync tool's conflict copy, a git merge): list them with their diff, resolve.",
    invoke_without_command=True,
)


@conflicts_app.callback()
def conflicts_list(
    ctx: typer.Context,
    vault: VaultOpt = None,
    no_diff: Annotated[bool, typer.Option("--no-diff", help="Only the list, without each diff.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """The open conflicts, oldest first, each with the diff from the note (mine) to the other side (theirs).
    Conflict copies are never indexed as notes; agents may not write to a note while it has one."""
    if ctx.invoked_subcommand is not None:
        return

    with cli_errors():
        items = listing(open_db(), vault, diffs=not no_diff)
    if json_out:
        print_json(items)
        return
    if not items:
        console.print("No open conflicts.")
        return
    for c in items:
        other = c["copyPath"] or "(the other side of a git merge)"
        console.print(
            f"#{c['id']} {c['vault']}:{c['path']} — {c['source']}, since {stamp(c['openedAt'])}; theirs: {other}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        if c.get("diff"):
            console.print(c["diff"], markup=False, highlight=False, soft_wrap=True, end="")
    console.print("Resolve one: kms conflicts resolve ID --keep mine|theirs|both (or --edit)", markup=False)


@conflicts_app.command("resolve")
def conflicts_resolve(
    conflict_id: Annotated[int, typer.Argument(help="The conflict's number (kms conflicts).", metavar="ID")],
    keep: Annotated[
        str | None,
        typer.Option(
            "--keep",
            help="mine: the note as it is (the copy goes to .trash/); theirs: the other side replaces it "
            "(revertible with kms revert); both: the other side becomes a note of its own.",
        ),
    ] = None,
    edit: Annotated[
        bool, typer.Option("--edit", help="Open the note in $EDITOR first; then keep mine (what you saved).")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Resolve a conflict: keep mine, keep theirs, keep both, or edit the note and keep that."""

    with cli_errors():
        if (keep is None) == (not edit):
            raise KmsError("invalid-input", "say what to keep: --keep mine|theirs|both, or --edit")
        conn = open_db()
        if edit:
            item = view(conn, conflict_id)
            editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
            path = get_vault(conn, item["vault"]).root / item["path"]
            if subprocess.run([*shlex.split(editor), str(path)], check=False).returncode != 0:
                raise KmsError("invalid-input", f"{editor} did not exit cleanly; the conflict stays open")
            keep = "mine"
        done = resolve_conflict(conn, conflict_id, keep or "mine")
    if json_out:
        print_json(done)
        return
    said = {"mine": "kept the note as it is", "theirs": "the note is the other side now", "both": "kept both"}
    console.print(f"conflict #{conflict_id} ({done['vault']}:{done['path']}): {said[done['kept']]}", markup=False)
    if done.get("newPath"):
        console.print(f"  the other side is the note {done['newPath']}", markup=False, highlight=False)
    if done.get("trashed"):
        console.print(f"  the copy is in {done['trashed']} (kms trash list)", markup=False, highlight=False)
