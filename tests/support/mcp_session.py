"""The real MCP server (registry, dispatcher, adapter) behind a real in-memory SDK client."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path


@contextlib.asynccontextmanager
async def mcp_client(db_path: Path, **config: object) -> AsyncIterator[object]:
    from mcp.client import Client

    from server.mcp.serve import build_server
    from server.mcp.services import register_services
    from server.mcp.tools.base import ServerConfig
    from server.mcp.tools.dispatch import ToolRunner

    cfg = ServerConfig.from_env({"KMS_DB_PATH": str(db_path)}, watch=False, **config)
    runner = ToolRunner(cfg)
    register_services(runner)
    try:
        async with Client(build_server(runner)) as client:
            client.runner = runner  # type: ignore[attr-defined]
            yield client
    finally:
        runner.close()
        for service in runner.ctx.services.values():
            close = getattr(service, "close", None)
            if callable(close):
                close()
