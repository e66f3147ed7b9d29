"""A stdio session names the review page too: it was not opened by the service, so it asks the state file of
the service running for its database when a call is staged (a service started after the session began counts);
with none running, it says how to open the pages (`kms review`) instead. A real ``kms mcp`` over stdio, a real
``kms serve``; the person decides from another connection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest
from support.mcp_stdio import stdio_server
from support.service import Served
from support.vaults import note_id

from server.activity import approvals
from server.store.db import connect


async def _staged_then_approved(db_path: Path, tmp_path: Path, nid: str) -> tuple[int, list[str]]:
    """A write through ``kms mcp`` that waits for the person: the pending id and the progress messages seen."""
    messages: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        messages.append(message or "")

    conn = connect(db_path)
    try:
        async with stdio_server(db_path, tmp_path, KMS_WRITE_APPROVAL="always") as client:
            result: dict[str, Any] = {}

            async def agent() -> None:
                done = await client.call_tool(
                    "kms_append", {"noteId": nid, "content": "x"}, progress_callback=on_progress
                )
                result["done"] = done

            async with anyio.create_task_group() as tg:
                tg.start_soon(agent)
                with anyio.fail_after(30):
                    while not (found := approvals.list_pending(conn)) or not messages:
                        await anyio.sleep(0.05)
                approvals.decide(conn, found[0].id, approve=True, channel="cli")
        assert not result["done"].is_error, result["done"].structured_content
        return found[0].id, messages
    finally:
        conn.close()


@pytest.mark.parametrize("service", ["running", "none"])
async def test_a_stdio_session_names_the_running_service_s_page(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path, service: str
) -> None:
    (tmp_path / "config.toml").write_text("[agent]\nwrite = true\n")
    served = Served.start(db_path) if service == "running" else None
    try:
        pending_id, messages = await _staged_then_approved(db_path, tmp_path, note_id(indexed, "Home"))
    finally:
        if served is not None:
            served.stop()
    if served is not None:
        assert f"http://127.0.0.1:{served.port}/review/pending/{pending_id}" in messages[0], messages
    else:
        assert "http://" not in messages[0] and "`kms review`" in messages[0], messages
