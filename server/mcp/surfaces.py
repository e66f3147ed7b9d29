"""Resources, the note template, completions and prompts: the SDK handlers, thin over the core.

Notes are resources (``server.activity.note_resources``) and the prompts are ``server.activity.prompts``;
these handlers only resolve the calling session (``resolve``: a hub's connection or token session, or the
one session of ``kms mcp``), run the core on a worker thread (each thread has its own connection) and
turn its answers and ``KmsError`` into the protocol's types. A refused read or prompt is a JSON-RPC
``invalid params`` error whose data is the typed error (``{"error": kind, "message": ...}``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from server.activity import note_resources as notes
from server.activity import prompts
from server.errors import KmsError
from server.humanize import utc_iso
from server.mcp.tools.base import PAYLOAD_CAP_BYTES
from server.mcp.tools.dispatch import ToolRunner
from server.vault.scope import VaultScope

if TYPE_CHECKING:  # imported by the first request that needs them, not on the way to the first tools/list
    from server.activity import note_resources as notes
    from server.activity import prompts

Resolve = Callable[[Any], ToolRunner]  # the request's context -> the session it belongs to


def refused(error: KmsError) -> Exception:
    # deferred: the SDK only when a refusal is raised, after import_sdk_lean
    from mcp.shared.exceptions import MCPError

    return MCPError(types.INVALID_PARAMS, error.message, error.to_dict())


async def _off_loop(resolve: Resolve, ctx: Any, work: Callable[[ToolRunner], Any]) -> Any:
    """``work`` for the request's session on a worker thread; a ``KmsError`` becomes the protocol's error."""
    try:
        runner = resolve(ctx)
        return await anyio.to_thread.run_sync(lambda: work(runner))
    except KmsError as e:
        raise refused(e) from None


def _resource(item: notes.NoteResource) -> types.Resource:
    return types.Resource(
        uri=item.uri,
        name=item.path,
        title=item.title,
        description=f"{item.vault}:{item.path}",
        mime_type=MIME,
        size=item.size,
        annotations=types.Annotations(last_modified=utc_iso(item.updated_at)),
    )


NOTE_TEMPLATE = "kms://{vault}/{+path}"  # note_resources.TEMPLATE (a test keeps them one)
MIME = "text/markdown"
TEMPLATE = types.ResourceTemplate(
    uri_template=NOTE_TEMPLATE,
    name="note",
    title="A note",
    description="A note of the person's vaults by vault name and vault-relative path (completes on paths and "
    "titles). Hidden notes and other vaults' notes cannot be read.",
    mime_type=MIME,
)


def _prompt(spec: prompts.PromptSpec) -> types.Prompt:
    return types.Prompt(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        arguments=[
            types.PromptArgument(name=a.name, description=a.description, required=a.required) for a in spec.arguments
        ]
        or None,
    )


def _vault_in_context(runner: ToolRunner, params: types.CompleteRequestParams) -> VaultScope:
    """The session's scope, narrowed to the template's ``vault`` when the host already filled it in."""
    scope = runner.ctx.vault_filter()
    named = (params.context.arguments or {}).get("vault") if params.context else None
    if not named:
        return scope
    found = runner.ctx.conn.execute("SELECT id FROM vaults WHERE name = ?", (named,)).fetchall()
    if not found or not scope.sees(int(found[0][0])):  # type: ignore[arg-type]  # vaults.id: an INTEGER
        raise KmsError("not-found", "no such vault in this session's notes")
    return VaultScope.only([int(found[0][0])])  # type: ignore[arg-type]


def _complete(runner: ToolRunner, params: types.CompleteRequestParams) -> notes.Completion:

    ref, arg = params.ref, params.argument
    db = runner.config.db_path
    if isinstance(ref, types.ResourceTemplateReference) and ref.uri == NOTE_TEMPLATE:
        if arg.name == "vault":
            return notes.complete_vault(runner.ctx.conn, arg.value, runner.ctx.vault_filter())
        if arg.name == "path":
            try:
                vault_id = _vault_in_context(runner, params)
            except KmsError:
                return notes.Completion([], 0, False)
            return notes.complete_uri_path(runner.ctx.conn, db, arg.value, vault_id)
    if (
        isinstance(ref, types.PromptReference)
        and ref.name == prompts.RECALL.name
        and arg.name == "topic"
        and prompts.RECALL in prompts.listed(runner.config)
    ):
        return notes.complete_title(runner.ctx.conn, db, arg.value, runner.ctx.vault_filter())
    return notes.Completion([], 0, False)


def _get_prompt(runner: ToolRunner, name: str, arguments: dict[str, str]) -> types.GetPromptResult:

    spec = next((p for p in prompts.listed(runner.config) if p.name == name), None)
    if spec is None:  # only this session's: no hint of tiers it lacks
        names = ", ".join(p.name for p in prompts.listed(runner.config))
        raise KmsError("invalid-input", f"unknown prompt {name!r}; prompts: {names}")
    if spec is prompts.START:
        answer, _ = runner.call("kms_start", {})
        text = prompts.start_text(answer)
    elif spec is prompts.RECALL:
        topic = prompts.recall_topic(arguments)
        if not topic:
            raise KmsError("invalid-input", "the recall prompt needs a topic: /mcp__kms__recall <topic>")
        bundle, _ = runner.call("kms_recall", {"topic": topic[:1000]})
        text = prompts.recall_text(topic, bundle)
    elif spec is prompts.CAPTURE:
        text = prompts.capture_text(runner.config, runner.session.identity.project)
    else:
        scope = runner.ctx.vault_filter()
        text = prompts.review_text(prompts.review_data(runner.ctx.conn, runner.config.vault_names, scope))
    return types.GetPromptResult(
        description=spec.description,
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
    )


def handlers(resolve: Resolve) -> dict[str, Any]:
    """The ``Server`` keyword arguments for resources, the template, completions and prompts."""

    async def on_list_resources(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:

        cursor = params.cursor if params is not None else None
        page, next_cursor = await _off_loop(
            resolve, ctx, lambda r: notes.list_notes(r.ctx.conn, r.ctx.vault_filter(), cursor)
        )
        return types.ListResourcesResult(
            resources=[_resource(i) for i in page], next_cursor=next_cursor, ttl_ms=0, cache_scope="private"
        )

    async def on_list_resource_templates(
        ctx: Any, params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(resource_templates=[TEMPLATE], ttl_ms=0, cache_scope="private")

    async def on_read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:

        uri = str(params.uri)
        note = await _off_loop(
            resolve, ctx, lambda r: notes.read_note(r.ctx.conn, r.session, uri, r.ctx.vault_filter(), PAYLOAD_CAP_BYTES)
        )
        meta = {
            "noteId": note.note_id,
            "title": note.title,
            "version": note.version,
            **({"truncated": True} if note.truncated else {}),
        }
        return types.ReadResourceResult(
            contents=[types.TextResourceContents(uri=note.uri, mime_type=MIME, text=note.text, _meta=meta)],
            ttl_ms=0,
            cache_scope="private",
        )

    async def on_completion(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        found = await _off_loop(resolve, ctx, lambda r: _complete(r, params))
        return types.CompleteResult(
            completion=types.Completion(values=found.values, total=found.total, has_more=found.has_more)
        )

    async def on_list_prompts(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:

        try:
            listed = prompts.listed(resolve(ctx).config)
        except KmsError as e:
            raise refused(e) from None
        return types.ListPromptsResult(prompts=[_prompt(p) for p in listed], ttl_ms=0, cache_scope="private")

    async def on_get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        arguments = dict(params.arguments or {})
        result: types.GetPromptResult = await _off_loop(resolve, ctx, lambda r: _get_prompt(r, params.name, arguments))
        return result

    return {
        "on_list_resources": on_list_resources,
        "on_list_resource_templates": on_list_resource_templates,
        "on_read_resource": on_read_resource,
        "on_completion": on_completion,
        "on_list_prompts": on_list_prompts,
        "on_get_prompt": on_get_prompt,
    }
