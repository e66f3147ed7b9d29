"""``kms mcp`` when the database cannot be used: every tool listed, every call answered with what is wrong.

An agent host that starts a server which exits at once shows the agent no tools at all, and the agent
cannot tell the person anything. So when the database is damaged or cannot be opened (``store/health``'s
``database`` or ``disk-full``), ``kms mcp`` still serves: ``tools/list`` gives every tool of the
registry (as a healthy server with every tier on would), and every call answers ``is_error`` with kind
``database``, the reason and what the person should run (``kms repair``, ``kms doctor``, or fix
``KMS_DB_PATH``). Nothing reads or writes the database meanwhile; the person restarts the agent's
session once it is repaired.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types

from server.errors import KmsError
from server.mcp.stdio import kms_stdio_server

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server


def answer(error: KmsError) -> KmsError:
    """The one answer of every call: typed ``database``, saying what is wrong and what the person should run."""
    fix = (
        ""
        if "kms repair" in error.message or "KMS_DB_PATH" in error.message
        else " Ask the person to run `kms doctor`."
    )
    return KmsError(
        "database",
        f"kms cannot use its database, so no tool works until the person fixes it: "
        f"{error.message}.{fix} Then start a new session.",
        cause=error.kind,
    )


def unavailable_server(error: KmsError, tools: Sequence[types.Tool], name: str = "kms", version: str = "0") -> Server:
    """An SDK server listing ``tools`` and answering every call with ``answer(error)``."""
    # deferred: the SDK's server after import_sdk_lean (serve.main)
    from mcp.server.lowlevel import Server

    reply = answer(error)
    text = json.dumps(reply.to_dict(), ensure_ascii=False)

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=list(tools))

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)], structured_content=reply.to_dict(), is_error=True
        )

    return Server(
        name, version=version, instructions=reply.message, on_list_tools=on_list_tools, on_call_tool=on_call_tool
    )


def serve_unavailable(error: KmsError, tools: Sequence[types.Tool], version: str = "0") -> int:
    """Serve ``unavailable_server`` over stdio until the host closes it; one line on stderr says why."""

    sys.stderr.write(f"kms mcp: the database cannot be used ({error.message}); every tool answers so\n")
    server = unavailable_server(error, tools, version=version)

    async def serve() -> None:
        async with kms_stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    try:
        anyio.run(serve)
    except KeyboardInterrupt:
        pass
    return 0
