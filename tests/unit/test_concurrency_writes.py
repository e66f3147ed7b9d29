"""Several processes writing one vault at once, a person editing, and kill -9 in mid-write."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support.sql import value
from support.writes import Env, make_env

from server.store.db import connect, scalar
from server.vault.parser import parse_note
from server.writes import operations
from server.writes.context import WriteContext, load_note

WORKER = Path(__file__).parents[1] / "support" / "write_workers.py"
MARKER = re.compile(r"<<(A\d+-\d+)>>")


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, str(WORKER), *args], stdout=subprocess.PIPE, text=True)


def _result(p: subprocess.Popen) -> dict:
    out, _ = p.communicate(timeout=240)
    assert p.returncode == 0, out
    return json.loads(out.strip().splitlines()[-1])


def _index_matches_files(env: Env) -> None:
    conn = connect(env.db_path)
    assert scalar(conn, "PRAGMA integrity_check") == "ok"
    for path, chash in conn.execute("SELECT path, content_hash FROM notes WHERE vault_id = ?", (env.vault.id,)):
        assert hashlib.sha256((env.root / path).read_bytes()).hexdigest() == chash, path


def _run_agents_and_person(env: Env, mode: str, agents: int = 3, per_agent: int = 30) -> tuple[str, list, dict]:
    nid = env.note("shared.md", "person edit -\n# Shared\n\nbody\n")
    start = env.tmp / f"go-{mode}"
    procs = [
        _spawn("append", str(env.db_path), f"agent{k}", nid, str(per_agent), f"A{k}", str(start)) for k in range(agents)
    ]
    person = _spawn("person", str(env.root / "shared.md"), "2.5", str(start), mode, str(env.db_path.parent / "locks"))
    start.touch()
    results = [r for p in procs for r in _result(p)["results"]]
    edits = _result(person)["edits"]
    assert edits > 10, "the person should have edited while agents wrote"
    final = env.read("shared.md")
    return final, results, {"edits": edits, "nid": nid}


def test_appends_exactly_once_with_a_person_editing(tmp_path: Path) -> None:
    """The person saves whole files between agent writes (as kms's lock allows): nothing is lost,
    every append is there exactly once or was answered ``conflict``."""
    env = make_env(tmp_path)
    final, results, info = _run_agents_and_person(env, "locked")
    found = MARKER.findall(final)
    assert len(found) == len(set(found)), "an append was applied twice"
    ok = {m.strip("<>") for m, status in results if status == "success"}
    refused = {m.strip("<>") for m, status in results if status != "success"}
    assert set(found) == ok and not (refused & set(found))
    assert all(status in ("success", "conflict") for _m, status in results)
    assert final.startswith(f"person edit {info['edits'] - 1}\n# Shared\n\nbody\n")
    rows = value(
        connect(env.db_path), "SELECT count(*) FROM tool_invocations WHERE tool = 'kms_append' AND status = 'success'"
    )
    assert rows == len(ok)
    env.reindex()
    _index_matches_files(env)


@pytest.mark.parametrize("mode", ["replace", "truncate"])
def test_lock_free_person_never_duplicates_or_tears(tmp_path: Path, mode: str) -> None:
    """An editor that ignores kms's lock can overwrite an agent's append it had not seen (its own
    lost update), but kms never applies an append twice, never writes a refused one, never tears."""
    env = make_env(tmp_path)
    final, results, _info = _run_agents_and_person(env, mode)
    found = MARKER.findall(final)
    assert len(found) == len(set(found))
    refused = {m.strip("<>") for m, status in results if status != "success"}
    assert not (refused & set(found))
    assert final.count("<<") == final.count(">>") == len(found)
    assert re.match(r"person edit \d+\n# Shared\n\nbody\n", final), "the note's content was lost"
    env.reindex()
    _index_matches_files(env)


LOG_NOTE = "---\ncounter: 0\ntags: [t]\n---\n# {name}\n\n## Log\n- start\n\n## End\nfin\n"


def _replay_states(tmp: Path, names: list[str], steps: int) -> dict[str, set[bytes]]:
    """Every state each note passes through when the loop worker's first ``steps`` writes are replayed."""
    env = make_env(tmp)
    ids = [env.note(f"{n}.md", LOG_NOTE.format(name=n)) for n in names]
    states = {n: {(env.root / f"{n}.md").read_bytes()} for n in names}
    for i in range(steps):
        nid = ids[i % len(ids)]
        note, vault = load_note(env.conn, nid)
        kind = i % 3
        ctx = WriteContext.for_person(env.conn)
        if kind == 0:
            operations.append(ctx, vault, note, content=f"append {i} " + "x" * (i % 500))
        elif kind == 1:
            operations.insert_at(ctx, vault, note, content=f"insert {i}", position={"afterHeading": "Log"})
        else:
            operations.update_properties(ctx, vault, note, set={"counter": i, "tags": ["t", f"n{i % 7}"]})
        name = names[i % len(names)]
        states[name].add((env.root / f"{name}.md").read_bytes())
    return states


def test_kill_during_writes_leaves_whole_notes_and_index_heals(tmp_path: Path) -> None:
    names = ["alpha", "beta", "gamma"]
    for round_ in range(3):
        env = make_env(tmp_path / f"r{round_}")
        ids = [env.note(f"{n}.md", LOG_NOTE.format(name=n)) for n in names]
        p = subprocess.Popen(
            [sys.executable, str(WORKER), "loop", str(env.db_path), "crashy", json.dumps(ids)],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert p.stdout is not None
        done = 0
        deadline = time.time() + 60
        while done < 20 + 15 * round_ and time.time() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            done = int(line)
        time.sleep(0.003 * round_)  # land the kill at different points of a write
        os.kill(p.pid, signal.SIGKILL)
        rest = p.communicate()[0].split()
        done = int(rest[-1]) if rest else done
        p.wait()

        states = _replay_states(tmp_path / f"replay{round_}", names, done + 2)
        for n in names:
            data = (env.root / f"{n}.md").read_bytes()
            assert data in states[n], f"{n}.md is not one of its valid states after kill -9"
            parsed = parse_note(data.decode("utf-8"), n)
            assert parsed.fm_error is None and parsed.frontmatter is not None and parsed.frontmatter["tags"][0] == "t"
        leftovers = [f for f in os.listdir(env.root) if not f.endswith(".md")]
        assert all(f.startswith(".kms-") and f.endswith(".tmp") for f in leftovers)
        conn = connect(env.db_path)
        assert scalar(conn, "PRAGMA integrity_check") == "ok"
        env.reindex()
        _index_matches_files(env)
