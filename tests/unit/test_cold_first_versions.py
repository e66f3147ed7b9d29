"""Issue 42: a new vault's first versions are compressed after it is searchable, in one call on zstd's own
threads (``server.store.version_blobs.compress_many``), into the frames the worker processes used to make."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.writes import Env, make_env

from server.activity.note_history import find_line, pick, version_bytes
from server.index import cold
from server.index.indexer import index_vault
from server.index.records import PARALLEL_THRESHOLD
from server.store import version_blobs as blobs

SEED = b"a seed dictionary: the shared start of every note\n" * 40


@pytest.mark.parametrize("base", [None, SEED], ids=["alone", "seed"])
def test_compress_many_makes_the_frames_compress_makes(base: bytes | None) -> None:
    datas = [b"", b"x", *(b"# Note %d\n\nshared words of the vault\n" % i * (1 + i % 7) for i in range(50)), b""]
    frames = blobs.compress_many(datas, base)
    assert frames == [blobs.compress(d, base) for d in datas]
    assert [blobs.decompress(f, base, len(d)) for f, d in zip(frames, datas, strict=True)] == datas


@pytest.mark.parametrize("held", [True, False], ids=["held-to-phase-two", "compressed-by-workers"])
def test_every_first_version_of_a_cold_index_reads_back_as_its_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, held: bool
) -> None:
    """Both routes: a vault's bytes held until the second transaction, and a vault past ``RAW_BYTES`` (set
    to 1 byte here) whose bytes the worker processes compress."""
    if not held:
        monkeypatch.setattr(cold, "RAW_BYTES", 1)
    env: Env = make_env(tmp_path)
    count = PARALLEL_THRESHOLD + 50  # read by the worker processes, which send the bytes back as they are
    for i in range(count):
        text = (
            b"" if i == 7 else b"the same note, copied\n" if i in (8, 9) else b"# Note %d\n\nwords\n" % i * (i % 5 + 1)
        )
        (env.root / f"n{i:03}.md").write_bytes(text)
    index_vault(env.conn, env.vault)
    assert blobs.seed_of(env.conn, env.vault.id) is not None  # compressed against the new vault's seed
    assert env.conn.execute("SELECT count(*) FROM history_versions").fetchone() == (count,)
    copies = (
        "SELECT count(DISTINCT v.bid) FROM history_versions v JOIN history_notes h ON h.hid = v.hid"
        " WHERE h.path IN (?, ?)"
    )
    assert env.conn.execute(copies, ("n008.md", "n009.md")).fetchone() == (1,)  # stored once, by its hash
    for name in ("n007.md", "n008.md", "n009.md", "n000.md", "n123.md", f"n{count - 1:03}.md"):
        line = find_line(env.conn, name)
        assert version_bytes(env.conn, pick(env.conn, line)) == (env.root / name).read_bytes()
