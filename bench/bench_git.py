"""Git mode benchmark (issue 41): what a commit per agent write unit adds to a write's answer at 10k notes.

The 10k-note vault (``genvault``) is a git work tree with every note committed; one session's guard
(``WriteService``, the real registry entry) appends a line to a note, alternating blocks of git mode ``off``
and ``commit`` on the same vault and database (the machine is shared: both modes see the same load). The
target: the commit adds ≤ 30 ms to the median append (``kms_append``'s answer includes the commit). Also
timed: the commit alone (``git_units.commit_files``) and a unit with the person's checkpoint first.

    python bench/bench_git.py [--notes 10000] [--rounds 6] [--per-round 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import time
from pathlib import Path

from common import OUT, fresh_db, percentiles, table, vault


def git(cwd: Path, *args: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=env)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-round", type=int, default=10)
    a = ap.parse_args()

    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault import git_units
    from server.vault.git import open_repo
    from server.vault.registry import add_vault, get_vault, set_git_mode

    src = vault(a.notes)
    root = OUT / f"git-vault-{a.notes}"
    if not (root / ".git").is_dir():
        shutil.rmtree(root, ignore_errors=True)
        shutil.copytree(src, root, ignore=shutil.ignore_patterns(".complete"))
        git(root, "init", "-q", "-b", "main")
        git(root, "config", "user.name", "Bench Person")
        git(root, "config", "user.email", "bench@example.org")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "the vault")
    db = fresh_db(f"git-{a.notes}.db")
    conn = connect(db)
    v = add_vault(conn, root, "bench")
    index_vault(conn, v)
    notes = [r[0] for r in conn.execute("SELECT path FROM notes ORDER BY path LIMIT 200")]
    w = _appender(db)
    samples: dict[str, list[float]] = {"off": [], "commit": []}
    k = 0
    for _round in range(a.rounds):
        for mode in ("off", "commit"):
            set_git_mode(conn, "bench", mode)
            for _ in range(a.per_round):
                note = notes[k % len(notes)]
                k += 1
                start = time.perf_counter()
                w(note, f"bench line {k}")
                samples[mode].append((time.perf_counter() - start) * 1000)
                git_units.flush(db)  # (the commit after the answer: not in the sample, not piling up either)
        git(root, "add", "-A")  # (the off rounds' appends: committed by the person between rounds)
        git(root, "commit", "-q", "-m", "the person's commit", "--allow-empty")
    off50, off95 = percentiles(samples["off"])
    on50, on95 = percentiles(samples["commit"])

    repo = open_repo(get_vault(conn, "bench").root)
    unit = git_units.Unit(0, "bench", "kms_append", "none", git_units.agent_identity("bench", "bench"))
    alone, checkpointed = [], []
    for i in range(a.rounds * a.per_round):
        rel = notes[i % len(notes)]
        before = (root / rel).read_bytes()
        after = before + f"\nalone {i}\n".encode()
        (root / rel).write_bytes(after)
        alone.append(
            _ms(lambda rel=rel, b=before, af=after: git_units.commit_files(repo, _net(repo, rel, b, af), unit))
        )
        person = after + b"\nthe person's edit\n"
        agent = person + b"\nthe agent's\n"
        (root / rel).write_bytes(agent)
        checkpointed.append(
            _ms(lambda rel=rel, p=person, ag=agent: git_units.commit_files(repo, _net(repo, rel, p, ag), unit))
        )
    al50, al95 = percentiles(alone)
    cp50, cp95 = percentiles(checkpointed)
    load = os.getloadavg()[0]
    table(
        f"git mode at {a.notes} notes ({len(samples['off'])} appends each way; "
        f"load {load:.1f} on {os.cpu_count()} cores)",
        [
            ("kms_append answer p50 ms", f"{on50:.1f}", f"{off50:.1f} (off)", f"+{on50 - off50:.1f}", "≤ +30 ms"),
            ("kms_append answer p95 ms", f"{on95:.1f}", f"{off95:.1f} (off)", f"+{on95 - off95:.1f}", ""),
            ("commit after it p50/p95 ms", f"{al50:.1f} / {al95:.1f}", "", "", ""),
            ("with checkpoint p50/p95 ms", f"{cp50:.1f} / {cp95:.1f}", "", "", ""),
        ],
    )


def _appender(db: Path):  # noqa: ANN202 - a closure
    """One session's real guard (rate limits lifted), calling ``kms_append`` through its registry entry."""
    from server.activity.agent_session import AgentSession
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.write_tools import KMS_APPEND
    from server.writes.guard import WriteService

    config = SessionConfig(
        db_path=db,
        config_path=OUT / "bench-config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=True,
        session_id="bench-git",
        per_minute=1_000_000,
        per_session=1_000_000,
        embed_enabled=False,
        watch=False,
    )
    guard = WriteService(AgentSession.open(config))
    return lambda note, text: guard.call(KMS_APPEND, {"noteId": note, "content": text})


def _net(repo, rel: str, before: bytes, after: bytes) -> dict:  # noqa: ANN001
    """What ``enqueue`` keeps in the answer (the blobs), timed with the commit here."""
    return {rel: (repo.write_blob(before), repo.write_blob(after))}


def _ms(fn: object) -> float:
    start = time.perf_counter()
    fn()  # type: ignore[operator]
    return (time.perf_counter() - start) * 1000


if __name__ == "__main__":
    main()
