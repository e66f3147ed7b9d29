"""Writes while a local process swaps a vault folder for a symlink to a folder outside the vault:
every path component is opened without following links, so no interleaving places a note or a
temporary file outside the vault, and every refusal is a typed error."""

from __future__ import annotations

import contextlib
import functools
import os
import threading
from collections.abc import Callable
from pathlib import Path

from support.writes import Writer, make_env, snapshot

from server.activity.ratelimit import RateLimiter
from server.errors import KmsError


def swapper(folder: Path, outside: Path, stop: threading.Event, swaps: list[int]) -> None:
    """Swap ``folder`` for a link to ``outside`` and back, as fast as it can, the real folder staying in
    place a fifth of a millisecond each time (else whether any write at all gets through would depend on
    thread scheduling). kms may make a new folder of that name while the link is gone: it is moved aside
    (it stays in the vault)."""
    moved = folder.with_name(folder.name + ".real")
    while not stop.is_set():
        for step in (lambda: os.rename(folder, moved), lambda: os.symlink(outside, folder)):
            with contextlib.suppress(OSError):
                step()
        with contextlib.suppress(OSError):
            if folder.is_symlink():
                os.unlink(folder)
            elif folder.is_dir():
                os.rename(folder, folder.with_name(f"{folder.name}.made-{swaps[0]}"))
        with contextlib.suppress(OSError):
            os.rename(moved, folder)
        swaps[0] += 1
        stop.wait(0.0002)


def test_no_interleaving_places_a_file_outside_the_vault(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    outside = tmp_path / "outside"
    outside.mkdir()
    (env.root / "inbox").mkdir()
    note_id = env.note("inbox/Log.md", "# Log\n")
    writer = Writer(env.db_path, "racer", RateLimiter(None, None), None)
    stop, swaps = threading.Event(), [0]
    t = threading.Thread(target=swapper, args=(env.root / "inbox", outside, stop, swaps), daemon=True)
    t.start()
    answers: list[dict] = []
    errors: list[KmsError] = []

    def attempt(call: Callable[[], dict]) -> None:
        try:
            answers.append(call())
        except KmsError as e:  # typed; any other exception fails the test
            errors.append(e)

    try:
        for i in range(400):
            attempt(functools.partial(writer.create, f"Race {i}", "text", folder="inbox"))
            if i % 4 == 0:
                attempt(functools.partial(writer.append, note_id, f"line {i}"))
    finally:
        stop.set()
        t.join()
    assert swaps[0] > 50  # the race really ran
    assert snapshot(outside) == {}  # 0 notes and 0 temporary files outside the vault
    assert all(e.kind in ("conflict", "invalid-input", "not-found") for e in errors), [e.to_dict() for e in errors[:5]]
    assert not any("Errno" in e.message for e in errors)
    created = [a for a in answers if a.get("path", "").startswith("inbox/Race")]
    assert created  # most calls still work
    in_vault = {p.name for p in env.root.rglob("Race *.md")}  # a folder kms made may have been moved aside
    missing = [a["path"] for a in created if a["path"].rpartition("/")[2] not in in_vault]
    assert not missing, missing[:5]
    assert not list(env.root.rglob(".kms-*.tmp"))
