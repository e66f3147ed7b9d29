"""Notes as resources (issue 27) through the real server and real SDK clients, in both protocol eras: the
bounded recent list, the note template, completion over paths and titles, and reads that obey
``kms_read``'s rules (hidden notes, vault scope, the summary block, the payload cap) and are recorded."""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import apsw
import pytest
from mcp.client import Client
from mcp.shared.exceptions import MCPError
from mcp_types import PromptReference, ResourceTemplateReference, TextResourceContents
from support.mcp_session import mcp_client
from support.vaults import write

from server.activity import note_resources
from server.config.session_contract import SessionConfig
from server.index.indexer import index_vault
from server.index.note_data import unfence
from server.index.notes import set_hidden
from server.mcp.hub import SessionHub
from server.mcp.process import ProcessServices
from server.mcp.serve import build_server
from server.mcp.tools.base import PAYLOAD_CAP_BYTES
from server.mcp.tools.dispatch import ToolRunner
from server.store.db import rows
from server.vault.registry import add_vault

if TYPE_CHECKING:
    from support.mcp_session import RunnerClient

MODES = ("legacy", "auto")  # the 2025 handshake era, and the 2026 per-request era
TEMPLATE = ResourceTemplateReference(uri="kms://{vault}/{+path}")


@pytest.fixture
def vaults(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    a, b = tmp_path / "vault a", tmp_path / "vault-b"
    write(a / "projects" / "Lighthouse plan.md", "# Lighthouse plan\n\nKeep the lamp lit.\n")
    write(a / "projects" / "Harbour budget.md", "---\ntitle: Money for the harbour\n---\n# Budget\n\nThree coins.\n")
    write(a / "Secret diary.md", "# Secret diary\n\nNothing to see.\n")
    write(
        a / "notes" / "Summarised.md",
        "<!-- kms:summary hash=abc -->\nA short summary.\n<!-- /kms:summary -->\n# Summarised\n\nThe body proper.\n",
    )
    write(a / "big" / "Long log.md", "# Long log\n\n" + "A line of the log that goes on.\n" * 4_000)
    write(b / "Beta lighthouse.md", "# Beta lighthouse\n\nAnother vault's lamp.\n")
    for root, name in ((a, "a"), (b, "b")):
        index_vault(conn, add_vault(conn, root, name))
    set_hidden(conn, "Secret diary", True)
    return conn


def config(db_path: Path, session_id: str, **fields: Any) -> SessionConfig:
    env = {"KMS_DB_PATH": str(db_path), "KMS_CONFIG": os.environ["KMS_CONFIG"]}
    return SessionConfig.from_env(env, watch=False, session_id=session_id, **fields)


@contextlib.asynccontextmanager
async def clients(db_path: Path, mode: str, *configs: SessionConfig) -> AsyncIterator[list[Any]]:
    """One real client per session, all on one server object over one hub."""
    hub = SessionHub(ProcessServices.for_config(configs[0]))
    runners = [hub.open(c) for c in configs]
    server = build_server(hub)
    try:
        async with contextlib.AsyncExitStack() as stack:
            out = []
            for runner in runners:
                with hub.connection(runner):
                    client = await stack.enter_async_context(Client(server, mode=mode))
                cast("RunnerClient", client).runner = runner
                out.append(client)
            yield out
    finally:
        hub.close_all()


async def all_resources(client: Any) -> list[Any]:
    listed, cursor = [], None
    while True:
        page = await client.list_resources(cursor=cursor)
        listed += page.resources
        cursor = page.next_cursor
        if cursor is None:
            return listed


@pytest.mark.parametrize("mode", MODES)
async def test_each_session_lists_its_visible_notes_as_percent_encoded_markdown_resources(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    scoped, everywhere = config(db_path, "sresa0000001", vault="a"), config(db_path, "sresall00002")
    async with clients(db_path, mode, scoped, everywhere) as (in_a, in_all):
        mine = {r.uri: r for r in await all_resources(in_a)}
        assert set(mine) == {
            "kms://a/projects/Lighthouse%20plan.md",
            "kms://a/projects/Harbour%20budget.md",
            "kms://a/notes/Summarised.md",
            "kms://a/big/Long%20log.md",
        }  # no hidden, no vault b
        budget = mine["kms://a/projects/Harbour%20budget.md"]
        assert (budget.name, budget.title, budget.mime_type) == (
            "projects/Harbour budget.md",
            "Money for the harbour",
            "text/markdown",
        )
        assert budget.annotations is not None and budget.annotations.last_modified
        everything = {r.uri for r in await all_resources(in_all)}
        assert "kms://b/Beta%20lighthouse.md" in everything and not any("Secret" in u for u in everything)
        [template] = (await in_a.list_resource_templates()).resource_templates
        assert template.uri_template == "kms://{vault}/{+path}"


@pytest.mark.parametrize("mode", MODES)
async def test_the_list_is_the_most_recent_notes_in_pages_never_the_whole_vault(
    conn: apsw.Connection, tmp_path: Path, db_path: Path, mode: str
) -> None:
    root = tmp_path / "many"
    for i in range(note_resources.LISTED + 30):
        os.utime(write(root / f"n{i:03}.md", f"# n{i:03}\n"), (1_000_000 + i, 1_000_000 + i))
    index_vault(conn, add_vault(conn, root, "many"))
    async with clients(db_path, mode, config(db_path, "sresmany0001")) as (client,):
        first = await client.list_resources()
        assert len(first.resources) == note_resources.PAGE and first.next_cursor
        listed = await all_resources(client)
    newest = [f"kms://many/n{i:03}.md" for i in range(note_resources.LISTED + 29, 29, -1)]
    assert [r.uri for r in listed] == newest  # newest first, LISTED in all


@pytest.mark.parametrize("mode", MODES)
async def test_reading_a_note_gives_its_body_without_the_summary_block_and_records_the_read(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    async with clients(db_path, mode, config(db_path, "sresread0001", vault="a")) as (client,):
        result = await client.read_resource("kms://a/notes/Summarised.md")
        [content] = result.contents
        assert unfence(content.text) == "# Summarised\n\nThe body proper.\n" and content.mime_type == "text/markdown"
        assert content.meta is not None and content.meta["noteId"].startswith("n")
        spaced = await client.read_resource("kms://a/projects/Lighthouse%20plan.md")
        assert "Keep the lamp lit." in spaced.contents[0].text
        loose = await client.read_resource("kms://a/projects/lighthouse%20plan")  # kms_read's resolver
        assert loose.contents[0].uri == "kms://a/projects/Lighthouse%20plan.md"
        client.runner.session.reads.flush()
    read = rows(
        vaults,
        "SELECT n.path FROM note_reads r JOIN notes n ON n.id = r.note_id WHERE r.session_id = ?",
        ("sresread0001",),
    )
    assert {r["path"] for r in read} == {"notes/Summarised.md", "projects/Lighthouse plan.md"}


@pytest.mark.parametrize("mode", MODES)
async def test_a_hidden_note_another_vault_and_a_foreign_address_are_refused_with_a_typed_error(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    async with clients(db_path, mode, config(db_path, "sresdeny0001", vault="a")) as (client,):
        for uri, kind in (
            ("kms://a/Secret%20diary.md", "not-found"),
            ("kms://b/Beta%20lighthouse.md", "not-found"),
            ("file:///etc/passwd", "invalid-input"),
        ):
            with pytest.raises(MCPError) as refused:
                await client.read_resource(uri)
            assert refused.value.data["error"] == kind, uri
            assert "Nothing to see" not in str(refused.value.data)
        client.runner.session.reads.flush()
    assert not rows(vaults, "SELECT 1 FROM note_reads WHERE session_id = 'sresdeny0001'")


async def test_a_note_over_the_payload_cap_is_cut_and_says_how_to_read_on(
    vaults: apsw.Connection, db_path: Path
) -> None:
    async with mcp_client(db_path) as client:
        result = await client.read_resource("kms://a/big/Long%20log.md")
        content = cast(TextResourceContents, result.contents[0])
        meta = content.meta
        assert meta is not None
        text = unfence(content.text)
        answer = result.model_dump_json(by_alias=True, exclude_none=True)
        assert len(answer.encode()) <= PAYLOAD_CAP_BYTES and meta["truncated"] is True
        cursor = text.rsplit("cursor=", 1)[1].rstrip("]")
        more = await client.call_tool(
            "kms_read",
            {
                "noteId": meta["noteId"],
                "cursor": cursor,
            },
        )
        assert not more.is_error and more.structured_content["offset"] > 0


@pytest.mark.parametrize("mode", MODES)
async def test_completion_finds_paths_by_partial_path_title_or_typo_within_the_sessions_vaults(
    vaults: apsw.Connection, db_path: Path, mode: str
) -> None:
    async with clients(db_path, mode, config(db_path, "srescomp0001", vault="a"), config(db_path, "srescomp0002")) as (
        in_a,
        in_all,
    ):

        async def paths(client: Any, value: str, **context: str) -> list[str]:
            found = await client.complete(TEMPLATE, {"name": "path", "value": value}, context or None)
            return found.completion.values

        # values as they go into the URI (a host inserts them as they are: a raw space would end the mention)
        assert (await paths(in_a, "projects/Light"))[0] == "projects/Lighthouse%20plan.md"
        assert (await paths(in_a, "projects/Lighthouse%20p"))[0] == "projects/Lighthouse%20plan.md"  # typed encoded
        assert (await paths(in_a, "lighthose"))[0] == "projects/Lighthouse%20plan.md"  # a typo
        assert (await paths(in_a, "money for the"))[0] == "projects/Harbour%20budget.md"  # by its title
        assert not any("Beta" in v for v in await paths(in_a, "lighthouse"))  # another vault
        assert not any("Secret" in p for p in await paths(in_a, "secret diary"))  # hidden
        assert "Beta%20lighthouse.md" in await paths(in_all, "lighthouse")
        assert await paths(in_all, "lighthouse", vault="b") == ["Beta%20lighthouse.md"]
        assert len(await paths(in_a, "")) == 4  # nothing typed: the most recent
        vaults_a = await in_a.complete(TEMPLATE, {"name": "vault", "value": ""})
        assert vaults_a.completion.values == ["a"]
        topics = await in_a.complete(PromptReference(name="recall"), {"name": "topic", "value": "harbour money"})
        assert topics.completion.values[0] == "Money for the harbour"


async def test_a_new_hidden_note_leaves_the_completions_at_once(vaults: apsw.Connection, db_path: Path) -> None:
    async with mcp_client(db_path, vault="a") as client:
        ask = {"name": "path", "value": "lighthouse plan"}
        assert (await client.complete(TEMPLATE, ask)).completion.values[0] == "projects/Lighthouse%20plan.md"
        set_hidden(vaults, "Lighthouse plan", True)
        assert not any("Lighthouse" in v for v in (await client.complete(TEMPLATE, ask)).completion.values)


def test_the_runner_of_mcp_client_is_a_tool_runner(vaults: apsw.Connection, db_path: Path) -> None:
    """The single-session path (``build_server(runner)``) serves the same handlers as a hub."""
    runner = ToolRunner(config(db_path, "sresone00001"))
    try:
        server = build_server(runner)
        assert {
            "resources/list",
            "resources/read",
            "resources/templates/list",
            "completion/complete",
            "prompts/list",
            "prompts/get",
        } <= set(server._request_handlers)
    finally:
        runner.close()
