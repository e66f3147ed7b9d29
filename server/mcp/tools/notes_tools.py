"""The read tools over notes (search, read, tags, recent, backlinks, inventory): input models, handlers
(pure functions over the store) and each one's spec beside it; the read tier's order is ``read_tools``."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from server.activity import authorship
from server.errors import KmsError
from server.index import listing
from server.index.notes import find_note, get_note
from server.index.properties import parse_filters
from server.index.search import search
from server.mcp.tools.base import (
    PAYLOAD_CAP_BYTES,
    READ_ONLY,
    NoteIdField,
    ReadSpec,
    StrictInput,
    ToolContext,
    ToolOutput,
    WhereField,
)
from server.vault.markdown import split_lines
from server.writes.limits import MAX_HEADING_CHARS

VaultField = Field(default=None, min_length=1, max_length=64, description="Only this vault (name); default all.")


def note_id_of(ctx: ToolContext, ref: str) -> str:
    """The id of the visible, in-scope note ``ref`` names: the write tools' one resolver (id, title,
    path, alias, ``vault:path``); ``not-found`` with close matches otherwise."""
    return str(find_note(ctx.conn, ref, vault_id=ctx.vault_filter())["id"])


class Card(BaseModel):
    noteId: str
    title: str
    path: str
    vault: str
    tags: list[str]
    updatedAt: float


# kms_search ---------------------------------------------------------------------------------------


class SearchInput(StrictInput):
    query: str = Field(max_length=1000, description="Words to find; FTS5 syntax allowed; '' with where lists.")
    limit: int = Field(default=10, ge=1, le=50)
    vault: str | None = VaultField
    where: list[str] | None = WhereField


class SearchHit(Card):
    excerpt: str
    score: float


class SearchOutput(ToolOutput):
    query: str
    hits: list[SearchHit]
    relaxed: bool = False
    allWords: int | None = None  # noqa: N815 - relaxed: how many leading hits hold every word
    note: str | None = None


def kms_search(ctx: ToolContext, args: SearchInput) -> dict[str, Any]:
    where = parse_filters(args.where)
    if not args.query.strip() and not where:
        return {"query": args.query, "hits": [], "relaxed": False}
    ctx.require_index()
    return search(ctx.conn, args.query, args.limit, ctx.vault_filter(args.vault), where=where)


KMS_SEARCH = ReadSpec(
    built_later=True,
    name="kms_search",
    about=(
        "Full-text search (BM25) across the person's Markdown notes. Use it first to find notes about a "
        "topic by the words they contain; returns ranked hits with a highlighted excerpt and a noteId for "
        'kms_read. Plain words work; FTS5 syntax ("phrase", prefix*, AND/OR/NOT) is accepted; property '
        "values are searched too, and where filters on them (an empty query with where lists the notes that "
        "pass, newest first). If few notes contain every word it also returns notes with any word and sets "
        "relaxed=true."
    ),
    errors=("invalid-input", "not-found", "no-index"),
    input_model=SearchInput,
    output_model=SearchOutput,
    handler=kms_search,
    annotations=READ_ONLY.model_copy(update={"title": "Search notes"}),
    note_text=True,
    example={"query": "body"},
)


# kms_read -----------------------------------------------------------------------------------------

DEFAULT_READ_TOKENS = 12_000  # a page an agent host takes whole (Claude Code's MCP output limit is 25,000)
MAX_READ_TOKENS = 24_000  # the 100 KB payload cap stays the ceiling


class ReadInput(StrictInput):
    noteId: str = NoteIdField
    section: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_HEADING_CHARS,
        description="Only this heading's section ('Tasks' or '## Tasks'), e.g. the heading a kms_recall item names.",
    )
    maxTokens: int = Field(
        default=DEFAULT_READ_TOKENS,
        ge=200,
        le=MAX_READ_TOKENS,
        description="Page size in estimated tokens (about 4 bytes each); longer bodies come in pages.",
    )
    cursor: str | None = Field(default=None, max_length=300, description="nextCursor from a previous page.")


class Author(BaseModel):
    """Who made a change and how: ``by`` agent or person; ``how`` the tool (or outside kms); the agent's session."""

    by: str
    how: str
    sessionId: str | None
    at: float
    invocationId: int | None


