"""The index: ``kms index``, ``status``, ``watch``, ``embed`` and ``kms model``; ``run_index`` is how every
command that indexes (``kms vault add`` and ``set`` too) runs it and says what an interrupt kept."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import apsw
import typer
from rich.markup import escape

from kmscli.hidden_view import HiddenView, IncludeHiddenOpt, mark
from kmscli.output import (
    EXIT_INTERRUPTED,
    JsonOpt,
    VaultOpt,
    cli_errors,
    console,
    err_console,
    open_db,
    print_json,
    vault_id,
)
from server.activity.feed import session_overview
from server.activity.overwrites import Settled
from server.config.settings import load_settings
from server.errors import KmsError
from server.humanize import ago, clock_time, stamp
from server.index import listing
from server.index.backups import backup_if_due
from server.index.embed_pending import locate_model, pending_count  # neither loads numpy
from server.index.indexer import index_all
from server.index.watcher import watch_vaults
from server.store.db import default_db_path
from server.vault import git_state
from server.vault.registry import list_vaults
from server.vault.sync_tools import describe as describe_sync

if TYPE_CHECKING:  # imported only by the commands that run them (start-up time)
    from rich.progress import Progress

    from server.index.embed.pipeline import EmbedReport
    from server.index.indexer import IndexReport


def _progress_bar(label: str) -> Progress:
    """A transient bar on the terminal (none when the output is not one)."""
    # deferred: Rich's progress module only when there are files to read (a no-change kms index shows no bar)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(
        TextColumn(f"[bold]{label}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


class _IndexBar:
    """The indexing bar, made at the first file there is to read: a no-change run shows none and loads no
    Rich progress module."""

    def __init__(self) -> None:
        self.bar: Progress | None = None
        self.task: Any = None

    def __call__(self, done: int, total: int) -> None:
        if self.bar is None:
            if not total:
                return
            self.bar = _progress_bar("indexing")
            self.bar.start()
            self.task = self.bar.add_task("index", total=total)
        self.bar.update(self.task, completed=done, total=total)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None


def run_index(conn: apsw.Connection, *, full: bool, vault: str | None, embed: bool | None) -> list[IndexReport]:
    """Index, then embed: always with ``embed=True`` (an error without a model), never with False, and with
    None (``kms index``'s default) when notes are pending and the model is installed, so the keyword and
    the semantic index stay in step. The pending count is asked first: a no-change run loads nothing."""

    if vault is not None:
        vault_id(conn, vault)
    bar = _IndexBar()

    def searchable(report: IndexReport) -> None:  # a new vault, between its two transactions
        bar.stop()
        console.print(
            f"[bold]{escape(report.vault)}[/]: searchable after {report.searchable_seconds or 0:.2f}s "
            f"({report.added} notes); building links, tags and history"
        )

    try:
        reports = index_all(conn, full=full, vault=vault, progress=bar, on_searchable=searchable)
    except KeyboardInterrupt:
        bar.stop()
        interrupted_index(conn, vault)
    bar.stop()
    for r in reports:
        console.print(
            f"[bold]{r.vault}[/]: {r.scanned} files, +{r.added} new, ~{r.updated} changed, "
            f"{r.renamed} renamed, -{r.deleted} removed, {r.unchanged} unchanged"
            + (f", [yellow]{r.flagged} flagged[/]" if r.flagged else "")
            + (" (finished an index stopped between its two phases)" if r.completed else "")
            + (f", complete in {r.seconds:.2f}s" if r.searchable_seconds is not None else f" in {r.seconds:.2f}s")
        )
        for e in r.errors[:20]:
            console.print(f"  [yellow]warning[/]: {escape(str(e))}", highlight=False)
        if r.scanned == 0:  # an empty folder, or the wrong one: kms has nothing to serve from it
            console.print(
                f"  [yellow]warning[/]: no Markdown (.md) file in {escape(r.vault)}: is it the folder of your notes?",
                highlight=False,
            )
    if embed:
        _run_embed(conn)
    elif embed is None:
        _embed_if_ready(conn)
    return reports


def interrupted_index(conn: apsw.Connection, vault: str | None) -> None:
    """Ctrl-C while indexing: what the index kept (every committed batch) and what to run next; exit 130."""

    kept = []
    try:
        for v in list_vaults(conn):
            if vault is None or v.name == vault:
                count = next(conn.execute("SELECT count(*) FROM notes WHERE vault_id = ?", (v.id,)))[0]
                kept.append(f"vault {v.name}: {count} notes in the index")
    except (apsw.Error, KmsError):
        kept.append("the index as far as it got")
    where = f" --vault {vault}" if vault else ""
    err_console.print(
        f"[yellow]stopped; kept {'; '.join(kept) or 'nothing'} (the vault stays registered); run "
        f"`kms index{where}` to finish indexing[/]",
        highlight=False,
    )
    raise typer.Exit(EXIT_INTERRUPTED)


def _embed_if_ready(conn: apsw.Connection) -> None:

    settings = load_settings()
    if not settings.get("embed.enabled"):
        return
    pending = pending_count(conn)
    if not pending:
        return
    found = locate_model(settings.get("embed.model_dir") or None)
    if found["dir"] is None or found["missing"]:
        console.print(
            f"[dim]{pending} notes not embedded for semantic search: no model installed "
            "(`kms model download`, then `kms embed`)[/]"
        )
        return
    try:
        _run_embed(conn)
    except KmsError as exc:  # the index is done; a model that will not load is a warning here, not a failure
        err_console.print(f"[yellow]warning[/]: notes not embedded: {escape(exc.message)}", highlight=False)


def _run_embed(conn: apsw.Connection) -> None:
    """Embed notes whose chunks have no vector yet (resumable: Ctrl-C keeps what is done)."""
    # deferred: the embedding stack (numpy, onnxruntime) only for embedding commands
    from server.index.embed import ModelNotReady, embed_pending, pending_count, prune_embeddings

    model_dir = load_settings().get("embed.model_dir") or None
    try:  # Ctrl-C at any moment: what is embedded is committed; the shell's convention for Ctrl-C is 130
        total = pending_count(conn)
        with _progress_bar("embedding notes") as bar:
            task = bar.add_task("embed", total=total)

            def progress(report: EmbedReport) -> None:
                bar.update(task, completed=report.notes + report.skipped)

            try:
                report = embed_pending(conn, model_dir=model_dir, progress=progress)
            except ModelNotReady as exc:
                raise KmsError(
                    "no-index", f"the embedding model is not ready ({exc}); see `kms model status`"
                ) from None
        if not report.stopped and not report.pending:
            prune_embeddings(conn)
        console.print(
            f"embedded {report.embedded} chunks ({report.reused} reused) of {report.notes} notes "
            f"in {report.seconds:.1f}s" + (f"; {report.pending} notes pending" if report.pending else "")
        )
    except KeyboardInterrupt:
        kept = ""
        try:
            done = next(conn.execute("SELECT count(*) FROM note_embed_state"))[0]
            kept = f"kept the {done} notes embedded so far (semantic search uses them); "
        except apsw.Error:
            pass
        err_console.print(f"[yellow]stopped; {kept}run `kms embed` again to resume[/]", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED) from None


def index_cmd(
    full: Annotated[bool, typer.Option("--full", help="Re-parse every file (ids and hidden stamps kept).")] = False,
    vault: VaultOpt = None,
    embed: Annotated[
        bool | None,
        typer.Option(
            "--embed/--no-embed", help="Embed changed notes for semantic search (default: when the model is installed)."
        ),
    ] = None,
) -> None:
    """Bring the index up to date with the files (incremental unless --full)."""

    with cli_errors():
        conn = open_db()
        if not list_vaults(conn):
            raise KmsError("no-index", "no vault is registered: run `kms vault add PATH`")
        run_index(conn, full=full, vault=vault, embed=embed)

    backup_if_due(default_db_path(), foreground=True)  # the daily copy of the database, if it is due (docs/recovery.md)


def say_git(g: dict[str, Any], now: float) -> None:
    """One vault's git mode and state, and each of its problems on a line of its own (``kms status``)."""
    pushed = f", pushed {ago(g['pushedAt'], now)}" if g["mode"] == "sync" else ""
    waiting = f", {g['unpushed']} commit(s) not pushed" if g["unpushed"] else ""
    console.print(
        f"[bold]git[/] {escape(g['vault'])} ({g['mode']}): committed {ago(g['committedAt'], now)}{pushed}{waiting}",
        highlight=False,
    )
    for p in g["problems"]:
        said = " ".join(p["message"].split())[:300]
        console.print(f"  [red]git {p['what']} failed[/]: {escape(said)}", highlight=False)


def status_cmd(include_hidden: IncludeHiddenOpt = False, json_out: JsonOpt = False) -> None:
    """Database, vaults and index health at a glance, and the sessions connected now; hidden notes'
    names only with --include-hidden."""

    with cli_errors():
        conn = open_db()
        data = HiddenView(conn, include_hidden).status(listing.status(conn, str(default_db_path())))
        now = time.time()
        sessions = [s for s in session_overview(conn, now) if s.state in ("live", "idle")]
        data["git"] = git_state.summary(conn)  # a vault in git mode: its last commit, push and any failure
    data["sessions"] = [
        {
            "id": s.id,
            "kind": s.kind,
            "state": s.state,
            "startedAt": s.started_at,
            "writesThisMinute": s.gauge.minute_text,
            "writesTotal": s.gauge.total_text,
            "nextWriteAt": s.gauge.next_write_at,
            "exhausted": s.gauge.exhausted,
        }
        for s in sessions
    ]
    if json_out:
        print_json(data)
        return
    console.print(f"[bold]database[/] {escape(str(data['dbPath']))} ({data['dbBytes'] / 1e6:.1f} MB)")
    for v in data["vaults"]:
        console.print(
            f"[bold]vault[/] {v['name']} ({v['dialect'] or 'not indexed'}): {v['root']} — {v['notes']} notes"
            f" ({v['hidden']} hidden), indexed {stamp(v['lastIndexedAt'])}, kept in sync by {describe_sync(v['sync'])}"
            + ("" if v["index"] == "complete" else f"; [yellow]{v['index']}[/] (kms index completes it)")
            + (f" — [yellow]{v['conflicts']} open conflict(s): kms conflicts[/]" if v["conflicts"] else "")
        )
    for g in data["git"]:
        say_git(g, now)
    if data["hiddenBy"]:
        console.print(
            "hidden from agents by "
            + ", ".join(f"{w}: {n}" for w, n in data["hiddenBy"].items())
            + " (kms hidden --why)",
            markup=False,
            highlight=False,
        )
    if not data["vaults"]:
        console.print("No vaults yet: [bold]kms vault add PATH[/]")
    console.print(
        f"notes {data['notes']} · tags {data['tags']} · links {data['links']}"
        f" ({data['unresolvedLinks']} unresolved, {data['attachmentLinks']} to attachments,"
        f" {data['ambiguousLinks']} ambiguous) · flagged {data['flaggedCount']}"
    )
    for a in data["ambiguous"]:
        console.print(
            f"  ambiguous {a['vault']}: [[{a['name']}]] ({a['links']} links) could be " + ", ".join(a["candidates"]),
            highlight=False,
            markup=False,
        )
    for f in data["flagged"]:
        where = f"{f['vault']}:{f['path']}{mark(f)}"  # the vault too: the same path can be in two
        console.print(f"  [yellow]flagged[/] {escape(where)}: {escape(f['reason'])}", highlight=False)
    for s in data["sessions"]:
        console.print(
            f"[bold]session[/] {s['id']} ({s['kind']}, {s['state']}, started {ago(s['startedAt'], now)}):"
            f" writes {s['writesThisMinute']} this minute, {s['writesTotal']} in all",
            highlight=False,
        )


def watch_cmd(vault: VaultOpt = None) -> None:
    """Keep the index in sync while files change (Ctrl-C to stop)."""

    with cli_errors():
        conn = open_db()
        run_index(conn, full=False, vault=vault, embed=False)
        console.print("[dim]watching for changes (Ctrl-C to stop)[/]")

        def report(changed: int, seconds: float) -> None:
            now = time.time()
            console.print(f"[dim]{clock_time(now, now)}[/] re-indexed {changed} file(s) in {seconds:.2f}s")

        try:
            watch_vaults(default_db_path(), vault=vault, on_change=report, after=Settled())
        except KeyboardInterrupt:
            pass


def embed_cmd() -> None:
    """Compute embeddings for semantic search (incremental; interrupt and resume freely)."""
    with cli_errors():
        _run_embed(open_db())
