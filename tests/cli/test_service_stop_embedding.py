"""A service stopped while it embeds a backlog in the background ends cleanly and promptly (exit 0).

The service loads the model once it answers and embeds every pending note on a background thread. A SIGTERM
in the middle of a long batch used to wait 10 s for the thread, give up, and let the interpreter finalise
under onnxruntime's running session: ``terminate called without an active exception``, SIGABRT, exit 134
(seen with a 2,000-note vault on a busy machine). The embedder now stops between two model runs.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import apsw
from support.embed_fixtures import find_model_dir
from support.service import Served, wait_for

from server.index.embed_pending import pending_count
from server.index.indexer import index_vault
from server.vault.registry import add_vault

# Eight short notes make the first background batch (the chunks it stores say the model runs); the next batch
# is eight long notes (hundreds of chunks each): it takes far more than the 10 s the service waits for its
# embedder, even on a quiet machine, while each model run inside it stays short.
SHORT, LONG, WORDS = 8, 8, 60_000


def short_notes(root: Path) -> Path:
    root.mkdir()
    for n in range(SHORT):
        (root / f"a short {n}.md").write_text(f"# Short {n}\n\nA few words on topic {n}.\n", encoding="utf-8")
    return root


def long_notes(root: Path) -> Path:
    for n in range(LONG):
        words = " ".join(f"topic{n}w{i % 997} alpha{i % 89} beta{(i * 7) % 131}" for i in range(WORDS // 3))
        paragraphs = "\n\n".join(words[i : i + 1500] for i in range(0, len(words), 1500))
        (root / f"b long {n}.md").write_text(f"# Long note {n}\n\n{paragraphs}\n", encoding="utf-8")
    return root


def embedded_chunks(conn: apsw.Connection) -> int:
    count = conn.execute("SELECT count(*) FROM chunks").fetchall()[0][0]
    assert isinstance(count, int)
    return count


def test_sigterm_while_embedding_a_backlog_exits_0_promptly(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    vault = add_vault(conn, short_notes(tmp_path / "vault"), "long")
    index_vault(conn, vault)  # the short notes first: the background embedder's first batch (by rid)
    long_notes(vault.root)
    index_vault(conn, vault)
    assert pending_count(conn) == SHORT + LONG
    served = Served.start(db_path, KMS_EMBED_ENABLED="1", KMS_EMBED_MODEL_DIR=str(find_model_dir()))
    try:
        # the short notes' batch stored: the model runs on the long notes' batch now
        wait_for(lambda: served.proc.poll() is None and embedded_chunks(conn) > 0, 90, "the first batch embedded")
        assert pending_count(conn) == LONG, "the long notes were embedded before the stop: the test proves nothing"
        started = time.monotonic()
        served.proc.send_signal(signal.SIGTERM)
        code, err = served.wait(timeout=60)
        took = time.monotonic() - started
    finally:
        served.kill()
    assert code == 0, f"kms serve exited {code} when stopped while embedding: {err[-1500:]}"
    assert "terminate called" not in err and "Fatal Python error" not in err, err[-1500:]
    assert took < 8.0, f"the stop waited {took:.1f} s for the embedder"