class ReadOutput(ToolOutput):
    noteId: str
    title: str
    path: str
    vault: str
    body: str
    tags: list[str]
    frontmatter: dict[str, Any] | None
    summary: dict[str, Any] | None
    updatedAt: float
    version: str
    bodyChars: int
    offset: int
    nextCursor: str | None
    links: list[dict[str, Any]]
    unresolvedLinks: list[str]
    parent: dict[str, Any] | None = None  # a hierarchical vault's (Dendron) nearest visible ancestor
    createdBy: Author
    lastChangedBy: Author


PAGE_BUDGET = PAYLOAD_CAP_BYTES - 8_000  # room for everything but the body


def _page(body: str, start: int, budget: int) -> str:
    """The longest slice from ``start`` whose JSON encoding fits ``budget`` bytes."""
    end = min(len(body), start + budget)
    while end > start and len(json.dumps(body[start:end], ensure_ascii=False).encode()) > budget:
        end = start + (end - start) * 3 // 4
    return body[start:end]


HEADINGS_BUDGET = 20_000  # bytes of the headings outline; a note with thousands of headings gets the first ones


def _json_size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False).encode())


def is_restart_cursor(cursor: str | None, tool: str) -> bool:
    """The cursor the payload cap hands back when a first page overflowed: it means "from the start"."""
    if not cursor:
        return False
    try:
        return listing.decode_cursor(cursor) == {"t": tool, "o": 0}
    except KmsError:
        return False


def _outline(note: dict[str, Any]) -> tuple[list[dict[str, Any]], bool]:
    headings = [{"level": h["level"], "text": h["text"]} for h in note["headings"]]
    if _json_size(headings) <= HEADINGS_BUDGET:
        return headings, False
    kept: list[dict[str, Any]] = []
    used = 2
    for h in headings:
        used += _json_size(h) + 1
        if used > HEADINGS_BUDGET:
            break
        kept.append(h)
    return kept, True


def _section(note: dict[str, Any], query: str) -> tuple[str, str]:
    """(``## Heading``, the text of that heading's section, heading line included): the write tools'
    heading rules (``server.writes.positions``), so a section read is where an append would go."""
    # deferred: the Markdown parser (pyromark) only when a section is read, not on the way to tools/list
    from server.writes import positions

    body = note["body"]
    heads = positions.headings(body, note["title"])
    try:
        idx, head = positions.find_heading(heads, query)
    except KmsError:
        if " > " not in query:  # a kms_recall trail "Parent > Section" names its last heading
            raise
        idx, head = positions.find_heading(heads, query.rsplit(" > ", 1)[1])
    lines = split_lines(body)
    last = positions.section_last_line(lines, heads, idx)
    return f"{'#' * head.level} {head.text}", "".join(lines[head.line : last + 1])


