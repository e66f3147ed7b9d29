"""The dashboard's test world, shared by the dashboard tests, snapshots and ``scripts/screenshots.py``.

``seed_fixed`` builds a small, fully deterministic world through the real write path
(``Writer``, ``server.writes.undo.revert``): fixed session ids, note ids derived from paths,
fixed timestamps, limiter clocks near a frozen "now". Snapshots can then compare
pixel-for-pixel across runs and machines.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import itertools
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

REPO = Path(__file__).resolve().parents[2]
SAMPLE_VAULT = REPO / "kmscli" / "sample_vault"

T0 = 1_767_261_600.0  # 2026-01-01 10:00:00 UTC
STEP = 37.0  # seconds between consecutive fixed invocation timestamps
SESSION_A = "s1a2b3c4d5e6f"  # launcher, live, wrote a bit of everything
SESSION_B = "s7e8d9c0b1a2f"  # server, live, hit its per-minute limit
SESSION_C = "s0ddba11cafe0"  # launcher, ended


@dataclass(frozen=True)
class Seeded:
    db_path: Path
    vault: Path
    now: float  # the frozen clock for the app
    ids: dict[str, int]  # story step -> invocation id


@contextlib.contextmanager
def fixed_note_ids() -> Iterator[None]:
    """Notes created while seeding get predictable ids instead of random ones."""
    import server.index.writer as writer

    counter = itertools.count(1)
    original = writer.new_note_id
    writer.new_note_id = lambda *_made_from: f"n{0xA00000000000 + next(counter):012x}"
    try:
        yield
    finally:
        writer.new_note_id = original


def _stable_ids(conn: Any) -> None:
    """Indexing order follows the file system; derive each note id from its path instead."""
    for rid, path in conn.execute("SELECT rid, path FROM notes").fetchall():
        conn.execute("UPDATE notes SET id = ? WHERE rid = ?", ("n" + hashlib.sha1(path.encode()).hexdigest()[:12], rid))


def seed_fixed(root: Path) -> Seeded:
    """A vault, three sessions and a dozen invocations (every status, a revert, reads)."""
    from server.activity.ratelimit import RateLimiter
    from server.activity.session_registry import end_session, start_session
    from server.errors import KmsError
    from server.index.indexer import index_vault
    from server.store.db import connect, write_tx
    from server.vault.registry import add_vault
    from server.writes.undo import revert
    from support.writes import Writer

    root.mkdir(parents=True, exist_ok=True)
    vault_dir = root / "vault"
    shutil.copytree(SAMPLE_VAULT, vault_dir)
    db_path = root / "kms.db"
    conn = connect(db_path)
    with fixed_note_ids():
        index_vault(conn, add_vault(conn, vault_dir, "sample"))
        with write_tx(conn):
            _stable_ids(conn)
        ids: dict[str, int] = {}
        clock = [T0]

        def limiter(per_minute: int, per_session: int) -> RateLimiter:
            return RateLimiter(per_minute, per_session, clock=lambda: clock[0])

        def step(name: str, call: Callable[[], dict[str, Any]], dt: float = STEP) -> None:
            clock[0] += dt
            try:
                ids[name] = call()["invocationId"]
            except KmsError:
                ids[name] = int(cast(int, conn.execute("SELECT max(id) FROM tool_invocations").fetchall()[0][0]))

        start_session(conn, kind="launcher", session_id=SESSION_C, pid=1, cwd="/work", now=T0)
        c = Writer(db_path, SESSION_C, limiter(10, 200), ["drafts", "inbox"])
        quick = conn.execute("SELECT id FROM notes WHERE path = 'inbox/Quick capture.md'").fetchall()[0][0]
        step("c_append", lambda: c.append(quick, "- Ask Priya about the postmortem template #todo"))
        step("c_bad_position", lambda: c.insert_at(quick, "x", {"nowhere": 1}))
        end_session(conn, SESSION_C, 0, now=T0 + 120)

        start_session(conn, kind="launcher", session_id=SESSION_A, pid=1, cwd="/work", now=T0 + 150)
        a = Writer(db_path, SESSION_A, limiter(10, 200), ["drafts", "inbox"])
        step(
            "a_create",
            lambda: a.create(
                "Agent scratch",
                "# Plan\n\n- read the outage notes\n- draft a summary\n\n# Findings\n",
                folder="drafts",
                tags=["agent"],
            ),
        )
        scratch = conn.execute("SELECT id FROM notes WHERE path = 'drafts/Agent scratch.md'").fetchall()[0][0]
        step(
            "a_insert",
            lambda: a.insert_at(
                scratch, "The login outage began with an expired refresh token cache.", {"afterHeading": "Findings"}
            ),
        )
        step("a_props", lambda: a.update_properties(quick, set={"status": "triaged"}))
        step("a_denied", lambda: a.create("Elsewhere", "x", folder="projects"))
        step("a_conflict", lambda: a.append(scratch, "stale", version="0" * 64))
        step("a_append", lambda: a.append(quick, "- Follow up: outage timeline review on Friday #todo"))

        start_session(conn, kind="server", session_id=SESSION_B, pid=1, cwd="/work", now=T0 + 400)
        b = Writer(db_path, SESSION_B, limiter(3, 50), ["drafts"])
        for i in range(1, 4):
            step(
                f"b_append{i}",
                functools.partial(
                    b.append, scratch, f"- finding {i}: see [[Login outage 2026-10]]", heading="Findings"
                ),
                dt=5,
            )
        step("b_limited", lambda: b.append(scratch, "- one too many"), dt=5)
        clock[0] += STEP
        ids["revert"] = revert.revert(conn, ids["c_append"])["invocationId"]

        last = max(ids.values())
        now = T0 + STEP * (last + 1)
        with write_tx(conn):
            conn.execute("UPDATE tool_invocations SET at = ? + id * ?", (T0, STEP))
            conn.execute("UPDATE vaults SET last_indexed_at = ?", (T0 - 3600,))
            # session B's three writes happened in the last minute: it is rate-limited right now
            conn.execute("UPDATE write_events SET at = ? WHERE session_id != ?", (T0, SESSION_B))
            conn.execute(
                "UPDATE write_events SET at = ? + rowid - (SELECT max(rowid) FROM write_events WHERE session_id = ?)"
                " WHERE session_id = ?",
                (now - 20, SESSION_B, SESSION_B),
            )
            conn.execute("UPDATE sessions SET last_seen_at = ? WHERE ended_at IS NULL", (now - 5,))
            for i, path in enumerate(("projects/Login outage 2026-10.md", "inbox/Quick capture.md", "Home.md")):
                nid = conn.execute("SELECT id FROM notes WHERE path = ?", (path,)).fetchall()[0][0]
                conn.execute(
                    "INSERT INTO note_reads VALUES (?, ?, ?, ?, ?)",
                    (nid, SESSION_A, 3 - i, T0 + 160 + i, T0 + 500 + 60 * i),
                )
    conn.close()
    return Seeded(db_path, vault_dir, now, ids)


async def wait_for(pilot: Any, cond: Callable[[], bool], timeout: float = 5.0, what: str = "") -> float:
    """Pump the app until ``cond()`` holds; return how long it took."""
    start = time.monotonic()
    while not cond():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout}s waiting for {what or cond}")
        await pilot.pause(0.02)
    return time.monotonic() - start


def settled(app: Any) -> bool:
    """First window, sessions, header and the detail of the highlighted row are all shown."""
    screen = app.dashboard
    pane = screen.query_one("#detail")
    detail, outside = pane.detail, pane.outside
    shown = (detail is not None and detail.invocation["id"] == screen.detail_id) or (
        outside is not None and f"o{outside.row['fid']}" == screen.detail_key
    )
    return bool(
        app.state.loaded
        and app.state.sessions_at
        and app.state.settings is not None
        and app.state.overview
        and not screen.feed.filling
        and (screen.feed.row_count == 0 or shown)
    )


def sync_wait(app: Any, cond: Callable[[Any], bool]) -> Callable[[Any], Any]:
    """A ``run_before`` for ``snap_compare``: wait for ``cond(app)``."""

    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: cond(app), what="the dashboard to settle")
        await pilot.pause()  # the messages that settled it are rendered too

    return run_before
