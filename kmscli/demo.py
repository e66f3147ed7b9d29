"""``kms demo``: a scripted agent session against a real ``kms mcp`` server process.

Everything is real and private to a temporary folder: the packaged sample vault is copied,
indexed, one note hidden, and a real MCP client drives a real server subprocess through
searches, reads, guarded writes, a denied folder and the rate limit. Each step is reported
through ``emit`` so the CLI can print it or the dashboard can show it live.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from kmscli.compose import kms_command
from server.activity.sessions import end_session, start_session
from server.config.session import SessionConfig
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

SAMPLE_VAULT = Path(__file__).parent / "sample_vault"
ALLOWLIST = "drafts,inbox"
PER_MINUTE = 6
Emit = Callable[[str, str], None]  # (kind, text): kind is 'step', 'ok', 'denied' or 'info'


@dataclass
class DemoWorkspace:
    root: Path
    vault: Path
    db_path: Path
    config_path: Path
    session_id: str = "demo-agent"

    def server_env(self) -> dict[str, str]:
        config = SessionConfig(
            db_path=self.db_path,
            config_path=self.config_path,
            enabled=True,
            read_enabled=True,
            write_enabled=True,
            session_id=self.session_id,
            per_minute=PER_MINUTE,
            allowlist=tuple(ALLOWLIST.split(",")),
            embed_enabled=False,
        )  # the story does not need the model; never fetch it for a demo
        return {**{k: v for k, v in os.environ.items() if not k.startswith("KMS_")}, **config.to_env()}


def prepare(root: Path | None = None) -> DemoWorkspace:
    """Copy the sample vault to a fresh folder, index it and hide the private note."""
    root = Path(tempfile.mkdtemp(prefix="kms-demo-")) if root is None else root
    vault = root / "vault"
    shutil.copytree(SAMPLE_VAULT, vault)
    ws = DemoWorkspace(root=root, vault=vault, db_path=root / "kms.db", config_path=root / "config.toml")
    # the demo's private settings say what its server runs with, so the dashboard header agrees
    from server.config.settings import set_value

    for key, value in (
        ("agent.write", "on"),
        ("write.allowlist", ALLOWLIST.split(",")),
        ("write.per_minute", str(PER_MINUTE)),
    ):
        set_value(key, value, path=ws.config_path, env={}, has_vault=True)
    conn = connect(ws.db_path)
    try:
        index_vault(conn, add_vault(conn, vault, "sample"))
        start_session(conn, kind="demo", session_id=ws.session_id, argv=["kms", "demo"], vault="sample", cwd=str(root))
    finally:
        conn.close()
    return ws


async def _call(client: Any, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    result = await client.call_tool(name, args)
    data = result.structured_content
    if data is None:
        data = json.loads(result.content[0].text)
    return data, bool(result.is_error)


async def run_story(ws: DemoWorkspace, emit: Emit, pause: float = 0.0) -> dict[str, Any]:
    """Drive the scripted agent; return a summary (counts by outcome) for tests and the CLI."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    command, args = kms_command()
    params = StdioServerParameters(command=command, args=args, env=ws.server_env())
    summary: dict[str, Any] = {"writes": 0, "denied": 0, "rate_limited": 0, "reads": 0}

    async def step(text: str) -> None:
        emit("step", text)
        if pause:
            await anyio.sleep(pause)

    async with Client(params) as client:
        tools = await client.list_tools()
        emit("info", f"connected to kms mcp: {len(tools.tools)} tools ({', '.join(t.name for t in tools.tools)})")

        await step("agent orients itself: kms_start (what it may do, what is in the vault)")
        start, _ = await _call(client, "kms_start", {})
        tiers = start["session"]["tiers"]
        emit("ok", "  may: " + ", ".join(t for t, on in tiers.items() if on))
        for v in start["vaults"]:
            folders = ", ".join(f"{f['path']} ({f['notes']})" for f in v["folders"])
            emit("ok", f"  vault {v['name']} ({v['dialect']}): {v['notes']} notes; folders {folders}")
        summary["reads"] += 1

        await step('agent searches: "auth error handling"')
        found, _ = await _call(client, "kms_search", {"query": "auth error handling", "limit": 3})
        for h in found["hits"]:
            emit("ok", f"  {h['title']}  ({h['path']}, score {h['score']:.2f})")
        summary["reads"] += 1

        await step("agent reads the best hit")
        note, _ = await _call(client, "kms_read", {"noteId": found["hits"][0]["noteId"]})
        emit("ok", f"  {note['title']}: {note['bodyChars']} characters, tags {', '.join(note['tags'])}")
        summary["reads"] += 1

        await step('agent searches for "lighthouse exercise" (words only in a note marked `private: true`)')
        hidden, _ = await _call(client, "kms_search", {"query": "lighthouse exercise"})
        emit("ok", f"  {len(hidden['hits'])} hits: hidden notes never reach an agent")

        await step("agent creates a note in drafts/ (an allowed folder)")
        created, err = await _call(
            client,
            "kms_create",
            {
                "title": "Auth errors - agent summary",
                "folder": "drafts",
                "tags": ["agent", "auth"],
                "content": "Summary of [[Auth service error handling]]: classify once at the boundary; "
                "callers handle four categories.",
            },
        )
        if err:
            emit("denied", f"  {created['error']}: {created['message']}")
        else:
            summary["writes"] += 1
            emit("ok", f"  created {created['path']} (+{created['linesAdded']} lines)")
            nid = created["noteId"]

            await step("agent appends a follow-up")
            appended, _ = await _call(client, "kms_append", {"noteId": nid, "content": "- [ ] Review with the team"})
            summary["writes"] += 1
            emit("ok", f"  appended {appended['bytesAfter'] - appended['bytesBefore']} bytes to {appended['path']}")

            await step("agent sets properties: status=draft")
            props, _ = await _call(client, "kms_update_properties", {"noteId": nid, "set": {"status": "draft"}})
            summary["writes"] += 1
            emit("ok", f"  frontmatter updated in {props['path']}")

        await step("agent tries to create a note in projects/ (not in the allowlist)")
        denied, _ = await _call(client, "kms_create", {"title": "Sneaky note", "folder": "projects"})
        summary["denied"] += 1
        emit("denied", f"  {denied['error']}: {denied['message']}")

        await step(f"agent floods the inbox ({PER_MINUTE} writes per minute allowed)")
        inbox = (await _call(client, "kms_search", {"query": "quick capture"}))[0]["hits"][0]["noteId"]
        for i in range(PER_MINUTE + 2):
            res, err = await _call(client, "kms_append", {"noteId": inbox, "content": f"- agent idea {i + 1}"})
            if err:
                summary["rate_limited"] += 1
                emit("denied", f"  write {i + 1}: {res['error']} (retry in {res.get('retryAfterMs', 0) / 1000:.0f}s)")
            else:
                summary["writes"] += 1
                emit("ok", f"  write {i + 1}: appended to {res['path']}")
            if pause:
                await anyio.sleep(pause / 4)
    conn = connect(ws.db_path)
    try:
        end_session(conn, ws.session_id, 0)
        summary["provenance_rows"] = conn.execute("SELECT count(*) FROM tool_invocations").fetchall()[0][0]
    finally:
        conn.close()
    emit(
        "info",
        f"done: {summary['writes']} writes, {summary['denied']} denied, "
        f"{summary['rate_limited']} rate-limited, {summary['provenance_rows']} provenance rows recorded",
    )
    return summary
