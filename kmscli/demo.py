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
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from kmscli.compose import kms_command
from server.activity.session_registry import end_session, start_session
from server.config.session_contract import SessionConfig
from server.config.settings import set_value
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

SAMPLE_VAULT = Path(__file__).parent / "sample_vault"
ALLOWLIST = "drafts,inbox"
PER_MINUTE = 6
Emit = Callable[[str, str], None]  # (kind, text): kind is 'step', 'ok', 'denied', 'failed' or 'info'


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


STEP_DEADLINE_S = 60.0  # a step (one or a few calls) takes well under a second; the first also starts the server


class StepFailed(Exception):
    """A step of the story did not go as the story says (a refusal where a write should land, an error)."""


async def _call(client: Any, name: str, args: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    result = await client.call_tool(name, args)
    data = result.structured_content
    if data is None:
        data = json.loads(result.content[0].text)
    return data, bool(result.is_error)


async def _ok(client: Any, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A call the story needs to succeed: its answer, or ``StepFailed`` naming the error kms gave."""
    data, err = await _call(client, name, args)
    if err:
        raise StepFailed(f"{name} answered {data.get('error')}: {data.get('message')}")
    return data


def _reason(exc: BaseException) -> str:
    """Why a step failed, in a line: the server's own words, or what the connection did (the SDK's task
    groups wrap it in exception groups: the first leaf is the cause)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, StepFailed):
        return str(exc)
    text = str(exc) or type(exc).__name__
    if "Connection closed" in text or isinstance(exc, (EOFError, BrokenPipeError, ConnectionError)):
        return f"the kms mcp server went away ({text}): it exited or was killed"
    return f"{type(exc).__name__}: {text}"


async def run_story(
    ws: DemoWorkspace, emit: Emit, pause: float = 0.0, step_deadline: float = STEP_DEADLINE_S
) -> dict[str, Any]:
    """Drive the scripted agent; return a summary (counts by outcome) for tests and the CLI.

    Each step has ``step_deadline`` seconds: a step that fails (an error where the story needs an answer, the
    server gone) or stalls is emitted as ``failed`` with its reason, the story stops there, and the summary's
    ``failed`` says which step (None when every step went as told)."""

    command, args = kms_command()
    params = StdioServerParameters(command=command, args=args, env=ws.server_env())
    summary: dict[str, Any] = {"writes": 0, "denied": 0, "rate_limited": 0, "reads": 0, "failed": None}
    current = ["kms demo starts its kms mcp server and connects"]

    with anyio.CancelScope() as deadline:

        async def step(text: str) -> None:
            current[0] = text
            deadline.deadline = anyio.current_time() + step_deadline + pause
            emit("step", text)
            if pause:
                await anyio.sleep(pause)

        deadline.deadline = anyio.current_time() + step_deadline
        try:
            async with Client(params) as client:
                await _tell(client, emit, step, summary, pause)
        except Exception as e:  # any error of a step (or of the connection) is that step's failure
            summary["failed"] = f"{current[0]}: {_reason(e)}"
    if deadline.cancelled_caught:
        summary["failed"] = f"{current[0]}: did not finish within {step_deadline:g} s"
    if summary["failed"] is not None:
        emit("failed", f"step failed: {summary['failed']}")
    conn = connect(ws.db_path)
    try:
        end_session(conn, ws.session_id, 0 if summary["failed"] is None else 1)
        summary["provenance_rows"] = conn.execute("SELECT count(*) FROM tool_invocations").fetchall()[0][0]
    finally:
        conn.close()
    emit(
        "info",
        ("the story stopped at a failed step; " if summary["failed"] is not None else "done: ")
        + f"{summary['writes']} writes, {summary['denied']} denied, "
        f"{summary['rate_limited']} rate-limited, {summary['provenance_rows']} provenance rows recorded",
    )
    return summary


async def _tell(client: Any, emit: Emit, step: Callable[[str], Any], summary: dict[str, Any], pause: float) -> None:
    """The story itself, step by step (``run_story`` times each step and reports the one that fails)."""
    tools = await client.list_tools()
    emit("info", f"connected to kms mcp: {len(tools.tools)} tools ({', '.join(t.name for t in tools.tools)})")

    await step("agent orients itself: kms_start (what it may do, what is in the vault)")
    start = await _ok(client, "kms_start", {})
    tiers = start["session"]["tiers"]
    emit("ok", "  may: " + ", ".join(t for t, on in tiers.items() if on))
    for v in start["vaults"]:
        folders = ", ".join(f"{f['path']} ({f['notes']})" for f in v["folders"])
        emit("ok", f"  vault {v['name']} ({v['dialect']}): {v['notes']} notes; folders {folders}")
    summary["reads"] += 1

    await step('agent searches: "auth error handling"')
    found = await _ok(client, "kms_search", {"query": "auth error handling", "limit": 3})
    for h in found["hits"]:
        emit("ok", f"  {h['title']}  ({h['path']}, score {h['score']:.2f})")
    summary["reads"] += 1

    await step("agent reads the best hit")
    note = await _ok(client, "kms_read", {"noteId": found["hits"][0]["noteId"]})
    emit("ok", f"  {note['title']}: {note['bodyChars']} characters, tags {', '.join(note['tags'])}")
    summary["reads"] += 1

    await step('agent searches for "lighthouse exercise" (words only in a note marked `private: true`)')
    hidden = await _ok(client, "kms_search", {"query": "lighthouse exercise"})
    emit("ok", f"  {len(hidden['hits'])} hits: hidden notes never reach an agent")

    await step("agent creates a note in drafts/ (an allowed folder)")
    created = await _ok(
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
    summary["writes"] += 1
    emit("ok", f"  created {created['path']} (+{created['linesAdded']} lines)")
    nid = created["noteId"]

    await step("agent appends a follow-up")
    appended = await _ok(client, "kms_append", {"noteId": nid, "content": "- [ ] Review with the team"})
    summary["writes"] += 1
    emit("ok", f"  appended {appended['bytesAfter'] - appended['bytesBefore']} bytes to {appended['path']}")

    await step("agent sets properties: status=draft")
    props = await _ok(client, "kms_update_properties", {"noteId": nid, "set": {"status": "draft"}})
    summary["writes"] += 1
    emit("ok", f"  frontmatter updated in {props['path']}")

    await step("agent tries to create a note in projects/ (not in the allowlist)")
    denied, err = await _call(client, "kms_create", {"title": "Sneaky note", "folder": "projects"})
    if not err or denied.get("error") != "folder-denied":
        raise StepFailed(f"kms_create in projects/ was not refused as folder-denied: {denied}")
    summary["denied"] += 1
    emit("denied", f"  {denied['error']}: {denied['message']}")

    await step(f"agent floods the inbox ({PER_MINUTE} writes per minute allowed)")
    inbox = (await _ok(client, "kms_search", {"query": "quick capture"}))["hits"][0]["noteId"]
    for i in range(PER_MINUTE + 2):
        res, err = await _call(client, "kms_append", {"noteId": inbox, "content": f"- agent idea {i + 1}"})
        if err and res.get("error") != "rate-limited":
            raise StepFailed(f"write {i + 1} answered {res.get('error')}: {res.get('message')}")
        if err:
            summary["rate_limited"] += 1
            emit("denied", f"  write {i + 1}: {res['error']} (retry in {res.get('retryAfterMs', 0) / 1000:.0f}s)")
        else:
            summary["writes"] += 1
            emit("ok", f"  write {i + 1}: appended to {res['path']}")
        if pause:
            await anyio.sleep(pause / 4)
