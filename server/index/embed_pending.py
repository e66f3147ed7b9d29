"""Which notes wait for their embeddings and where the model's files are, without the embedding
stack (numpy and onnxruntime are slow to import, and the ``server.index.embed`` package loads them).

``kms index`` asks this after every run: only when something is pending and the model is there
does it import the pipeline and load the model, so a no-change ``kms index`` costs one count
query. ``server.index.embed.model`` re-exports these names.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import apsw

from server.store.db import data_dir, default_db_path

MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_DIRNAME = "all-MiniLM-L6-v2"
REQUIRED_FILES = (
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
)
# fastembed's hub cache layouts for this model (current snapshot layout, then the legacy tarball one).
_FASTEMBED_CACHE_GLOBS = ("models--Qdrant--all-MiniLM-L6-v2-onnx/snapshots/*", "fast-all-MiniLM-L6-v2")

PENDING_COUNT = """
SELECT count(*) FROM notes n LEFT JOIN note_embed_state s ON s.rid = n.rid
WHERE n.hidden_at IS NULL
  AND (s.rid IS NULL OR s.content_hash != n.content_hash OR s.title != n.title OR s.model != ?)
"""


def pending_count(conn: apsw.Connection) -> int:
    """Visible notes whose current text (or title, or the model) has no embeddings yet."""
    return int(next(conn.execute(PENDING_COUNT, (MODEL_NAME,)))[0])


def missing_files(model_dir: str | Path) -> list[str]:
    """The required files absent from ``model_dir`` (all of them when it is not a directory)."""
    d = Path(model_dir)
    return [name for name in REQUIRED_FILES if not (d / name).is_file()]


def models_root() -> Path:
    """``<kms data dir>/models``: the platform data dir, whichever database ``KMS_DB_PATH`` names, so a model
    installed once is found by every database (issue 32: it was beside the database, "not ready" for another)."""

    return data_dir() / "models"


def installed_model_dir() -> Path:
    """Where ``kms model install`` puts the model."""
    return models_root() / MODEL_DIRNAME


def beside_database_dir() -> Path:
    """Where ``kms model install`` put the model before: beside the database (still looked at)."""

    return default_db_path().parent / "models" / MODEL_DIRNAME


def fastembed_cache_dirs() -> list[Path]:
    """Complete copies of this model in fastembed's cache (same rule as fastembed, no import)."""
    root = Path(os.environ.get("FASTEMBED_CACHE_PATH") or Path(tempfile.gettempdir()) / "fastembed_cache")
    found: list[Path] = []
    for pattern in _FASTEMBED_CACHE_GLOBS:
        found.extend(p for p in sorted(root.glob(pattern)) if p.is_dir() and not missing_files(p))
    return found


def locate_model(model_dir: str | Path | None = None) -> dict[str, Any]:
    """Resolve the model dir: ``{"dir", "source", "missing", "searched"}``.

    An explicitly configured dir is authoritative: when it is incomplete the answer is that dir
    with its ``missing`` files, not a silent fall-through to some other copy of the model.
    ``source`` is ``setting``, ``installed``, ``fastembed-cache`` or None (not found).
    """
    if model_dir:
        d = Path(model_dir).expanduser()
        return {"dir": d, "source": "setting", "missing": missing_files(d), "searched": [str(d)]}
    searched: list[str] = []
    for installed in dict.fromkeys((installed_model_dir(), beside_database_dir())):
        searched.append(str(installed))
        if not missing_files(installed):
            return {"dir": installed, "source": "installed", "missing": [], "searched": searched}
    cached = fastembed_cache_dirs()
    searched.append("fastembed cache")
    if cached:
        return {"dir": cached[-1], "source": "fastembed-cache", "missing": [], "searched": searched}
    return {"dir": None, "source": None, "missing": list(REQUIRED_FILES), "searched": searched}
