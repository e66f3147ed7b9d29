"""Shared fixtures: real files in tmp_path, a real APSW database on disk, the real MCP server.

Every test runs with ``KMS_DB_PATH`` and ``KMS_CONFIG`` pointing into its own tmp_path, so
nothing touches the developer's own database or settings.
"""

from __future__ import annotations

import contextlib
import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import apsw
import pytest

REPO = Path(__file__).resolve().parent.parent
SAMPLE_VAULT = REPO / "server" / "sample_vault"
sys.path.insert(0, str(Path(__file__).parent))  # tests/support importable as `support`


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "kms.db"
    monkeypatch.setenv("KMS_DB_PATH", str(db))
    monkeypatch.setenv("KMS_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("KMS_EMBED_DOWNLOAD", "0")  # never reach for a model hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for var in ("KMS_ENABLED", "KMS_AGENT_TOOLS_ENABLED", "KMS_AGENT_WRITE_TOOLS_ENABLED", "KMS_SESSION_ID",
                "KMS_WRITE_ALLOWLIST", "KMS_WRITE_PER_MINUTE", "KMS_WRITE_PER_SESSION"):
        monkeypatch.delenv(var, raising=False)
    return db


@pytest.fixture
def db_path(isolated_env: Path) -> Path:
    return isolated_env


@pytest.fixture
def vault_dir(tmp_path: Path) -> Path:
    """A fresh copy of the packaged sample vault."""
    dest = tmp_path / "vault"
    shutil.copytree(SAMPLE_VAULT, dest)
    return dest


@pytest.fixture
def conn(db_path: Path) -> Iterator[apsw.Connection]:
    from server.db import connect

    c = connect(db_path)
    yield c
    c.close()


@pytest.fixture
def indexed(conn: apsw.Connection, vault_dir: Path) -> apsw.Connection:
    """The sample vault registered and indexed."""
    from server.indexer import index_vault
    from server.vaults import add_vault

    vault = add_vault(conn, vault_dir, "sample")
    report = index_vault(conn, vault)
    assert report.added > 20 and not report.errors
    return conn


def note_id(conn: apsw.Connection, title: str) -> str:
    row = conn.execute("SELECT id FROM notes WHERE title = ?", (title,)).fetchall()
    assert row, f"no note titled {title!r}"
    return row[0][0]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    return path


@contextlib.asynccontextmanager
async def mcp_client(db_path: Path, **config: object) -> AsyncIterator[object]:
    """The real MCP server (registry, dispatcher, adapter) behind a real in-memory SDK client."""
    from mcp.client import Client

    from server.mcp_server import build_server
    from server.mcp_session import register_services
    from server.tools.base import ServerConfig
    from server.tools.dispatch import ToolRunner

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
