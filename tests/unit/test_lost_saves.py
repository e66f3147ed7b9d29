"""kms never overwrites a version it did not read: agents append through the real write guard in
several processes while a person saves the same notes as editors do (atomic rename, truncate then
write, truncate then write in two chunks, and an editor holding an old buffer). Every one of the person's
saves survives (saves lost = 0; before a note read without settling had to stay unchanged for
``FORCED_QUIET_S``, a two-chunk save read between its chunks was lost in 5 of 8 runs, cascading to 44-176
saves; later one save in 557 whose editor stalled between its chunks past that window: kms now waits while
another process holds the note open for writing). The old-buffer saves really drop agent appends, and the
watcher's own checks, once settled, flag exactly those: every dropped append, no present one."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import apsw
from support.writes import make_env

from server.activity import overwrites
from server.index import watcher
from server.vault import files

WORKER = Path(__file__).parents[1] / "support" / "write_workers.py"


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True)


def result(p: subprocess.Popen) -> dict:
    out, _ = p.communicate(timeout=240)
    assert p.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


SAVES = "rename,truncate,chunks,stale"  # the editors' save modes, in turn (``write_workers.saver``)
MIN_SAVES = 100  # the person saves until this many, however loaded the machine (it saved 98 in 6 s under load)
SETTLE_S = 30.0  # how long the watcher may take to judge the notes' last versions once every writer stopped


class JudgedWatcher:
    """The watcher's own overwrites check (``Settled``, as ``kms mcp`` runs it), remembering the version of
    each note it last judged, so the test knows when the flags are settled."""

    def __init__(self) -> None:
        self.settled = overwrites.Settled()
        self.judged: dict[str, str] = {}

    def __call__(self, conn: apsw.Connection, vault: object, relpaths: list[str]) -> int:
        changed = self.settled(conn, vault, relpaths)  # type: ignore[arg-type]
        for rel in relpaths:
            found = conn.execute("SELECT content_hash FROM notes WHERE path = ?", (rel,)).fetchall()
            if found:
                self.judged[rel] = str(found[0][0])
        return changed


def test_no_save_of_the_person_is_lost_to_an_agent_write(tmp_path: Path) -> None:
    assert files._renameat2 is not None, "Linux with renameat2: the exchange is what closes the window"
    env = make_env(tmp_path)
    names = [f"shared{i}.md" for i in range(3)]
    ids = [env.note(n, f"# Shared {i}\n\nbody\n") for i, n in enumerate(names)]
    start = env.tmp / "go"
    stop = threading.Event()  # the watcher judges every save as it lands, as `kms mcp` and `kms watch` do
    judging = JudgedWatcher()
    watching = threading.Thread(
        target=watcher.watch_vaults, args=(env.db_path,), kwargs={"stop": stop, "after": judging}, daemon=True
    )
    watching.start()
    agents = [spawn("append", str(env.db_path), f"agent{k}", ids[k % 3], "120", f"A{k}", str(start)) for k in range(4)]
    person = spawn("saver", json.dumps([str(env.root / n) for n in names]), "6", str(start), SAVES, str(MIN_SAVES))
    start.touch()
    try:
        appended = [r for p in agents for r in result(p)["results"]]
        saved = result(person)["saved"]
        # the flags once the watcher has settled: its own checks have judged each note's last version
        deadline = time.monotonic() + SETTLE_S
        while time.monotonic() < deadline and any(
            judging.judged.get(n) != files.sha256_hex((env.root / n).read_bytes()) for n in names
        ):
            time.sleep(0.05)
    finally:
        stop.set()
        watching.join(10)
    unsettled = [n for n in names if judging.judged.get(n) != files.sha256_hex((env.root / n).read_bytes())]
    assert not unsettled, f"the watcher did not judge the last version of {unsettled} within {SETTLE_S} s"
    assert len(saved) >= MIN_SAVES, f"the person should have saved often while agents wrote (saved {len(saved)})"
    texts = [env.read(n) for n in names]
    found_p = {m for t in texts for m in re.findall(r"\{\{(P-\d+)\}\}", t)}
    lost = [m for m in saved if m not in found_p]
    kinds = SAVES.split(",")
    assert lost == [], f"{len(lost)} of the person's {len(saved)} saves were overwritten by kms: " + ", ".join(
        f"{m} ({kinds[(int(m[2:]) // len(names)) % len(kinds)]})" for m in lost
    )
    for t in texts:  # never applied twice, never a refused one
        markers = re.findall(r"<<(A\d+-\d+)>>", t)
        assert len(markers) == len(set(markers))
    refused = {m.strip("<>") for m, s in appended if s != "success"}
    assert not refused & {m for t in texts for m in re.findall(r"<<(A\d+-\d+)>>", t)}
    assert all(s in ("success", "conflict") for _m, s in appended)
    present = {m for t in texts for m in re.findall(r"<<(A\d+-\d+)>>", t)}
    flags = {
        re.findall(r"<<(A\d+-\d+)>>", str(text))[0]: at is not None
        for text, at in env.conn.execute(
            "SELECT inserted_text, overwritten_at FROM tool_invocations "
            "WHERE status = 'success' AND tool = 'kms_append'"
        )
    }
    dropped = set(flags) - present
    false_flags = sorted(m for m, flagged in flags.items() if flagged and m in present)
    missed = sorted(m for m, flagged in flags.items() if not flagged and m not in present)
    print(
        f"person saves: {len(saved)}, lost: {len(lost)}; agent appends: {len(flags)} succeeded, "
        f"{len(dropped)} dropped by a save, flagged: {sum(flags.values())}, false flags: {len(false_flags)}, "
        f"missed: {len(missed)}"
    )
    assert dropped, "the old-buffer saves should have dropped agent appends (else the flags are not exercised)"
    assert false_flags == [] and missed == []
