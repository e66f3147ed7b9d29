"""The orientation tools of the read tier: ``kms_start``, ``kms_list_folder``, ``kms_status``, ``kms_reindex``,
each spec beside its handler. Handlers bind a validated input to the core (``server.activity.start``,
``server.index.orientation``, ``server.index.agent_reindex``), imported on first call so that listing the
tools at server start loads no parser (``tests/mcp/test_tool_registry.py``)."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from server.activity.start import session_summary, start_answer
from server.activity.visits import MAX_PROJECT_CHARS
from server.index import conflicts
from server.index import orientation as o
from server.index.agent_reindex import refresh
from server.index.orientation import list_folder
from server.index.properties import parse_filters, properties_in_use
from server.mcp.tools.base import READ_ONLY, ReadSpec, StrictInput, ToolContext, ToolOutput, WhereField
from server.mcp.tools.notes_tools import VaultField, is_restart_cursor
from server.writes.limits import MAX_FOLDER_CHARS

# kms_start ----------------------------------------------------------------------------------------


class StartInput(StrictInput):
    project: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_PROJECT_CHARS,
        description="Your project (its folder path or repository); default: the one "
        "the host gave this session. Keys 'since your last visit' and "
        "the project's memory.",
    )


class StartOutput(ToolOutput):
    session: dict[str, Any]
    vaults: list[dict[str, Any]]
    map: dict[str, Any]
    health: dict[str, Any]
    sinceLastVisit: dict[str, Any]
    memory: dict[str, Any]
    tokenEstimate: int


def _semantic(ctx: ToolContext) -> dict[str, Any]:
    service = ctx.semantic
    state = service.peek_state() if service is not None else "disabled"
    return {"ready": state == "ready", "state": state}


def _watcher(ctx: ToolContext) -> bool:
    return ctx.watching


def _session(ctx: ToolContext, project: str | None) -> dict[str, Any]:

    return session_summary(ctx.conn, ctx.config, project, _semantic(ctx))


def kms_start(ctx: ToolContext, args: StartInput) -> dict[str, Any]:

    ctx.require_index()
    vault_id = ctx.vault_filter()
    project = ctx.identity.use(ctx.conn, args.project, vault=", ".join(ctx.config.vault_names) or None)
    return start_answer(
        ctx.conn,
        session=_session(ctx, project),
        vault_id=vault_id,
        project=project,
        session_id=ctx.session_id,
        memory_folder=ctx.config.memory_folder,
        watcher=_watcher(ctx),
    )


KMS_START = ReadSpec(
    built_later=True,
    name="kms_start",
    about=(
        "Call this first, once per session (it is idempotent and never required): in one short answer, "
        "what this session may do (tiers, allowed folders, writes left, whether semantic search is ready), "
        "the vaults with their top folders, the most linked and most recent notes, the tags in use, index "
        "health, what changed since your project's previous session (who changed what: the person or an "
        "agent session) and the person's and the project's memory. Pass project when the host has not."
    ),
    errors=("not-found", "no-index"),
    input_model=StartInput,
    output_model=StartOutput,
    handler=kms_start,
    note_text=True,
    annotations=READ_ONLY.model_copy(update={"title": "Start here: orient in the notes"}),
    example={},
)


# kms_list_folder ----------------------------------------------------------------------------------


class ListFolderInput(StrictInput):
    path: str | None = Field(
        default=None,
        max_length=MAX_FOLDER_CHARS,
        description="Vault-relative folder, e.g. 'projects/kms'; default the root.",
    )
    vault: str | None = VaultField
    tag: str | None = Field(
        default=None, min_length=1, max_length=200, description="Only notes with this tag (or a tag nested under it)."
    )
    cursor: str | None = Field(default=None, max_length=500, description="nextCursor from the previous page.")
    limit: int = Field(default=50, ge=1, le=500, description="Notes per page (default 50).")
    where: list[str] | None = WhereField


class ListFolderOutput(ToolOutput):
    path: str
    folders: list[dict[str, Any]] | None = None
    notes: list[dict[str, Any]]
    nextCursor: str | None


def kms_list_folder(ctx: ToolContext, args: ListFolderInput) -> dict[str, Any]:

    ctx.require_index()
    cursor = None if is_restart_cursor(args.cursor, "kms_list_folder") else args.cursor
    return list_folder(
        ctx.conn,
        args.path,
        ctx.vault_filter(args.vault),
        tag=args.tag,
        cursor=cursor,
        limit=args.limit,
        props=parse_filters(args.where),
    )


KMS_LIST_FOLDER = ReadSpec(
    built_later=True,
    name="kms_list_folder",
    about=(
        "List one folder of the notes: its notes (newest first, with title, tags, size, token estimate "
        "and AI summary, no bodies) and, on the first page, its subfolders with how many notes each holds. "
        "Use it to browse the vault's structure; filter by tag or by properties (where); pass nextCursor to "
        "continue."
    ),
    errors=("invalid-input", "not-found", "no-index"),
    input_model=ListFolderInput,
    output_model=ListFolderOutput,
    handler=kms_list_folder,
    annotations=READ_ONLY.model_copy(update={"title": "List a folder"}),
    cursor_field="cursor",
    inline=True,  # a page is its index entries (m018) and the folder counts: bounded, never a scan
    example={},
)


# kms_status ---------------------------------------------------------------------------------------


class StatusInput(StrictInput):
    pass


class StatusOutput(ToolOutput):
    lastIndexedAt: float | None
    vaults: list[dict[str, Any]]
    counts: dict[str, int]
    flagged: dict[str, Any]
    unresolvedLinks: dict[str, Any]
    watcher: dict[str, Any]
    embeddings: dict[str, Any]
    conflicts: dict[str, Any]


def kms_status(ctx: ToolContext, args: StatusInput) -> dict[str, Any]:

    ctx.require_index()
    conn, vault_id = ctx.conn, ctx.vault_filter()
    vaults = o.vaults(conn, vault_id)
    flagged, flagged_count = o.flagged(conn, vault_id, 50)
    unresolved, unresolved_count = o.unresolved(conn, vault_id, 20)
    return {
        "lastIndexedAt": max((v["lastIndexedAt"] or 0 for v in vaults), default=0) or None,
        "vaults": [{k: v[k] for k in ("name", "dialect", "notes", "lastIndexedAt")} for v in vaults],
        "counts": o.index_counts(conn, vault_id),
        "flagged": {"count": flagged_count, "notes": flagged},
        "unresolvedLinks": {"count": unresolved_count, "top": unresolved},
        "watcher": {"running": _watcher(ctx)},
        "embeddings": {**_semantic(ctx), **o.embedding_coverage(conn, vault_id)},
        "conflicts": conflicts.for_agents(conn, vault_id),
    }


KMS_STATUS = ReadSpec(
    built_later=True,
    name="kms_status",
    about=(
        "Index health: when the notes were last indexed, counts, notes whose frontmatter could not be "
        "read (with why), the most named unresolved links, whether the index is kept live, how much "
        "of the vault semantic search covers, and the notes with an open sync conflict (two versions from two "
        "machines: writes to them are refused until the person resolves it). Use it when results look stale "
        "or incomplete."
    ),
    errors=("not-found", "no-index"),
    input_model=StatusInput,
    output_model=StatusOutput,
    handler=kms_status,
    annotations=READ_ONLY.model_copy(update={"title": "Index status"}),
    example={},
)


# kms_reindex --------------------------------------------------------------------------------------


class ReindexInput(StrictInput):
    vault: str | None = VaultField


class ReindexOutput(ToolOutput):
    vaults: list[dict[str, Any]]
    changed: int
    nextAllowedIn: float


def kms_reindex(ctx: ToolContext, args: ReindexInput) -> dict[str, Any]:

    return refresh(ctx.conn, ctx.vault_filter(args.vault))


KMS_REINDEX = ReadSpec(
    name="kms_reindex",
    about=(
        "Look at the vault's files again and bring the index up to date (notes added, changed, removed or "
        "renamed outside kms). Use it when kms_status or a result looks stale; the watcher normally keeps "
        "the index live. At most once a minute per vault. Returns the counts of what changed."
    ),
    errors=("not-found", "no-index", "rate-limited"),
    input_model=ReindexInput,
    output_model=ReindexOutput,
    handler=kms_reindex,
    annotations=READ_ONLY.model_copy(update={"title": "Refresh the index"}),  # (no note changes: only the index)
    example={},
)


# kms_list_properties ------------------------------------------------------------------------------


class ListPropertiesInput(StrictInput):
    vault: str | None = VaultField
    limit: int = Field(default=50, ge=1, le=200, description="Properties to list (default 50).")
    values: int = Field(default=5, ge=0, le=20, description="Most common values shown per property (default 5).")


class ListPropertiesOutput(ToolOutput):
    properties: list[dict[str, Any]]


def kms_list_properties(ctx: ToolContext, args: ListPropertiesInput) -> dict[str, Any]:

    ctx.require_index()
    found = properties_in_use(ctx.conn, ctx.vault_filter(args.vault), limit=args.limit, values=args.values)
    return {"properties": found}


KMS_LIST_PROPERTIES = ReadSpec(
    built_later=True,
    name="kms_list_properties",
    about=(
        "List the properties (frontmatter and Logseq key:: value) the notes carry, most used first, each "
        "with how many notes have it, whether its values are numbers, and its most common values. Use it "
        "before filtering kms_search, kms_semantic_search or kms_list_folder with where (status:evergreen)."
    ),
    errors=("not-found", "no-index"),
    input_model=ListPropertiesInput,
    output_model=ListPropertiesOutput,
    handler=kms_list_properties,
    annotations=READ_ONLY.model_copy(update={"title": "List properties"}),
    example={},
)
