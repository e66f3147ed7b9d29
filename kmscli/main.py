"""The ``kms`` command: every command is a thin adapter over ``server``."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from kmscli.config_cmd import config_app
from kmscli.launcher import CLAUDE_CONTEXT_SETTINGS, claude_command, doctor_command, mcp_config_command
from kmscli.output import cli_errors, console, open_db, print_json
from kmscli.servers_cmd import servers_app
from server.errors import KmsError
from server.humanize import stamp
from server.index import listing
from server.store.db import default_db_path

app = typer.Typer(
    name="kms",
    help="Safe, fast, observable access to your Markdown notes for AI coding agents.",
    no_args_is_help=True,
    rich_markup_mode="rich",
)
vault_app = typer.Typer(help="Register, list and forget vaults (folders of Markdown notes).", no_args_is_help=True)
app.add_typer(vault_app, name="vault")

JsonOpt = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]
VaultOpt = Annotated[str | None, typer.Option("--vault", help="Only this vault (name).")]
LimitOpt = Annotated[int, typer.Option("--limit", "-n", min=1, max=500, help="How many to show.")]


def _vault_id(conn, name: str | None) -> int | None:
    if name is None:
        return None
    from server.vault.registry import get_vault

    return get_vault(conn, name).id


@vault_app.command("add")
def vault_add(
    path: Annotated[Path, typer.Argument(help="Folder of Markdown notes.")],
    name: Annotated[str | None, typer.Option("--name", help="Name (default: folder name).")] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Register only; index later.")] = False,
) -> None:
    """Register a vault (and index it)."""
    from server.vault.registry import add_vault

    with cli_errors():
        conn = open_db()
        vault = add_vault(conn, path, name)
        console.print(f"Added vault [bold]{vault.name}[/] at {vault.root}")
        if not no_index:
            _run_index(conn, full=False, vault=vault.name, embed=False)


@vault_app.command("list")
def vault_list(json_out: JsonOpt = False) -> None:
    """List registered vaults."""
    from server.index.overview import overview

    with cli_errors():
        vaults = overview(open_db()).vaults
    if json_out:
        print_json([v.to_json() for v in vaults])
        return
    table = Table("name", "root", "notes", "hidden", "last indexed")
    for v in vaults:
        table.add_row(v.name, v.root, str(v.notes), str(v.hidden), stamp(v.last_indexed_at))
    console.print(table if vaults else "No vaults yet: [bold]kms vault add PATH[/]")


@vault_app.command("remove")
def vault_remove(name: str) -> None:
    """Forget a vault: its index rows go, its files are never touched."""
    from server.index.indexer import remove_vault

    with cli_errors():
        vault = remove_vault(open_db(), name)
    console.print(f"Forgot vault [bold]{vault.name}[/] ({vault.root} untouched)")


def _run_index(conn, *, full: bool, vault: str | None, embed: bool) -> list:
    from server.index.indexer import index_all

    if vault is not None:
        _vault_id(conn, vault)
    with Progress(TextColumn("[bold]indexing"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("index", total=None)

        def progress(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        reports = index_all(conn, full=full, vault=vault, progress=progress)
    for r in reports:
        console.print(
            f"[bold]{r.vault}[/]: {r.scanned} files, +{r.added} new, ~{r.updated} changed, "
            f"{r.renamed} renamed, -{r.deleted} removed, {r.unchanged} unchanged"
            + (f", [yellow]{r.flagged} flagged[/]" if r.flagged else "")
            + f" in {r.seconds:.2f}s"
        )
        for e in r.errors[:20]:
            console.print(f"  [yellow]warning[/]: {e}", highlight=False)
    if embed:
        _run_embed(conn)
    return reports


def _run_embed(conn) -> None:
    """Embed notes whose chunks have no vector yet (resumable: Ctrl-C keeps what is done)."""
    from server.config.settings import load_settings
    from server.index.embed import ModelNotReady, embed_pending, pending_count, prune_embeddings

    model_dir = load_settings().get("embed.model_dir") or None
    total = pending_count(conn)
    with Progress(TextColumn("[bold]embedding notes"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console, transient=True, disable=not console.is_terminal) as bar:
        task = bar.add_task("embed", total=total)

        def progress(report) -> None:
            bar.update(task, completed=report.notes + report.skipped)

        try:
            report = embed_pending(conn, model_dir=model_dir, progress=progress)
        except ModelNotReady as exc:
            raise KmsError("no-index", f"the embedding model is not ready ({exc}); see `kms model status`") from None
        except KeyboardInterrupt:
            console.print("[yellow]stopped; run `kms embed` again to resume[/]")
            return
    if not report.stopped and not report.pending:
        prune_embeddings(conn)
    console.print(f"embedded {report.embedded} chunks ({report.reused} reused) of {report.notes} notes "
                  f"in {report.seconds:.1f}s" + (f"; {report.pending} notes pending" if report.pending else ""))


@app.command("index")
def index_cmd(
    full: Annotated[bool, typer.Option("--full", help="Re-parse every file (ids and hidden stamps kept).")] = False,
    vault: VaultOpt = None,
    embed: Annotated[bool, typer.Option("--embed", help="Also compute embeddings for semantic search.")] = False,
) -> None:
    """Bring the index up to date with the files (incremental unless --full)."""
    from server.vault.registry import list_vaults

    with cli_errors():
        conn = open_db()
        if not list_vaults(conn):
            raise KmsError("no-index", "no vault is registered: run `kms vault add PATH`")
        _run_index(conn, full=full, vault=vault, embed=embed)


@app.command("status")
def status_cmd(json_out: JsonOpt = False) -> None:
    """Database, vaults and index health at a glance."""
    with cli_errors():
        data = listing.status(open_db(), str(default_db_path()))
    if json_out:
        print_json(data)
        return
    console.print(f"[bold]database[/] {data['dbPath']} ({data['dbBytes'] / 1e6:.1f} MB)")
    for v in data["vaults"]:
        console.print(f"[bold]vault[/] {v['name']}: {v['root']} — {v['notes']} notes"
                      f" ({v['hidden']} hidden), indexed {stamp(v['lastIndexedAt'])}")
    if not data["vaults"]:
        console.print("No vaults yet: [bold]kms vault add PATH[/]")
    console.print(f"notes {data['notes']} · tags {data['tags']} · links {data['links']}"
                  f" ({data['unresolvedLinks']} unresolved) · flagged {data['flaggedCount']}")
    for f in data["flagged"]:
        console.print(f"  [yellow]flagged[/] {f['path']}: {f['reason']}", highlight=False)


@app.command("search")
def search_cmd(
    query: Annotated[str, typer.Argument(help="Words, or FTS5 syntax (\"phrase\", prefix*, AND/OR/NOT).")],
    limit: LimitOpt = 10,
    vault: VaultOpt = None,
    semantic: Annotated[bool, typer.Option("--semantic", help="Hybrid keyword + embedding search.")] = False,
    provenance: Annotated[bool, typer.Option("--provenance", help="Only agent write records.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Search notes (BM25 ranked, highlighted) and agent write records."""
    from server.index.search import search

    with cli_errors():
        conn = open_db()
        vid = _vault_id(conn, vault)
        result: dict = {"hits": [], "provenance": []}
        if not provenance:
            if semantic:
                result = _semantic(conn, query, limit, vid)
            else:
                result = search(conn, query, limit, vid)
        result["provenance"] = _provenance_hits(conn, query, limit)
    if json_out:
        print_json(result)
        return
    for h in result.get("hits", []):
        tag = f" [dim]{h.get('matchType')}[/]" if h.get("matchType") else ""
        console.print(f"[bold cyan]{h['title']}[/] [dim]{h['vault']}:{h['path']} · {h['noteId']} · "
                      f"{h['score']:.3f}[/]{tag}", highlight=False)
        console.print("  " + _highlight(h["excerpt"]), highlight=False)
    for p in result.get("provenance", []):
        console.print(f"[bold magenta]write #{p['id']}[/] {p['tool']} {p['status']} [dim]{p.get('path') or ''} · "
                      f"session {p['session_id']} · {stamp(p['at'])}[/]", highlight=False)
    if result.get("relaxed"):
        console.print(f"[dim]{result.get('note')}[/]")
    if result.get("mode") == "keyword-only":
        console.print(f"[yellow]semantic search unavailable ({result.get('reason')}); keyword results shown[/]")
    if not result.get("hits") and not result.get("provenance"):
        console.print("No matches.")


