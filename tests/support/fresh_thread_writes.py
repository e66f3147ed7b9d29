"""Write tools called through the real MCP server, each call from a fresh thread that exits afterwards
(run as a script, in a process of its own, so a crash is the test's failure, not the test runner's).

    python fresh_thread_writes.py VAULT_FOLDER

``KMS_DB_PATH``/``KMS_CONFIG`` come from the environment; the vault is registered there already. Nothing of
kms is imported on the main thread: the first thread imports and first uses every module (the SDK, the
server, the YAML reader, the editors) and exits, and each later call runs on a thread that never imported
them, with its own event loop whose anyio worker threads (where the server runs a write's blocking work, as
``kms mcp`` does) end with it. That is what a host's server does over time (its worker threads exit after
10 s idle), and what a library with per-thread state (yaml-rs) crashed on. Prints one JSON line per call.
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

STATE: dict[str, Any] = {}


def on_fresh_thread(work: Any, *args: Any) -> Any:
    """``work(*args)`` on a new thread, joined: the thread has exited when this returns."""
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["value"] = work(*args)
        except BaseException as e:  # reported by the caller, on the main thread
            box["error"] = e

    thread = threading.Thread(target=run, name=f"fresh-{work.__name__}")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")


def start() -> None:
    """Import kms and the SDK, open the process's services: on this (soon gone) thread."""
    import anyio  # noqa: F401  (first use here)
    from mcp.client import Client  # noqa: F401

    from server.config.session_contract import SessionConfig
    from server.mcp.process import ProcessServices
    from server.mcp.serve import build_server  # noqa: F401

    config = SessionConfig.from_env(watch=False, session_id="fresh-threads")
    STATE["config"] = config
    STATE["services"] = ProcessServices.for_config(config)


def call(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One tool call through a real SDK client and the real server, on an event loop of this thread's own."""
    import anyio
    from mcp.client import Client

    from server.mcp.serve import build_server
    from server.mcp.tools.dispatch import ToolRunner

    async def one() -> dict[str, Any]:
        runner = ToolRunner(STATE["config"], services=STATE["services"])
        try:
            async with Client(build_server(runner)) as client:
                result = await client.call_tool(tool, arguments)
        finally:
            runner.close()
        # kms answers every call with structured content (server.mcp.serve)
        return {"tool": tool, "isError": bool(result.is_error), "result": dict(result.structured_content or {})}

    return anyio.run(one)


def main(folder: str) -> None:
    on_fresh_thread(start)

    def step(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer: dict[str, Any] = on_fresh_thread(call, tool, arguments)
        print(json.dumps(answer, default=str), flush=True)
        return dict(answer["result"])

    created = step("kms_create", {"title": "Fresh thread note", "folder": folder, "content": "first line\n\n## Log\n"})
    note = created["noteId"]
    step("kms_append", {"noteId": note, "content": "appended from another thread"})
    step("kms_update_properties", {"noteId": note, "set": {"status": "draft"}})
    step("kms_insert_at", {"noteId": note, "content": "inserted", "position": {"afterHeading": "Log"}})
    version = step("kms_read", {"noteId": note})["version"]
    edits = [{"replace": {"old": "first line", "new": "edited"}}]
    step("kms_edit", {"noteId": note, "version": version, "edits": edits})
    step("kms_move", {"noteId": note, "folder": f"{folder}/moved"})
    step("kms_trash", {"noteId": note})
    on_fresh_thread(lambda: STATE["services"].close())


if __name__ == "__main__":
    main(sys.argv[1])
