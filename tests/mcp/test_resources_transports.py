"""Resources, completion and prompts over the real transports (issue 27): a spawned ``kms mcp`` over stdio (the
lean SDK import) and the kms service over Streamable HTTP, where the bearer token's session decides what is
listed and read."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceTemplateReference
from support.vaults import write
from test_mcp_stdio import stdio_server
from test_service_http import MODES, client, running, token, two_vaults  # noqa: F401 - fixtures

from server.index.indexer import index_vault
from server.index.notes import set_hidden
from server.mcp import service
from server.vault.registry import add_vault

TEMPLATE = ResourceTemplateReference(uri="kms://{vault}/{+path}")


async def test_a_spawned_kms_mcp_serves_notes_completions_and_prompts(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = tmp_path / "vault"
    write(root / "Lighthouse.md", "# Lighthouse\n\nThe lamp is trimmed at dusk.\n")
    write(root / "Diary.md", "# Diary\n\nPrivate.\n")
    index_vault(conn, add_vault(conn, root, "v"))
    set_hidden(conn, "Diary", True)
    async with stdio_server(db_path, tmp_path) as c:
        assert [r.uri for r in (await c.list_resources()).resources] == ["kms://v/Lighthouse.md"]
        found = await c.complete(TEMPLATE, {"name": "path", "value": "lighthose"})
        assert found.completion.values == ["Lighthouse.md"]
        assert "trimmed at dusk" in (await c.read_resource("kms://v/Lighthouse.md")).contents[0].text
        with pytest.raises(MCPError) as refused:
            await c.read_resource("kms://v/Diary.md")
        assert refused.value.data["error"] == "not-found"
        assert [p.name for p in (await c.list_prompts()).prompts] == ["start", "recall", "review"]
        recall = await c.get_prompt("recall", {"topic": "lamp dusk"})
        assert "trimmed at dusk" in recall.messages[0].content.text


@pytest.mark.parametrize("mode", MODES)
async def test_over_http_a_tokens_session_lists_and_reads_only_its_vault(
    running: service.ServiceState,  # noqa: F811 - the fixtures imported above
    two_vaults: apsw.Connection,  # noqa: F811
    mode: str,
) -> None:
    _, reader_secret = token(two_vaults, "tier:read vault:a")
    _, writer_secret = token(two_vaults, "tier:write")
    async with client(running, reader_secret, mode) as r, client(running, writer_secret, mode) as w:
        assert [x.uri for x in (await r.list_resources()).resources] == ["kms://a/Alpha.md"]
        assert {x.uri for x in (await w.list_resources()).resources} == {"kms://a/Alpha.md", "kms://b/Beta.md"}
        assert "lighthouse keeper" in (await r.read_resource("kms://a/Alpha.md")).contents[0].text
        with pytest.raises(MCPError) as refused:
            await r.read_resource("kms://b/Beta.md")
        assert refused.value.data["error"] == "not-found"
        assert (await r.complete(TEMPLATE, {"name": "path", "value": "beta"})).completion.values == []
        assert "capture" not in {p.name for p in (await r.list_prompts()).prompts}
        assert "capture" in {p.name for p in (await w.list_prompts()).prompts}
