"""Hook benchmark (issue 26): the wall time of a whole ``kms hook`` process, as Claude Code runs it (a new
``python -E -P -m kmscli hook EVENT --contract FILE`` per event, the event's JSON on stdin), on the generated
10k-note vault.

- ``session-start``: the start brief (kms_start's orientation within its budget); the target is a p95 of
  300 ms;
- ``user-prompt-submit`` and ``post-tool-use`` (a record each); ``stop`` (the record and the Stop rule);
- ``session-end``: the session note of a session that read 50 notes and searched 5 times, written the first
  time, then again with nothing new (not written);
- baseline: the interpreter alone (``python -E -P -c pass``) and ``python -E -P -m kmscli --version``.

Usage: python bench/bench_hooks.py [--notes N] [--runs N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping

from common import HERE, fresh_db, percentiles, table, vault


def ms(samples: list[float]) -> tuple[str, float]:
    p50, p95 = percentiles(samples)
    return f"{p50 * 1000:.0f} / {p95 * 1000:.0f} ms", p95


def run(args: argparse.Namespace) -> None:
    root = vault(args.notes)
    db = fresh_db("hooks.db")
    from server.activity.reads import ReadTracker
    from server.activity.session_registry import start_session
    from server.config.session_contract import SessionConfig
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    session = SessionConfig(
        db_path=db,
        config_path=HERE / "out" / "bench-config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=False,
        session_id="sbenchhooks1",
        project=str(HERE),
        embed_enabled=False,
    )
    contract = HERE / "out" / "hooks-session.json"
    contract.write_text(json.dumps(session.to_env()))
    start_session(conn, session_id=session.session_id, kind="launcher", project=str(HERE))
    tracker = ReadTracker(db, session.session_id)
    tracker.record([r[0] for r in conn.execute("SELECT id FROM notes ORDER BY rid LIMIT 50")])
    for q in ("database migration", "api design", "retry policy", "team offsite", "budget"):
        tracker.record_search("kms_search", q)
    tracker.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMS_")}
    hook = [sys.executable, "-E", "-P", "-m", "kmscli", "hook"]
    host = {"session_id": "bench-host", "cwd": str(HERE)}

    def once(argv: list[str], event: Mapping[str, object] | None = None) -> tuple[float, str]:
        start = time.perf_counter()
        done = subprocess.run(
            argv, input=json.dumps(event or {}).encode(), env=env, capture_output=True, check=False, timeout=120
        )
        took = time.perf_counter() - start
        assert done.returncode == 0, done.stderr
        return took, done.stdout.decode()

    def series(argv: list[str], event: Mapping[str, object] | None = None) -> list[float]:
        once(argv, event)  # warm the page cache
        return [once(argv, event)[0] for _ in range(args.runs)]

    rows = []
    base = series([sys.executable, "-E", "-P", "-c", "pass"])
    rows.append(("python -E -P -c pass", ms(base)[0], "", "", "baseline"))
    rows.append(("kms --version", ms(series([sys.executable, "-E", "-P", "-m", "kmscli", "--version"]))[0], "", "", ""))
    start_event = {**host, "hook_event_name": "SessionStart", "source": "startup"}
    _took, out = once([*hook, "session-start", f"--contract={contract}"], start_event)
    brief = json.loads(out)["hookSpecificOutput"]["additionalContext"]
    text, p95 = ms(series([*hook, "session-start", f"--contract={contract}"], start_event))
    rows.append(("session-start (the brief)", text, ms(base)[0], "", f"p95 <= 300 ms: {'yes' if p95 <= 0.3 else 'NO'}"))
    for name, event in (
        ("user-prompt-submit", {**host, "hook_event_name": "UserPromptSubmit", "prompt": "hello"}),
        (
            "post-tool-use",
            {
                **host,
                "hook_event_name": "PostToolUse",
                "tool_name": "Edit",
                "tool_input": {"file_path": str(root / "x.md")},
            },
        ),
        ("stop", {**host, "hook_event_name": "Stop", "last_assistant_message": "done", "stop_hook_active": False}),
    ):
        rows.append((name, ms(series([*hook, name, f"--contract={contract}"], event))[0], "", "", ""))
    end = {**host, "hook_event_name": "SessionEnd", "reason": "other"}
    first, _ = once([*hook, "session-end", f"--contract={contract}"], end)
    rows.append(("session-end, first note", f"{first * 1000:.0f} ms (once)", "", "", ""))
    rows.append(
        ("session-end, up to date", ms(series([*hook, "session-end", f"--contract={contract}"], end))[0], "", "", "")
    )
    notes = conn.execute("SELECT count(*) FROM notes").fetchall()[0][0]
    table(f"kms hook, whole process, p50 / p95 of {args.runs} runs ({notes} notes)", rows)
    print(f"\nthe brief: {len(brief.encode())} bytes, ~{(len(brief.encode()) + 3) // 4} tokens")
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    run(parser.parse_args())
