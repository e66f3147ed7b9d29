"""``kms index`` keeps the semantic index in step: it embeds what changed when the model is installed
(``--no-embed`` skips), says how to get a model when none is, and never loads one when nothing waits."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from support.cli import kms, ok, said
from support.sql import value
from support.vaults import write

from server.store.db import connect


def _setup(tmp_path: Path) -> Path:
    from server.vault.registry import add_vault

    root = tmp_path / "v"
    write(root / "a.md", "# A\n\n## Kettle\n\nDescale with citric acid.\n")
    write(root / "b.md", "# B\n\nA dry chain needs lube.\n")
    conn = connect(tmp_path / "kms.db")
    add_vault(conn, root, "v")
    conn.close()
    return root


def _embedded(tmp_path: Path) -> int:
    conn = connect(tmp_path / "kms.db")
    try:
        return int(value(conn, "SELECT count(*) FROM note_embed_state"))
    finally:
        conn.close()


def _use_model(model_dir: Path) -> None:
    from server.config.settings import set_value

    set_value("embed.model_dir", str(model_dir), path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)


def test_index_embeds_changed_notes_when_the_model_is_installed(tmp_path: Path, embed_model_dir: Path) -> None:
    root = _setup(tmp_path)
    _use_model(embed_model_dir)
    first = said(ok(kms("index")).stdout)
    assert "+2 new" in first and "embedded" in first and "of 2 notes" in first
    assert _embedded(tmp_path) == 2
    # nothing changed: nothing to embed, and the model is not even loaded (a broken one would say so)
    broken = tmp_path / "broken-model"
    shutil.copytree(embed_model_dir, broken)
    (broken / "model.onnx").write_bytes(b"\0" * 4096)
    _use_model(broken)
    again = ok(kms("index"))
    assert "embedded" not in said(again.stdout) and "warning" not in said(again.stderr) + said(again.stdout)
    # a change with a model that will not load: indexed all the same, embedding is a warning, exit 0
    write(root / "c.md", "# C\n\nNew note.\n")
    warned = ok(kms("index"))
    assert "+1 new" in said(warned.stdout) and "notes not embedded" in said(warned.stderr)
    _use_model(embed_model_dir)
    skipped = ok(kms("index", "--no-embed"))
    assert "embedded" not in said(skipped.stdout) and _embedded(tmp_path) == 2
    assert "of 1 notes" in said(ok(kms("index")).stdout) and _embedded(tmp_path) == 3


def test_index_without_a_model_says_how_to_get_one(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "empty-cache"))
    _setup(tmp_path)
    out = ok(kms("index"))
    assert "+2 new" in said(out.stdout)
    assert "2 notes not embedded" in said(out.stdout) and "kms model download" in said(out.stdout)
    assert _embedded(tmp_path) == 0
    quiet = ok(kms("index", "--no-embed"))
    assert "not embedded" not in said(quiet.stdout)


def test_index_with_nothing_to_embed_loads_no_embedding_stack(tmp_path: Path, embed_model_dir: Path) -> None:
    """The no-change ``kms index`` stays fast: the pending count and the model's files are looked up
    without numpy or onnxruntime, with or without a model installed; nothing is parsed, so no Markdown
    parser is loaded, and nothing is read, so no progress bar is."""
    import subprocess
    import sys

    _setup(tmp_path)
    _use_model(embed_model_dir)
    ok(kms("index"))  # everything embedded now
    code = (
        "import sys\nMODULES = ('numpy', 'onnxruntime', 'pyromark', 'rich.progress')\n"
        "from kmscli.main import app\ntry:\n    app(['index'])\nexcept SystemExit as e:\n"
        "    assert not e.code, e.code\nprint(*(m in sys.modules for m in MODULES))\n"
    )
    for model in (str(embed_model_dir), str(tmp_path / "no-model")):
        _use_model(Path(model))
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert out.stdout.split()[-4:] == ["False"] * 4, out.stdout + out.stderr
