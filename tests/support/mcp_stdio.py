"""A real ``python -m kmscli mcp`` subprocess spoken to over stdio, as an agent host runs it (for tests that
need a server in ANOTHER process: the dashboard and the CLI reach it only through the database)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the SDK is imported only when a test starts a server
    from mcp.client import Client


def server_env(db_path: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "KMS_DB_PATH": str(db_path),
        "KMS_CONFIG": str(tmp_path / "config.toml"),
        "KMS_ENABLED": "1",
        "KMS_AGENT_TOOLS_ENABLED": "1",
        "PYTHONIOENCODING": "utf-8",
        **extra,
    }


@asynccontextmanager
async def stdio_server(db_path: Path, tmp_path: Path, **extra: str) -> AsyncIterator[Client]:
    """``extra``: more ``KMS_*`` variables (``KMS_SESSION_ID`` names the session, so a test can steer it)."""
    from mcp.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "kmscli", "mcp"],
        env=server_env(db_path, tmp_path, **extra),
        cwd=str(tmp_path),
    )
    async with Client(params, read_timeout_seconds=60) as client:
        yield client