def _highlight(excerpt: str, width: int = 300) -> str:
    """Rich markup for an excerpt: the matched words (between ``**`` markers) in bold yellow."""
    from rich.markup import escape

    parts = " ".join(excerpt.split())[:width].split("**")
    return "".join(escape(p) if i % 2 == 0 else f"[bold yellow]{escape(p)}[/]" for i, p in enumerate(parts) if p)


def _semantic(conn, query: str, limit: int, vault_id: int | None) -> dict:
    from server.config.settings import load_settings
    from server.index.embed import Embedder
    from server.index.semantic import SemanticIndex, semantic_search

    settings = load_settings()
    embedder = Embedder(settings.get("embed.model_dir") or None, enabled=settings.get("embed.enabled"))
    embedder.load()
    return semantic_search(conn, SemanticIndex(embedder), query, limit, vault_id)


def _provenance_hits(conn, query: str, limit: int) -> list[dict]:
    try:
        from server.activity.provenance import search_invocations
    except ImportError:
        return []
    try:
        return search_invocations(conn, query, limit)
    except KmsError:
        return []


@app.command("show")
def show_cmd(note: str, json_out: JsonOpt = False) -> None:
    """Show one note (id, title or path)."""
    from server.index.notes import resolve_note

    with cli_errors():
        n = resolve_note(open_db(), note, include_hidden=True)
    n.pop("rid", None)
    if json_out:
        print_json(n)
        return
    console.print(f"[bold]{n['title']}[/] [dim]{n['vault']}:{n['path']} · {n['id']}"
                  f"{' · HIDDEN' if n['hidden_at'] else ''}[/]", highlight=False)
    if n["tags"]:
        console.print("tags: " + ", ".join("#" + t for t in n["tags"]))
    if n["fm_error"]:
        console.print(f"[yellow]frontmatter flagged: {n['fm_error']}[/]")
    if n["summary_state"] != "none":
        console.print(f"[dim]summary ({n['summary_state']}): {n['summary_text']}[/]")
    console.print(n["body"], markup=False, highlight=False)


