"""Reading the index from the shell: ``kms search``, ``show``, ``tags``, ``recent``, ``backlinks``,
``hide``/``unhide`` and ``kms log`` (agent write calls)."""

from __future__ import annotations

from typing import Annotated

import apsw
import typer
from rich.markup import escape

from kmscli.hidden_view import HiddenView, IncludeHiddenOpt, mark
from kmscli.output import (
    JsonOpt,
    LimitOpt,
    Table,
    VaultOpt,
    cli_errors,
    console,
    err_console,
    open_db,
    print_json,
    vault_id,
)
from server.activity.provenance import STATUS_MARKS, list_invocations, search_invocations
from server.config.settings import load_settings
from server.errors import KmsError
from server.humanize import stamp
from server.index import listing
from server.index.notes import resolve_note, set_hidden
from server.index.orientation import unresolved
from server.index.privacy import hidden_notes
from server.index.properties import parse_filters, passing_ids, properties_in_use
from server.index.search import search
from server.vault.registry import get_vault


def search_cmd(
    query: Annotated[str, typer.Argument(help='Words, or FTS5 syntax ("phrase", prefix*, AND/OR/NOT).')],
    limit: LimitOpt = 10,
    vault: VaultOpt = None,
    where: Annotated[
        list[str] | None,
        typer.Option(
            "--where", "-w", help="Property filter, repeatable: status:evergreen, due<2026-12-31 (docs/properties.md)."
        ),
    ] = None,
    semantic: Annotated[bool, typer.Option("--semantic", help="Hybrid keyword + embedding search.")] = False,
    provenance: Annotated[bool, typer.Option("--provenance", help="Only agent write records.")] = False,
    include_hidden: IncludeHiddenOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Search notes (BM25 ranked, highlighted) and agent write records; hidden notes only with
    --include-hidden (keyword search)."""

    with cli_errors():
        filters = parse_filters(where)
        conn = open_db()
        vid = vault_id(conn, vault)
        hidden = HiddenView(conn, include_hidden)
        result: dict = {"hits": [], "provenance": []}
        if not provenance:
            if semantic:
                result = _semantic(conn, query, 50 if filters else limit, vid)
                passing = passing_ids(conn, [h["noteId"] for h in result["hits"]], filters) if filters else None
                result["hits"] = [h for h in result["hits"] if passing is None or h["noteId"] in passing][:limit]
            else:
                result = search(conn, query, limit, vid, include_hidden=include_hidden, where=filters)
            result["hits"] = hidden.shown(result["hits"])
        result["provenance"] = hidden.shown(_provenance_hits(conn, query, limit, vault), id_key="note_id")
    if json_out:
        print_json(result)
        return
    apart = result.get("allWords") if result.get("relaxed") else None
    for i, h in enumerate(result.get("hits", [])):
        if i == apart:  # two queries' scores are not comparable: each part is in its own order
            console.print("[dim]── notes with only some of the words (ranked apart) ──[/]")
        tag = f" [dim]{h.get('matchType')}[/]" if h.get("matchType") else ""
        console.print(
            f"[bold cyan]{escape(h['title'])}[/] [dim]{escape(h['vault'] + ':' + h['path'])} · {h['noteId']} · "
            f"{h['score']:.3f}{mark(h)}[/]{tag}",
            highlight=False,
        )
        console.print("  " + _highlight(h["excerpt"]), highlight=False)
    for p in result.get("provenance", []):
        console.print(
            f"[bold magenta]write #{p['id']}[/] {escape(p['tool'])} {escape(p['status'])} "
            f"[dim]{escape(p.get('path') or '')} · session {escape(p['session_id'])} · {stamp(p['at'])}{mark(p)}[/]",
            highlight=False,
        )
    if result.get("relaxed") and result.get("note"):
        console.print(f"[dim]{escape(result['note'])}[/]", highlight=False)
    if result.get("mode") == "keyword-only":  # a notice, not a result: stdout stays the results alone
        err_console.print(
            f"[yellow]semantic search unavailable ({escape(str(result.get('reason')))}); keyword results shown[/]"
        )
    if not result.get("hits") and not result.get("provenance"):
        console.print("No matches.")


def _highlight(excerpt: str, width: int = 300) -> str:
    """Rich markup for an excerpt: the matched words (between ``**`` markers) in bold yellow."""
    parts = " ".join(excerpt.split())[:width].split("**")
    return "".join(escape(p) if i % 2 == 0 else f"[bold yellow]{escape(p)}[/]" for i, p in enumerate(parts) if p)


def _semantic(conn: apsw.Connection, query: str, limit: int, vault_id: int | None) -> dict:
    # deferred: the embedding stack (numpy, onnxruntime) only for kms search --semantic
    from server.index.embed import Embedder
    from server.index.semantic import SemanticIndex, semantic_search

    settings = load_settings()
    embedder = Embedder(settings.get("embed.model_dir") or None, enabled=settings.get("embed.enabled"))
    embedder.load()
    return semantic_search(conn, SemanticIndex(embedder), query, limit, vault_id)


def _provenance_hits(conn: apsw.Connection, query: str, limit: int, vault: str | None) -> list[dict]:

    try:
        return search_invocations(conn, query, limit, vault)
    except KmsError:
        return []


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(part.title() for part in rest)


def unresolved_cmd(limit: LimitOpt = 20, vault: VaultOpt = None, json_out: JsonOpt = False) -> None:
    """Link names no note answers (what to create or fix), most linked first, with one note that links each."""

    with cli_errors():
        conn = open_db()
        found, total = unresolved(conn, vault_id(conn, vault), limit)
        titles = {
            str(r[0]): str(r[1])
            for r in conn.execute(
                f"SELECT id, title FROM notes WHERE id IN ({','.join('?' * len(found))})",
                tuple(f["fromNoteId"] for f in found),
            )
        }
    if json_out:
        print_json({"unresolved": found, "links": total})
        return
    if not found:
        console.print("Every link resolves.")
        return
    table = Table("name", "links", "linked from")
    for f in found:
        table.add_row(f"[[{f['target']}]]", str(f["links"]), titles.get(f["fromNoteId"], f["fromNoteId"]))
    console.print(table)
    console.print(f"[dim]{total} unresolved link(s) in all[/]", highlight=False)


NoteArg = Annotated[str, typer.Argument(help="The note: its id, title, path or vault:path.")]


def show_cmd(note: NoteArg, json_out: JsonOpt = False) -> None:
    """Show one note (id, title or path)."""

    with cli_errors():
        n = resolve_note(open_db(), note, include_hidden=True)
    n.pop("rid", None)
    if json_out:  # the same key style as every other --json (and the MCP tools)
        print_json({("noteId" if k == "id" else _camel(k)): v for k, v in n.items()})
        return
    console.print(
        f"[bold]{escape(n['title'])}[/] [dim]{escape(n['vault'] + ':' + n['path'])} · {n['id']}"
        f"{' · HIDDEN' if n['hidden_at'] else ''}[/]",
        highlight=False,
    )
    if n["tags"]:
        console.print("tags: " + ", ".join("#" + t for t in n["tags"]), markup=False, highlight=False)
    if n["parent"]:
        console.print(f"parent: {n['parent']['title']} ({n['parent']['path']})", markup=False, highlight=False)
    if n["fm_error"]:
        console.print(f"[yellow]frontmatter flagged: {escape(n['fm_error'])}[/]")
    if n["summary_state"] != "none":
        console.print(f"[dim]summary ({n['summary_state']}): {escape(n['summary_text'] or '')}[/]")
    console.print(n["body"], markup=False, highlight=False)


def tags_cmd(
    limit: Annotated[
        int | None, typer.Option("--limit", "-n", min=1, help="At most this many (the most used).")
    ] = None,
    vault: VaultOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Tags with their note counts, most used first."""
    with cli_errors():
        conn = open_db()
        data = listing.list_tags(conn, vault_id(conn, vault), limit)["tags"]
    if json_out:
        print_json(data)
        return
    if not data:
        console.print("No tags yet (on the notes an agent can see).")
        return
    table = Table("tag", "notes")
    for t in data:
        table.add_row("#" + t["tag"], str(t["count"]))
    console.print(table)


def properties_cmd(vault: VaultOpt = None, json_out: JsonOpt = False) -> None:
    """Properties the notes carry, with their most common values (for search --where)."""

    with cli_errors():
        conn = open_db()
        data = properties_in_use(conn, vault_id(conn, vault))
    if json_out:
        print_json(data)
        return
    table = Table("property", "notes", "common values")
    for p in data:
        table.add_row(p["key"], str(p["notes"]), ", ".join(f"{v['value']} ({v['notes']})" for v in p["values"]))
    console.print(table)


def recent_cmd(limit: LimitOpt = 10, vault: VaultOpt = None, json_out: JsonOpt = False) -> None:
    """Most recently changed notes."""
    with cli_errors():
        conn = open_db()
        data = listing.list_recent(conn, limit, vault_id(conn, vault))
    if json_out:
        print_json(data)
        return
    table = Table("updated", "title", "path", "id")
    for n in data:
        table.add_row(stamp(n["updatedAt"]), n["title"], f"{n['vault']}:{n['path']}", n["noteId"])
    console.print(table)


def backlinks_cmd(note: NoteArg, limit: LimitOpt = 25, json_out: JsonOpt = False) -> None:
    """Notes that link to NOTE."""

    with cli_errors():
        conn = open_db()
        target = resolve_note(conn, note)
        data = listing.backlinks(conn, target["id"], limit)
    if json_out:
        print_json(data)
        return
    for b in data:
        console.print(f"[bold cyan]{escape(b['title'])}[/] [dim]{escape(b['path'])}[/]", highlight=False)
        console.print("  " + b["snippet"], markup=False, highlight=False)
    if not data:
        console.print(f"Nothing links to {target['title']}.", markup=False, highlight=False)


def hide_cmd(note: NoteArg) -> None:
    """Hide a note from every agent-facing listing and search."""

    with cli_errors():
        n = set_hidden(open_db(), note, True)
    console.print(f"{'Hidden' if n['changed'] else 'Already hidden'}: {n['title']} ({n['path']})", markup=False)


def unhide_cmd(note: NoteArg) -> None:
    """Make a hidden note visible to agents again."""

    with cli_errors():
        n = set_hidden(open_db(), note, False)
    if n["hidden_rule"]:
        console.print(
            f"Still hidden: {n['title']} ({n['path']}) by the rule {n['hidden_rule']} "
            "(`kms hidden --why` lists the rules; docs/settings.md: privacy.*)",
            markup=False,
        )
    elif n["changed"]:
        console.print(f"Visible again: {n['title']} ({n['path']})", markup=False)
    else:
        console.print(f"Already visible (it was not hidden): {n['title']} ({n['path']})", markup=False)


def hidden_cmd(
    why: Annotated[bool, typer.Option("--why", help="Say which rule (or `kms hide`) hides each note.")] = False,
    vault: VaultOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """List the notes agents never see (privacy rules and `kms hide`)."""

    with cli_errors():
        conn = open_db()
        found = hidden_notes(conn, get_vault(conn, vault).id if vault else None)
    if json_out:
        print_json(found)
        return
    for n in found:
        console.print(
            f"{n['vault']}:{n['path']}" + (f"  ({'; '.join(n['why'])})" if why else ""), markup=False, highlight=False
        )
    if not found:
        console.print("No note is hidden from agents.")


def log_cmd(
    session: Annotated[str | None, typer.Option("--session", help="Only this session id.")] = None,
    limit: LimitOpt = 50,
    include_hidden: IncludeHiddenOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Agent write calls (provenance), newest first; the calls on hidden notes only with --include-hidden."""

    with cli_errors():
        conn = open_db()
        data = HiddenView(conn, include_hidden).shown(
            list_invocations(conn, session=session, limit=limit), id_key="note_id"
        )
    if json_out:
        print_json(data)
        return
    for r in data:  # one line for the call, one for its note: a path never wraps at 80 columns (issue 32)
        symbol, word = STATUS_MARKS.get(r["status"], ("?", r["status"]))
        kind = r.get("error") or ""
        console.print(
            f"[bold]#{r['id']}[/] {stamp(r['at'])}  {escape(r['session_id'])}  {escape(r['tool'])}  "
            + ("[green]" if r["status"] == "success" else "[red]")
            + escape(f"{symbol} {word}" + (f" ({kind})" if kind and kind != word else ""))
            + "[/]"
            + (f"  +{r['lines_added']}" if r["lines_added"] else ""),
            highlight=False,
        )
        if r.get("path") or mark(r):
            console.print(f"    {escape((r.get('path') or '') + mark(r))}", highlight=False, soft_wrap=True)
    if not data and session is not None:
        console.print(
            f"No agent writes recorded for session {session!r}. `kms log` lists every session's; "
            "`kms tui` shows the sessions.",
            highlight=False,
        )
    elif not data:
        console.print("No agent writes recorded yet.")
