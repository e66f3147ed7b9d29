"""Worker processes for the multi-process write tests (run as a script; prints one JSON line).

python write_workers.py acquire DB SESSION N PER_MINUTE PER_SESSION START_FILE
python write_workers.py append DB SESSION NOTE_ID COUNT TAG START_FILE
python write_workers.py person NOTE_PATH SECONDS START_FILE MODE LOCK_DIR
python write_workers.py loop DB SESSION NOTE_IDS_JSON
python write_workers.py saver NOTE_PATHS_JSON SECONDS START_FILE [KINDS [AT_LEAST]]
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the ``support`` package

from server.activity.ratelimit import RateLimiter  # noqa: E402
from server.errors import KmsError  # noqa: E402
from server.store.db import connect  # noqa: E402
from support.writes import Writer  # noqa: E402


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _wait(start_file: str) -> None:
    deadline = time.time() + 60
    while not os.path.exists(start_file) and time.time() < deadline:
        time.sleep(0.002)


def acquire(db: str, session: str, n: str, per_minute: str, per_session: str, start: str) -> dict:
    conn = connect(db)
    limiter = RateLimiter(int(per_minute), int(per_session))
    _wait(start)
    ok = limited = 0
    for _ in range(int(n)):
        try:
            limiter.acquire(conn, session)
            ok += 1
        except KmsError as e:
            assert e.kind == "rate-limited"
            limited += 1
    return {"ok": ok, "limited": limited}


def append(db: str, session: str, note_id: str, count: str, tag: str, start: str) -> dict:
    ws = Writer(db, session, RateLimiter(None, None))
    _wait(start)
    results = []
    for i in range(int(count)):
        marker = f"<<{tag}-{i}>>"
        try:
            ws.append(note_id, marker, separator="\n")
            results.append([marker, "success"])
        except KmsError as e:
            results.append([marker, e.kind])
    return {"results": results}


def person(path: str, seconds: str, start: str, mode: str, lock_dir: str) -> dict:
    """Rewrite the whole file as an editor does, keeping what it read except the first line.

    ``locked``: under kms's note lock (so the person's own read-modify-write can't lose an
    agent's append and every append is checkable); ``replace``: a lock-free editor that
    saves with write-temp + rename; ``truncate``: a lock-free editor that truncates and writes.
    """
    from server.store.locks import file_lock

    _wait(start)
    end = time.time() + float(seconds)
    n = 0
    real = os.path.realpath(path)
    while time.time() < end:
        ctx = file_lock(real, lock_dir) if mode == "locked" else contextlib.nullcontext()
        with ctx:
            with open(real, encoding="utf-8", newline="") as f:
                lines = f.read().split("\n")
            lines[0] = f"person edit {n}"
            data = "\n".join(lines)
            if mode == "replace":
                tmp = real + f".person{os.getpid()}"
                with open(tmp, "w", encoding="utf-8", newline="") as f:
                    f.write(data)
                os.replace(tmp, real)
            else:
                with open(real, "w", encoding="utf-8", newline="") as f:
                    f.write(data)
        n += 1
        time.sleep(0.005)
    return {"edits": n}


STALE_S = 0.05  # how long an editor holding an old buffer types, at most, waiting for an agent's append


def saver(paths: str, seconds: str, start: str, kinds: str = "rename,truncate,chunks", at_least: str = "0") -> dict:
    """A person saving beside the agents, as editors do, each save adding its own line ``{{P-n}}``
    to what it just read: atomic rename saves, truncate-then-write saves, saves in two chunks, in
    turn, over several notes. A ``stale`` save is an editor holding an old buffer: it adds its line to
    what it saved last in that note once an agent appended to it (``STALE_S`` at most), dropping the
    agents' appends since, and saves by rename. Saves for ``seconds`` and until ``at_least`` saves are made
    (a loaded machine saves fewer a second; at most ten times ``seconds``). Returns the markers saved, so the
    test can tell which were lost."""
    _wait(start)
    began = time.time()
    end, cap = began + float(seconds), began + 10 * float(seconds)
    notes = [os.path.realpath(p) for p in json.loads(paths)]
    buffers: dict[str, bytes] = {}  # what each note's editor saved last
    saved: list[str] = []
    n = 0
    while (time.time() < end or n < int(at_least)) and time.time() < cap:
        real = notes[n % len(notes)]
        kind = kinds.split(",")[(n // len(notes)) % len(kinds.split(","))]
        if kind == "stale" and real not in buffers:
            kind = "rename"
        if kind == "stale":
            typing = time.time() + STALE_S  # the person types in the old buffer until an agent appended
            while time.time() < typing and _read(real) == buffers[real]:
                time.sleep(0.002)
            data = buffers[real] + f"{{{{P-{n}}}}}\n".encode()
        else:
            with open(real, "rb") as f:
                data = f.read() + f"{{{{P-{n}}}}}\n".encode()
        if kind in ("rename", "stale"):
            tmp = real + f".person{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(data)
            os.replace(tmp, real)
        else:
            with open(real, "r+b") as f:
                f.truncate(0)
                if kind == "chunks":
                    f.write(data[: len(data) // 2])
                    f.flush()
                    time.sleep(0.002)
                    f.write(data[len(data) // 2 :])
                else:
                    f.write(data)
        buffers[real] = data  # an editor's buffer is what it saved
        saved.append(f"P-{n}")
        n += 1
        time.sleep(0.003)
    return {"saved": saved}


def loop(db: str, session: str, note_ids: str) -> dict:
    """Write forever (until killed): appends, inserts and property updates round-robin."""
    ws = Writer(db, session, RateLimiter(None, None))
    ids = json.loads(note_ids)
    i = 0
    while True:
        nid = ids[i % len(ids)]
        kind = i % 3
        if kind == 0:
            ws.append(nid, f"append {i} " + "x" * (i % 500))
        elif kind == 1:
            ws.insert_at(nid, f"insert {i}", {"afterHeading": "Log"})
        else:
            ws.update_properties(nid, {"counter": i, "tags": ["t", f"n{i % 7}"]})
        i += 1
        print(i, flush=True)


if __name__ == "__main__":
    cmd, *args = sys.argv[1:]
    workers: dict[str, Callable[..., dict]] = {
        "acquire": acquire,
        "append": append,
        "person": person,
        "loop": loop,
        "saver": saver,
    }
    out = workers[cmd](*args)
    print(json.dumps(out), flush=True)