@app.command("tags")
def tags_cmd(vault: VaultOpt = None, json_out: JsonOpt = False) -> None:
    """Tags with their note counts."""
    with cli_errors():
        conn = open_db()
        data = listing.list_tags(conn, _vault_id(conn, vault))
    if json_out:
        print_json(data)
        return
    table = Table("tag", "notes")
    for t in data:
        table.add_row("#" + t["tag"], str(t["count"]))
    console.print(table)


@app.command("recent")
def recent_cmd(limit: LimitOpt = 10, vault: VaultOpt = None, json_out: JsonOpt = False) -> None:
    """Most recently changed notes."""
    with cli_errors():
        conn = open_db()
        data = listing.list_recent(conn, limit, _vault_id(conn, vault))
    if json_out:
        print_json(data)
        return
    table = Table("updated", "title", "path", "id")
    for n in data:
        table.add_row(stamp(n["updatedAt"]), n["title"], f"{n['vault']}:{n['path']}", n["noteId"])
    console.print(table)


@app.command("backlinks")
def backlinks_cmd(note: str, limit: LimitOpt = 25, json_out: JsonOpt = False) -> None:
    """Notes that link to NOTE."""
    from server.index.notes import resolve_note

    with cli_errors():
        conn = open_db()
        target = resolve_note(conn, note)
        data = listing.backlinks(conn, target["id"], limit)
    if json_out:
        print_json(data)
        return
    for b in data:
        console.print(f"[bold cyan]{b['title']}[/] [dim]{b['path']}[/]", highlight=False)
        console.print("  " + b["snippet"], markup=False, highlight=False)
    if not data:
        console.print(f"Nothing links to {target['title']}.")


@app.command("hide")
def hide_cmd(note: str) -> None:
    """Hide a note from every agent-facing listing and search."""
    from server.index.notes import set_hidden

    with cli_errors():
        n = set_hidden(open_db(), note, True)
    console.print(f"Hidden: {n['title']} ({n['path']})")


@app.command("unhide")
def unhide_cmd(note: str) -> None:
    """Make a hidden note visible to agents again."""
    from server.index.notes import set_hidden

    with cli_errors():
        n = set_hidden(open_db(), note, False)
    console.print(f"Visible again: {n['title']} ({n['path']})")


@app.command("watch")
def watch_cmd(vault: VaultOpt = None) -> None:
    """Keep the index in sync while files change (Ctrl-C to stop)."""
    from server.index.watcher import watch_vaults

    with cli_errors():
        conn = open_db()
        _run_index(conn, full=False, vault=vault, embed=False)
        console.print("[dim]watching for changes (Ctrl-C to stop)[/]")

        def report(changed: int, seconds: float) -> None:
            console.print(f"[dim]{time.strftime('%H:%M:%S')}[/] re-indexed {changed} file(s) in {seconds:.2f}s")

        try:
            watch_vaults(default_db_path(), vault=vault, on_change=report)
        except KeyboardInterrupt:
            pass


@app.command("mcp")
def mcp_cmd() -> None:
    """Serve the vault to an agent over MCP (stdio). Configured by KMS_* environment variables."""
    from server.mcp.serve import main as serve

    sys.exit(serve())


app.add_typer(config_app, name="config")
app.add_typer(servers_app, name="servers")
app.command("claude", context_settings=CLAUDE_CONTEXT_SETTINGS)(claude_command)
app.command("doctor")(doctor_command)
app.command("mcp-config")(mcp_config_command)


def main() -> None:
    app(prog_name="kms")



