"""Temp files left by a killed writer (``.kms-*.tmp``): removed at the next write to that folder or
at the next index, never indexed; a live writer's fresh temp file is left alone."""

from __future__ import annotations

import os
import time
from pathlib import Path

from support.writes import Writer, make_env

from server.activity.ratelimit import RateLimiter
from server.vault import files


def leftover(folder: Path, name: str, age_s: float) -> Path:
    path = folder / name
    path.write_bytes(b"half a note")
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def test_the_next_write_to_the_folder_removes_old_leftovers(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.root / "inbox").mkdir()
    note_id = env.note("inbox/Log.md", "# Log\n")
    old = leftover(env.root / "inbox", ".kms-0123456789abcdef.tmp", 3600)
    fresh = leftover(env.root / "inbox", ".kms-fedcba9876543210.tmp", 1)  # a live writer's
    other = leftover(env.root / "inbox", ".kms-notours.tmp", 3600)  # not kms's name: kept
    elsewhere = leftover(env.root, ".kms-00000000000000aa.tmp", 3600)  # another folder: its own next write
    files._swept.clear()
    Writer(env.db_path, "s", RateLimiter(None, None)).append(note_id, "more")
    assert not old.exists() and fresh.exists() and other.exists() and elsewhere.exists()
    assert {p.name for p in (env.root / "inbox").iterdir()} == {"Log.md", fresh.name, other.name}


def test_the_next_index_removes_them_and_never_indexes_them(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    (env.root / "deep" / "er").mkdir(parents=True)
    env.note("deep/er/A.md", "# A\n")
    old = leftover(env.root / "deep" / "er", ".kms-0123456789abcdef.tmp", 3600)
    also_md = leftover(env.root, ".kms-aaaaaaaaaaaaaaaa.tmp", 3600)
    env.reindex()
    assert not old.exists() and not also_md.exists()
    paths = [r[0] for r in env.conn.execute("SELECT path FROM notes")]
    assert paths == ["deep/er/A.md"]


def test_a_folder_is_listed_at_most_once_per_interval(tmp_path: Path) -> None:
    """Writes stay cheap: a busy folder is not listed on every write."""
    folder = tmp_path / "f"
    folder.mkdir()
    files._swept.clear()
    t0 = time.time()
    assert files.sweep_leftovers(folder, now=t0) == 0
    path = leftover(folder, ".kms-0123456789abcdef.tmp", 3600)
    assert files.sweep_leftovers(folder, now=t0 + 100) == 0 and path.exists()  # listed 100 s ago
    assert files.sweep_leftovers(folder, now=t0 + files._SWEEP_EVERY_S + 1) == 1 and not path.exists()
