"""Shared fixtures: real files in tmp_path, a real APSW database on disk, and the embedding fixtures.
Helpers live in ``tests/support`` (importable as ``support``: ``pythonpath`` in pyproject.toml).

The suite is hermetic: the whole session, and then every test, gets its own HOME, XDG folders,
``KMS_CONFIG``, ``KMS_DB_PATH`` and service port, and no other ``KMS_*`` variable of the caller's, so
nothing touches (or depends on) the developer's own database, settings, running service or agent hosts'
config files, whatever their shell sets. ``scripts/test.sh`` runs the suite with a hostile HOME to prove it.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest
from support.net import free_port
from support.vaults import SAMPLE_VAULT

pytest_plugins = ["support.embed_fixtures"]


def _hermetic(monkeypatch: pytest.MonkeyPatch, root: Path) -> None:
    """Point every place kms (or a library under it) could read the caller's settings from into ``root``.

    Every ``KMS_*`` and ``XDG_*`` variable the caller set is dropped, whatever its name, so a setting added
    tomorrow cannot leak in either; HOME is fresh, and so are the XDG folders, which then default to HOME's
    (a test that sets HOME for a host's config finds it where the host would); the service port is a free
    one, so a service the person runs on the default port is never reached."""
    for var in [v for v in os.environ if v.startswith(("XDG_", "KMS_"))]:
        monkeypatch.delenv(var)
    home = root / "home"  # and so its XDG folders: with no XDG_* variable they are HOME's .config, .cache...
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("KMS_DB_PATH", str(root / "kms.db"))
    monkeypatch.setenv("KMS_CONFIG", str(root / "config.toml"))
    monkeypatch.setenv("KMS_SERVICE_PORT", str(free_port()))
    monkeypatch.setenv("KMS_EMBED_DOWNLOAD", "0")  # never reach for a model hub
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    # `kms claude` keeps its own `kms mcp` unless a test asks for the service (which it then stops itself)
    monkeypatch.setenv("KMS_SERVICE_USE", "0")


@pytest.fixture(scope="session", autouse=True)
def hermetic_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The same isolation for the whole session, so module- and session-scoped fixtures (which run before
    any test's own ``isolated_env``) never see the caller's HOME, settings or database either."""
    root = tmp_path_factory.mktemp("session-env")
    with pytest.MonkeyPatch.context() as monkeypatch:
        _hermetic(monkeypatch, root)
        yield root


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Each test's own HOME (beside tmp_path, not in it: tests list what they made there), XDG folders,
    settings file, database and service port."""
    root = tmp_path_factory.mktemp("env")
    _hermetic(monkeypatch, root)
    db = tmp_path / "kms.db"
    monkeypatch.setenv("KMS_DB_PATH", str(db))
    monkeypatch.setenv("KMS_CONFIG", str(tmp_path / "config.toml"))
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