@app.command("log")
def log_cmd(
    session: Annotated[str | None, typer.Option("--session", help="Only this session id.")] = None,
    limit: LimitOpt = 50,
    json_out: JsonOpt = False,
) -> None:
    """Agent write calls (provenance), newest first."""
    from server.activity.provenance import list_invocations

    with cli_errors():
        data = list_invocations(open_db(), session=session, limit=limit)
    if json_out:
        print_json(data)
        return
    table = Table("id", "time", "session", "tool", "status", "note", "+lines")
    for r in data:
        ok = r["status"] == "success"
        table.add_row(str(r["id"]), stamp(r["at"]), r["session_id"], r["tool"],
                      ("[green]✓ " if ok else "[red]✗ ") + r["status"] + "[/]", r.get("path") or "",
                      str(r["lines_added"]))
    console.print(table if data else "No agent writes recorded yet.")


@app.command("demo")
def demo_cmd(
    headless: Annotated[bool, typer.Option("--headless", help="Print the story as text instead of the dashboard.")]
    = False,
) -> None:
    """Zero-setup demo: a scripted agent works on a copy of the sample vault while you watch."""
    import anyio

    from kmscli.demo import prepare, run_story

    ws = prepare()
    console.print(f"[dim]demo workspace: {ws.root} (sample vault copy, private database)[/]")
    styles = {"step": "bold", "ok": "green", "denied": "yellow", "info": "cyan"}

    if headless:
        def emit(kind: str, text: str) -> None:
            console.print(f"[{styles[kind]}]{'▶ ' if kind == 'step' else ''}{text}[/]", highlight=False)

        summary = anyio.run(run_story, ws, emit)
        ok = summary["writes"] >= 3 and summary["denied"] >= 1 and summary["rate_limited"] >= 1
        raise typer.Exit(0 if ok else 1)

    import threading

    from tui.app import create_app

    dashboard = create_app(ws.db_path, settings_path=ws.config_path)
    lines: list[str] = []

    def run_agent() -> None:
        anyio.run(run_story, ws, lambda kind, text: lines.append(text), 1.0)

    threading.Thread(target=run_agent, name="kms-demo-agent", daemon=True).start()
    dashboard.run()
    for line in lines:
        console.print(line, highlight=False)


@app.command("tui")
def tui_cmd() -> None:
    """Live dashboard: agent sessions, writes (with review and revert), reads and settings."""
    from tui.app import create_app

    create_app(default_db_path()).run()


@app.command("embed")
def embed_cmd() -> None:
    """Compute embeddings for semantic search (incremental; interrupt and resume freely)."""
    with cli_errors():
        _run_embed(open_db())


model_app = typer.Typer(help="The local embedding model (all-MiniLM-L6-v2) for semantic search.", no_args_is_help=True)
app.add_typer(model_app, name="model")


@model_app.command("status")
def model_status_cmd(
    verify: Annotated[bool, typer.Option("--verify", help="Hash the model file.")] = False,
    load: Annotated[bool, typer.Option("--load", help="Load it to prove it works.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Which model is used, where it is, and whether it is ready."""
    from server.config.settings import load_settings
    from server.index.embed import embed_stats, model_status

    with cli_errors():
        data = model_status(load_settings().get("embed.model_dir") or None, verify=verify, load=load)
        data["index"] = embed_stats(open_db())
    if json_out:
        print_json(data)
        return
    ok = "[green]ready[/]" if data.get("ready") else f"[yellow]not ready[/]: {data.get('reason')}"
    console.print(f"model [bold]{data['model']}[/] ({data['dim']} dimensions): {ok}", highlight=False)
    console.print(f"dir {data.get('dir') or '-'} (source: {data.get('source') or 'none'})", highlight=False)
    idx = data["index"]
    console.print(f"embedded notes {idx['embeddedNotes']}/{idx['notes']}, {idx['chunks']} chunks, "
                  f"{idx['vectors']} vectors" + (f", {idx['pendingNotes']} pending (run `kms embed`)"
                                                 if idx["pendingNotes"] else ""))


@model_app.command("install")
def model_install_cmd(
    source: Annotated[Path, typer.Option("--from", help="A directory with model.onnx, tokenizer.json, ...")],
) -> None:
    """Copy a model directory into kms's data dir (checked first)."""
    from server.index.embed import install_model

    with cli_errors():
        dest = install_model(source)
    console.print(f"installed the model into {dest}")


@model_app.command("download")
def model_download_cmd() -> None:
    """Fetch the model from the model hub into fastembed's cache (needs the internet)."""
    from server.index.embed.model import download_model

    console.print("downloading sentence-transformers/all-MiniLM-L6-v2 (about 90 MB)...")
    try:
        path = download_model()
    except Exception as exc:  # offline, hub down: say so plainly
        console.print(f"[red]download failed[/]: {type(exc).__name__}: {exc}")
        raise typer.Exit(1) from None
    console.print(f"model ready in {path}")