def kms_read(ctx: ToolContext, args: ReadInput) -> dict[str, Any]:
    ctx.require_index()
    scope = ctx.vault_filter()
    note = get_note(ctx.conn, note_id_of(ctx, args.noteId), vault_id=scope)
    section = None
    body = note["body"]
    if args.section is not None:
        section, body = _section(note, args.section)
    offset = 0
    if args.cursor and not is_restart_cursor(args.cursor, "kms_read"):
        data = listing.decode_cursor(args.cursor)
        if (
            data.get("n") != note["id"]
            or not isinstance(data.get("o"), int)
            or not 0 <= data["o"] <= len(body)
            or data.get("s") != section
        ):
            raise KmsError(
                "invalid-input", "cursor does not belong to this note (and section); omit it to read from the start"
            )
        if data.get("v") != note["content_hash"]:
            raise KmsError(
                "conflict",
                "the note changed since the first page; read it again from the start",
                version=note["content_hash"],
            )
        offset = data["o"]
    headings, headings_cut = _outline(note)
    links = listing.outgoing_links(ctx.conn, note["rid"], scope)
    # everything but the body counts against the page budget (the headings of a long log can be 100s of KB)
    meta_size = _json_size(
        [
            note["frontmatter"],
            note["summary_text"],
            headings,
            note["tags"],
            note["fm_error"],
            note["title"],
            note["path"],
            links,
        ]
    )
    page = _page(body, offset, max(800, min(args.maxTokens * 4, max(4_000, PAGE_BUDGET - meta_size))))
    end = offset + len(page)
    summary = None
    if note["summary_state"] != "none":
        summary = {"state": note["summary_state"], "hash": note["summary_hash"], "text": note["summary_text"]}
    return {
        "noteId": note["id"],
        "title": note["title"],
        "path": note["path"],
        "vault": note["vault"],
        "body": page,
        "tags": note["tags"],
        "frontmatter": note["frontmatter"],
        "frontmatterError": note["fm_error"],
        "summary": summary,
        "headings": headings,
        **({"headingsTruncated": True} if headings_cut else {}),
        "updatedAt": note["updated_at"],
        "version": note["content_hash"],
        **({"section": section} if section else {}),
        **({"parent": note["parent"]} if note["parent"] else {}),  # (only visible ancestors: get_note's rule)
        "bodyChars": len(body),
        "offset": offset,
        "nextCursor": listing.encode_cursor(
            {"n": note["id"], "o": end, "v": note["content_hash"], **({"s": section} if section else {})}
        )
        if end < len(body)
        else None,
        **links,
        **authorship.provenance(ctx.conn, note),
    }


KMS_READ = ReadSpec(
    built_later=True,
    name="kms_read",
    about=(
        "Read one note by noteId (or its title or path): body (Markdown), tags, frontmatter, AI summary if "
        "any, headings, outgoing links (resolved noteIds and unresolved names), who created it and who last "
        "changed it and how (createdBy, lastChangedBy: agent or person, the tool, the session) and a version "
        "token for the write tools. Pass section to read one heading's section only. Long bodies come in pages of "
        "maxTokens: pass nextCursor back to read on."
    ),
    errors=("not-found", "conflict", "no-index"),
    input_model=ReadInput,
    output_model=ReadOutput,
    handler=kms_read,
    annotations=READ_ONLY.model_copy(update={"title": "Read a note"}),
    records_reads=True,
    note_text=True,
    cursor_field="cursor",
    example={"noteId": "drafts/edit.md"},
)


# kms_list_tags ------------------------------------------------------------------------------------


class ListTagsInput(StrictInput):
    limit: int = Field(default=500, ge=1, le=2000)
    cursor: str | None = Field(default=None, max_length=500, description="nextCursor from the previous page.")
    vault: str | None = VaultField


class TagCount(BaseModel):
    tag: str
    count: int


class ListTagsOutput(ToolOutput):
    tags: list[TagCount]
    nextCursor: str | None


def kms_list_tags(ctx: ToolContext, args: ListTagsInput) -> dict[str, Any]:
    ctx.require_index()
    cursor = None if is_restart_cursor(args.cursor, "kms_list_tags") else args.cursor
    return listing.list_tags(ctx.conn, ctx.vault_filter(args.vault), args.limit, cursor)


KMS_LIST_TAGS = ReadSpec(
    built_later=True,
    name="kms_list_tags",
    about="List every tag in the notes with how many notes carry it, most used first. Use it to "
    "learn how the person organises their notes before searching by tag; pass nextCursor to "
    "continue.",
    errors=("not-found", "no-index"),
    input_model=ListTagsInput,
    output_model=ListTagsOutput,
    handler=kms_list_tags,
    annotations=READ_ONLY.model_copy(update={"title": "List tags"}),
    cursor_field="cursor",
    example={},
)


# kms_list_recent ----------------------------------------------------------------------------------


class ListRecentInput(StrictInput):
    limit: int = Field(default=10, ge=1, le=50)
    vault: str | None = VaultField


class RecentCard(Card):
    lastChangedBy: Author


class RecentOutput(ToolOutput):
    notes: list[RecentCard]


def kms_list_recent(ctx: ToolContext, args: ListRecentInput) -> dict[str, Any]:
    ctx.require_index()
    return {
        "notes": authorship.for_cards(ctx.conn, listing.list_recent(ctx.conn, args.limit, ctx.vault_filter(args.vault)))
    }


