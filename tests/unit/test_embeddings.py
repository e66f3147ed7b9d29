"""The embedding model holder, model location/install, chunking and the embedding pipeline.

Everything runs the real int8 MiniLM from scripts/fetch_model.py on real APSW databases and
real vault files in tmp_path.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import apsw
import numpy as np
import pytest

from server.errors import KmsError
from server.index.embed import (
    DIM,
    BackgroundEmbedder,
    Embedder,
    ModelNotReady,
    embed_pending,
    embed_stats,
    install_model,
    installed_model_dir,
    locate_model,
    model_status,
    pending_count,
    prune_embeddings,
)
from server.index.embed.chunker import approx_tokens, chunk_note, sections
from server.index.embed.model import MAX_TOKENS, REQUIRED_FILES
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

REPO = Path(__file__).resolve().parents[2]


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def section(name: str, sentence: str, n: int = 3) -> str:
    return f"## {name}\n" + " ".join(f"{sentence} (point {i})." for i in range(n)) + "\n\n"


@pytest.fixture
def small_vault(tmp_path: Path) -> Path:
    root = tmp_path / "vault"
    write(
        root / "Garden.md",
        "# Garden\n\n"
        + section("Roses", "Prune roses in late winter above an outward bud")
        + section("Compost", "Turn the compost heap every fortnight to keep it aerobic")
        + section("Lawn", "Mow high in summer so the grass shades its own roots"),
    )
    write(
        root / "Cycling.md",
        section("Chain", "Clean and lube the chain every few hundred kilometres")
        + section("Brakes", "Replace rim brake pads before the grooves disappear"),
    )
    write(root / "Empty.md", "")
    return root


@pytest.fixture
def vault_conn(conn: apsw.Connection, small_vault: Path):
    vault = add_vault(conn, small_vault, "small")
    assert not index_vault(conn, vault).errors
    return conn, vault


def chunk_rows(conn: apsw.Connection, title: str) -> list[tuple]:
    return list(
        conn.execute(
            "SELECT c.ord, c.heading, c.hash FROM chunks c JOIN notes n ON n.rid = c.rid "
            "WHERE n.title = ? ORDER BY c.ord",
            (title,),
        )
    )


# --- fetching, locating, installing ------------------------------------------------------------


def test_fetch_model_script_verifies_the_pinned_files(embed_model_dir: Path) -> None:
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "fetch_model.py"), "--check"], capture_output=True, text=True
    )
    if embed_model_dir.resolve() == (REPO / ".cache/models/all-MiniLM-L6-v2").resolve():
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == str(embed_model_dir.resolve())
        assert time.perf_counter() - started < 10  # a verified dir is a fast no-op


def test_locate_prefers_setting_then_env_then_installed(
    tmp_path: Path, embed_model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KMS_EMBED_MODEL_DIR", raising=False)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "no-fastembed-cache"))
    nothing = locate_model()
    assert nothing["dir"] is None and nothing["source"] is None
    status = model_status()
    assert status["ready"] is False and "kms model install" in status["reason"]

    snapshot = tmp_path / "fe" / "models--Qdrant--all-MiniLM-L6-v2-onnx" / "snapshots" / "0123abc"
    shutil.copytree(embed_model_dir, snapshot)
    monkeypatch.setenv("FASTEMBED_CACHE_PATH", str(tmp_path / "fe"))
    assert locate_model() == {
        "dir": snapshot,
        "source": "fastembed-cache",
        "missing": [],
        "searched": [str(installed_model_dir()), str(tmp_path / "models" / "all-MiniLM-L6-v2"), "fastembed cache"],
    }  # the platform data dir's install, then one made beside the database before (issue 32), then fastembed's

    installed = install_model(embed_model_dir)
    assert installed == installed_model_dir().resolve()  # in the data dir, whichever database KMS_DB_PATH names
    assert not (tmp_path / "models").exists()
    assert locate_model()["source"] == "installed"
    monkeypatch.setenv("KMS_EMBED_MODEL_DIR", str(embed_model_dir))  # the settings' business, not the locator's
    assert locate_model()["source"] == "installed"
    assert locate_model(embed_model_dir) == {
        "dir": embed_model_dir,
        "source": "setting",
        "missing": [],
        "searched": [str(embed_model_dir)],
    }
    broken = tmp_path / "broken"
    broken.mkdir()
    loc = locate_model(broken)  # a configured dir is authoritative, even when incomplete
    assert loc["source"] == "setting" and loc["missing"] == list(REQUIRED_FILES)


def test_install_verifies_files_and_status_reports_the_model(tmp_path: Path, embed_model_dir: Path) -> None:
    partial = tmp_path / "partial"
    partial.mkdir()
    shutil.copyfile(embed_model_dir / "model.onnx", partial / "model.onnx")
    with pytest.raises(KmsError) as err:
        install_model(partial)
    assert err.value.kind == "invalid-input" and "tokenizer.json" in err.value.message
    with pytest.raises(KmsError):
        install_model(tmp_path / "does-not-exist")

    target = install_model(embed_model_dir, tmp_path / "dest")
    assert sorted(p.name for p in target.iterdir()) == sorted(REQUIRED_FILES)
    install_model(embed_model_dir, tmp_path / "dest")  # reinstall over an existing copy
    status = model_status(target, verify=True, load=True)
    assert status["ready"] and status["pinnedInt8"] and status["state"] == "ready"
    assert status["source"] == "setting" and status["dim"] == DIM and status["loadSeconds"] > 0


# --- the holder: never blocks, remembers failures ----------------------------------------------


def test_missing_model_is_a_state_not_an_error(tmp_path: Path) -> None:
    emb = Embedder(tmp_path / "nowhere")
    assert emb.load() is False
    assert emb.state == "missing" and "lacks model.onnx" in (emb.reason or "")
    for _ in range(3):  # each call answers from the state: no load is tried again
        with pytest.raises(ModelNotReady) as err:
            emb.embed(["hello"])
        assert err.value.state == "missing"
    assert emb.state == "missing"


def test_corrupt_model_fails_once_and_is_remembered(tmp_path: Path, embed_model_dir: Path) -> None:
    bad = tmp_path / "bad-model"
    bad.mkdir()
    for name in REQUIRED_FILES:
        shutil.copyfile(embed_model_dir / name, bad / name)
    (bad / "model.onnx").write_bytes(b"this is not an onnx graph" * 100)
    emb = Embedder(bad)
    assert emb.load() is False
    assert emb.state == "failed" and "could not load" in (emb.reason or "")
    first = emb.load_seconds
    assert emb.load() is False  # no retry: the failure is remembered (no second load timed)
    with pytest.raises(ModelNotReady):
        emb.embed_query("anything")
    assert emb.load_seconds == first
    shutil.copyfile(embed_model_dir / "model.onnx", bad / "model.onnx")
    emb.reset()  # only an explicit reset retries (e.g. after `kms model install`)
    assert emb.load() is True


def test_background_load_never_blocks_callers(embed_model_dir: Path) -> None:
    emb = Embedder(embed_model_dir)
    emb.start()
    assert emb.state == "loading"
    with pytest.raises(ModelNotReady) as err:  # answered while the load goes on, not after it
        emb.embed(["too early"])
    assert err.value.state == "loading"
    assert emb.wait(120) and emb.status()["state"] == "ready"
    assert emb.start() is None  # idempotent


def test_disabled_embedder_says_why() -> None:
    emb = Embedder(enabled=False)
    assert emb.load() is False and emb.state == "disabled" and "embed.enabled" in (emb.reason or "")


def test_vectors_are_normalised_and_batching_keeps_order(embedder: Embedder) -> None:
    texts = ["short", "a somewhat longer sentence about gardening and roses", "x " * 300, "medium text here"]
    one_by_one = np.stack([embedder.embed([t])[0] for t in texts])
    batched = embedder.embed_many(texts, max_batch=2)
    assert batched.shape == (4, DIM) and batched.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(batched, axis=1), 1.0, atol=1e-4)
    np.testing.assert_allclose(batched, one_by_one, atol=2e-3)  # padding does not change a vector
    assert embedder.embed_many([]).shape == (0, DIM)


# --- chunking ----------------------------------------------------------------------------------


def test_vectors_are_exactly_fastembeds(embedder: Embedder, embed_model_dir: Path) -> None:
    """kms runs the model itself (no fastembed import: ~35 MB less RSS) to the same numbers, stored
    vectors included: short, long (past the 512-token window), non-ASCII and empty texts, one by one
    and batched, and the token counts the chunker budgets with."""
    from fastembed import TextEmbedding

    texts = [
        "how do I retry a failed request",
        "Sourdough\nFeed it daily.",
        "Ünïcödé ☕ 日本語 naïve",
        "x",
        "",
        "word " * 700,
        "Pods get OOMKilled when the memory limit is too low. " * 12,
    ]
    theirs = TextEmbedding(
        "sentence-transformers/all-MiniLM-L6-v2",
        specific_model_path=str(embed_model_dir),
        threads=1,
        enable_cpu_mem_arena=False,
    )
    for batch in ([texts[0]], texts, texts[5:6], texts[2:4]):
        expected = np.asarray(list(theirs.embed(batch, batch_size=len(batch))), dtype=np.float32)
        assert np.abs(embedder.embed(batch) - expected).max() < 1e-5, batch
    # (fastembed's base model class does not declare the tokenizer its ONNX models carry)
    counts = [
        sum(e.attention_mask)
        for e in cast(Any, theirs.model).tokenizer.encode_batch(texts[:5], add_special_tokens=False)
    ]
    assert embedder.count_tokens(texts[:5]) == counts
    assert "fastembed" in sys.modules  # this test imported it; a server does not (below)


def test_loading_the_model_does_not_import_fastembed(embed_model_dir: Path) -> None:
    code = (
        "import sys; from server.index.embed import Embedder; e = Embedder(sys.argv[1]); "
        "assert e.load(), e.reason; e.embed_query('x'); print('fastembed' in sys.modules, 'PIL' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(embed_model_dir)], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert out.stdout.split() == ["False", "False"]


def test_sections_follow_headings_outside_code() -> None:
    body = (
        "Intro line.\n\n# Title\n\n## Setup\nInstall it.\n```bash\n# not a heading\necho hi\n```\n"
        "### Linux\nUse apt.\n## Empty\n## Usage\nRun it.\n"
    )
    assert sections(body, "Title") == [
        (None, "Intro line."),
        ("Setup", "Install it.\n```bash\n# not a heading\necho hi\n```"),
        ("Setup > Linux", "Use apt."),
        ("Usage", "Run it."),
    ]


def test_chunks_fit_the_window_and_split_on_paragraphs(embedder: Embedder) -> None:
    paragraphs = [
        f"Paragraph {i} explains a detail of the deployment pipeline and its rollback rules. " * 6 for i in range(8)
    ]
    body = "## Deploys\n" + "\n\n".join(p.strip() for p in paragraphs) + "\n## Tiny\nJust this.\n"
    chunks = chunk_note("Release handbook", body, embedder.count_tokens)
    assert len(chunks) > 3 and all(c.tokens + 2 <= MAX_TOKENS for c in chunks)
    assert [c.ord for c in chunks] == list(range(len(chunks)))
    deploy = [c for c in chunks if c.heading == "Deploys"]
    assert all(c.text.startswith("Release handbook\nDeploys\n") for c in deploy)
    joined = [p.strip() for c in deploy for p in c.content.split("\n\n")]
    assert joined == [p.strip() for p in paragraphs]  # split between paragraphs, never inside
    assert chunks[-1].heading == "Tiny" and chunks[-1].content == "Just this."


def test_oversized_paragraph_is_split_by_sentences_then_words(embedder: Embedder) -> None:
    one_sentence = "word " * 900
    sentences = " ".join(f"Sentence number {i} talks about caching layers and eviction." for i in range(80))
    for body in (one_sentence, sentences):
        chunks = chunk_note("T", body, embedder.count_tokens)
        assert len(chunks) > 1 and all(c.tokens + 2 <= MAX_TOKENS for c in chunks)
        assert " ".join(c.content for c in chunks).split() == body.split()


def test_empty_note_gets_a_title_chunk_and_hashes_are_content_keys() -> None:
    (only,) = chunk_note("Lonely title", "   \n", approx_tokens)
    assert only.content == "" and only.text == "Lonely title\n"
    a = chunk_note("A", "## S\nsame text", approx_tokens)[0]
    b = chunk_note("A", "intro\n## S\nsame text", approx_tokens)[1]
    c = chunk_note("B", "## S\nsame text", approx_tokens)[0]
    assert a.hash == b.hash and a.hash != c.hash  # the title is part of what is embedded


# --- the pipeline ------------------------------------------------------------------------------


def test_embed_stores_vectors_and_reuses_them(vault_conn, embedder: Embedder, small_vault: Path) -> None:
    conn, vault = vault_conn
    assert pending_count(conn) == 3
    first = embed_pending(conn, embedder)
    assert first.notes == 3 and first.pending == 0 and first.embedded == first.chunks == 6
    stats = embed_stats(conn)
    assert stats == {"notes": 3, "embeddedNotes": 3, "pendingNotes": 0, "chunks": 6, "vectors": 6}
    blob = next(conn.execute("SELECT vector FROM embeddings LIMIT 1"))[0]
    assert len(blob) == DIM * 4
    assert [h for _o, h, _x in chunk_rows(conn, "Garden")] == ["Roses", "Compost", "Lawn"]

    # Editing one section re-embeds exactly that chunk.
    before = chunk_rows(conn, "Garden")
    text = (small_vault / "Garden.md").read_text()
    write(small_vault / "Garden.md", text.replace("every fortnight", "every week"))
    reindex_file(conn, vault, "Garden.md")
    assert pending_count(conn) == 1
    edit = embed_pending(conn, embedder)
    assert (edit.notes, edit.embedded, edit.reused) == (1, 1, 2)
    after = chunk_rows(conn, "Garden")
    changed = [i for i, (b, a) in enumerate(zip(before, after, strict=True)) if b[2] != a[2]]
    assert changed == [1]

    # A full reindex changes nothing that is embedded; losing every chunk row reuses all vectors.
    index_vault(conn, vault, full=True)
    assert pending_count(conn) == 0
    conn.execute("DELETE FROM note_embed_state")
    conn.execute("DELETE FROM chunks")
    again = embed_pending(conn, embedder)
    assert again.notes == 3 and again.embedded == 0 and again.reused == 6

    # A vector no chunk uses any more is pruned; used ones stay.
    assert prune_embeddings(conn) == 1  # the old "every fortnight" chunk
    assert embed_stats(conn)["vectors"] == 6


def test_a_rename_reembeds_the_note_as_the_title_is_in_every_chunk(vault_conn, embedder, small_vault) -> None:
    conn, vault = vault_conn
    embed_pending(conn, embedder)
    (small_vault / "Cycling.md").rename(small_vault / "Bike care.md")
    index_vault(conn, vault)
    report = embed_pending(conn, embedder)
    assert report.notes == 1 and report.embedded == 2
    assert [h for _o, h, _x in chunk_rows(conn, "Bike care")] == ["Chain", "Brakes"]


def test_embedding_is_resumable_and_skips_hidden_notes(vault_conn, embedder: Embedder) -> None:
    from server.index.notes import set_hidden

    conn, _vault = vault_conn
    set_hidden(conn, "Empty", True)

    def should_stop() -> bool:  # once the first note is stored (it is asked inside a batch too)
        return bool(conn.execute("SELECT count(*) FROM note_embed_state").fetchall()[0][0])

    part = embed_pending(conn, embedder, batch_notes=1, should_stop=should_stop)
    assert part.stopped and part.notes == 1 and part.pending == 1
    rest = embed_pending(conn, embedder, batch_notes=1)
    assert rest.notes == 1 and rest.pending == 0
    assert not chunk_rows(conn, "Empty")  # hidden: never embedded
    set_hidden(conn, "Empty", False)
    assert pending_count(conn) == 1


def test_deleting_a_note_deletes_its_chunks(vault_conn, embedder: Embedder, small_vault: Path) -> None:
    conn, vault = vault_conn
    embed_pending(conn, embedder)
    (small_vault / "Garden.md").unlink()
    reindex_file(conn, vault, "Garden.md")
    assert embed_stats(conn)["chunks"] == 3
    assert prune_embeddings(conn) == 3


def test_embed_pending_fails_fast_without_a_model(vault_conn, tmp_path: Path) -> None:
    conn, _vault = vault_conn
    emb = Embedder(tmp_path / "none")
    emb.load()
    with pytest.raises(ModelNotReady):
        embed_pending(conn, emb)
    assert pending_count(conn) == 3


def test_background_embedder_has_its_own_connection(db_path: Path, vault_conn, embedder, small_vault) -> None:
    conn, vault = vault_conn
    bg = BackgroundEmbedder(db_path, embedder, batch_notes=2).start()  # woken by wake(), not by a timer
    try:
        assert bg.idle.wait(120), bg.last_error
        assert embed_stats(conn)["pendingNotes"] == 0
        write(small_vault / "New idea.md", section("Why", "Index notes so agents can ask questions"))
        reindex_file(conn, vault, "New idea.md")
        bg.wake()
        assert bg.idle.wait(120), bg.last_error
        assert [h for _o, h, _x in chunk_rows(conn, "New idea")] == ["Why"]
    finally:
        bg.stop()
    assert not bg._thread.is_alive()


def test_migration_creates_the_embedding_tables(tmp_path: Path) -> None:
    c = connect(tmp_path / "fresh.db")
    names = {r[0] for r in c.execute("SELECT name FROM sqlite_master")}
    assert {"chunks", "embeddings", "note_embed_state", "embed_generation"} <= names
    assert "m003_embeddings" in {r[0] for r in c.execute("SELECT name FROM _migrations")}
    c.close()


def test_loading_the_model_writes_no_onnxruntime_telemetry(tmp_path: Path, embed_model_dir: Path) -> None:
    """onnxruntime writes a device id and a telemetry store under ~/.cache/Microsoft on import unless told
    not to; a fresh process (it must not have imported onnxruntime yet) with its own HOME shows it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "ORT_"))}
    env["HOME"] = str(tmp_path)
    code = (
        "from server.index.embed.model import Embedder; import sys; "
        f"sys.exit(0 if Embedder({str(embed_model_dir)!r}).load() else 1)"
    )
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=REPO, timeout=120)
    assert not (tmp_path / ".cache" / "Microsoft").exists()
