"""Shared fixtures: real files in tmp_path, a real APSW database on disk, and the embedding fixtures.
Helpers live in ``tests/support`` (importable as ``support``: ``pythonpath`` in pyproject.toml).

Every test runs with ``KMS_DB_PATH`` and ``KMS_CONFIG`` pointing into its own tmp_path, ``HOME`` in
it too and no ``XDG_*`` variable, so nothing touches (or depends on) the developer's own database,
settings or agent hosts' config files, whatever their shell sets.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.vaults import SAMPLE_VAULT

pytest_plugins = ["support.embed_fixtures"]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    db = tmp_path / "kms.db"
    for var in [v for v in os.environ if v.startswith("XDG_")]:
        monkeypatch.delenv(var)
    home = tmp_path_factory.mktemp("home")  # beside tmp_path, not in it: tests list what they made there
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KMS_DB_PATH", str(db))
    monkeypatch.setenv("KMS_CONFIG", str(tmp_path / "config.toml"))
    monkeypatch.setenv("KMS_EMBED_DOWNLOAD", "0")  # never reach for a model hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # `kms claude` keeps its own `kms mcp` unless a test asks for the service (which it then stops itself)
    monkeypatch.setenv("KMS_SERVICE_USE", "0")
    for var in (
        "KMS_ENABLED",
        "KMS_AGENT_TOOLS_ENABLED",
        "KMS_AGENT_WRITE_TOOLS_ENABLED",
        "KMS_SESSION_ID",
        "KMS_AGENT_EDIT_TOOLS_ENABLED",
        "KMS_AGENT_ORGANIZE_TOOLS_ENABLED",
        "KMS_WRITE_MAX_FILES_PER_CALL",
        "KMS_WRITE_ALLOWLIST",
        "KMS_WRITE_PER_MINUTE",
        "KMS_WRITE_PER_SESSION",
        "KMS_WRITE_APPROVAL",
        "KMS_WRITE_APPROVAL_LINES",
        "KMS_WRITE_APPROVAL_TIMEOUT",
        "KMS_WRITE_APPROVAL_CHANNEL",
    ):
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
    from server.store.db import connect

    c = connect(db_path)
    yield c
    c.close()


@pytest.fixture
def indexed(conn: apsw.Connection, vault_dir: Path) -> apsw.Connection:
    """The sample vault registered and indexed."""
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    vault = add_vault(conn, vault_dir, "sample")
    report = index_vault(conn, vault)
    assert report.added > 20 and not report.errors
    return conn