KMS_LIST_RECENT = ReadSpec(
    name="kms_list_recent",
    about="List the most recently changed notes (newest first), each with who changed it last and how "
    "(lastChangedBy: agent or person, the tool, the session). Use it to see what the person is "
    "working on now.",
    errors=("not-found", "no-index"),
    input_model=ListRecentInput,
    output_model=RecentOutput,
    handler=kms_list_recent,
    annotations=READ_ONLY.model_copy(update={"title": "Recent notes"}),
    example={},
)


# kms_get_backlinks --------------------------------------------------------------------------------


class BacklinksInput(StrictInput):
    noteId: str = NoteIdField
    limit: int = Field(default=25, ge=1, le=50)
    cursor: str | None = Field(default=None, max_length=500, description="nextCursor from the previous page.")


class Backlink(Card):
    snippet: str
    linkCount: int
    inFrontmatter: bool


class BacklinksOutput(ToolOutput):
    noteId: str
    backlinks: list[Backlink]
    total: int
    nextCursor: str | None


def kms_get_backlinks(ctx: ToolContext, args: BacklinksInput) -> dict[str, Any]:
    ctx.require_index()
    note_id = note_id_of(ctx, args.noteId)
    offset = 0
    if args.cursor and not is_restart_cursor(args.cursor, "kms_get_backlinks"):
        data = listing.decode_cursor(args.cursor)
        if data.get("n") != note_id or not isinstance(data.get("o"), int) or data["o"] < 0:
            raise KmsError("invalid-input", "cursor does not belong to this note's backlinks; omit it to start over")
        offset = data["o"]
    found, total = listing.backlink_page(ctx.conn, note_id, args.limit, ctx.vault_filter(), offset)
    end = offset + len(found)
    return {
        "noteId": note_id,
        "backlinks": found,
        "total": total,
        "nextCursor": listing.encode_cursor({"n": note_id, "o": end}) if end < total else None,
    }


KMS_GET_BACKLINKS = ReadSpec(
    built_later=True,
    name="kms_get_backlinks",
    about="List the notes that link to a note (wiki-links by title, alias or path), each with a "
    "snippet around the link, and how many link to it in all (total); pass nextCursor to read on. "
    "Use it to follow how ideas connect.",
    errors=("not-found", "no-index"),
    input_model=BacklinksInput,
    output_model=BacklinksOutput,
    handler=kms_get_backlinks,
    annotations=READ_ONLY.model_copy(update={"title": "Backlinks"}),
    note_text=True,
    cursor_field="cursor",
    example={"noteId": "drafts/edit.md"},
)


# kms_inventory ------------------------------------------------------------------------------------


class InventoryInput(StrictInput):
    cursor: str | None = Field(default=None, max_length=500, description="nextCursor from the previous page.")
    limit: int = Field(default=100, ge=1, le=500)
    vault: str | None = VaultField


class InventoryItem(Card):
    summary: dict[str, Any]
    tokenEstimate: int
    sizeBytes: int


class InventoryOutput(ToolOutput):
    notes: list[InventoryItem]
    nextCursor: str | None


def kms_inventory(ctx: ToolContext, args: InventoryInput) -> dict[str, Any]:
    ctx.require_index()
    cursor = None if is_restart_cursor(args.cursor, "kms_inventory") else args.cursor
    return listing.inventory(ctx.conn, cursor, args.limit, ctx.vault_filter(args.vault))


KMS_INVENTORY = ReadSpec(
    built_later=True,
    name="kms_inventory",
    about="Page through every note (newest first) with title, tags, size, token estimate and AI "
    "summary (clipped at 2,000 characters), without bodies. Use it to survey the whole vault "
    "cheaply; a page holds up to `limit` notes, fewer when summaries are long; pass nextCursor "
    "to continue.",
    errors=("not-found", "no-index"),
    input_model=InventoryInput,
    output_model=InventoryOutput,
    handler=kms_inventory,
    note_text=True,
    annotations=READ_ONLY.model_copy(update={"title": "Note inventory"}),
    cursor_field="cursor",
    example={},
)
