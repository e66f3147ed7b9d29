"""kms never overwrites a version it did not read: agents append through the real write guard in
several processes while a person saves the same notes as editors do (atomic rename, truncate then
write, truncate then write in two chunks). Every one of the person's saves survives (saves lost = 0;
before a note read without settling had to stay unchanged for ``FORCED_QUIET_S``, a two-chunk save
read between its chunks was lost in 5 of 8 runs, cascading to 44-176 saves; later one save in 557 whose editor
stalled between its chunks past that window: kms now waits while another process holds the note open for
writing). The overwritten flag, once settled, is on exactly the agent appends a person's save dropped."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

from support.writes import make_env

from server.activity import overwrites
from server.index import watcher
from server.index.indexer import reindex_file
from server.vault import files

WORKER = Path(__file__).parents[1] / "support" / "write_workers.py"


def spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True)


def result(p: subprocess.Popen) -> dict:
    out, _ = p.communicate(timeout=240)
    assert p.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def test_no_save_of_the_person_is_lost_to_an_agent_write(tmp_path: Path) -> None:
    assert files._renameat2 is not None, "Linux with renameat2: the exchange is what closes the window"
    env = make_env(tmp_path)
    names = [f"shared{i}.md" for i in range(3)]
    ids = [env.note(n, f"# Shared {i}\n\nbody\n") for i, n in enumerate(names)]
    start = env.tmp / "go"
    stop = threading.Event()  # the watcher judges every save as it lands, as `kms mcp` and `kms watch` do
    watching = threading.Thread(
        target=watcher.watch_vaults, args=(env.db_path,), kwargs={"stop": stop, "after": overwrites.check}, daemon=True
    )
    watching.start()
    agents = [spawn("append", str(env.db_path), f"agent{k}", ids[k % 3], "120", f"A{k}", str(start)) for k in range(4)]
    person = spawn("saver", json.dumps([str(env.root / n) for n in names]), "5", str(start), "rename,truncate,chunks")
    start.touch()
    try:
        appended = [r for p in agents for r in result(p)["results"]]
        saved = result(person)["saved"]
    finally:
        stop.set()
        watching.join(10)
    assert len(saved) > 100, f"the person should have saved often while agents wrote (saved {len(saved)})"
    texts = [env.read(n) for n in names]
    found_p = {m for t in texts for m in re.findall(r"\{\{(P-\d+)\}\}", t)}
    lost = [m for m in saved if m not in found_p]
    print(
        f"person saves: {len(saved)}, lost: {len(lost)}; agent appends answered success: "
        f"{sum(1 for _m, s in appended if s == 'success')}"
    )
    assert lost == [], f"{len(lost)} of the person's {len(saved)} saves were overwritten by kms"
    for t in texts:  # never applied twice, never a refused one
        markers = re.findall(r"<<(A\d+-\d+)>>", t)
        assert len(markers) == len(set(markers))
    refused = {m.strip("<>") for m, s in appended if s != "success"}
    assert not refused & {m for t in texts for m in re.findall(r"<<(A\d+-\d+)>>", t)}
    assert all(s in ("success", "conflict") for _m, s in appended)
    # the overwritten flag once the watcher has settled (its last look, then one more, as its next event
    # would): exactly the agent appends a person's save dropped
    for n in names:
        reindex_file(env.conn, env.vault, n)
    overwrites.check(env.conn, env.vault, names)
    present = {m for t in texts for m in re.findall(r"<<(A\d+-\d+)>>", t)}
    flags = {
        re.findall(r"<<(A\d+-\d+)>>", str(text))[0]: at is not None
        for text, at in env.conn.execute(
            "SELECT inserted_text, overwritten_at FROM tool_invocations "
            "WHERE status = 'success' AND tool = 'kms_append'"
        )
    }
    false_flags = sorted(m for m, flagged in flags.items() if flagged and m in present)
    missed = sorted(m for m, flagged in flags.items() if not flagged and m not in present)
    print(
        f"agent appends dropped by a save: {len(set(flags) - present)}, "
        f"false flags: {len(false_flags)}, missed: {len(missed)}"
    )
    assert false_flags == [] and missed == []
