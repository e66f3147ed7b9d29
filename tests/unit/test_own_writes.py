"""kms's own unasked writes happen only where ``sync.own_writes_here`` is on, and nothing of one machine is
ever written into the vault: the whole tree is checked after a run of every kind of write."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from support.sql import value
from support.writes import Env, Writer, make_env

from server.activity.ratelimit import RateLimiter
from server.activity.reads import ReadTracker
from server.activity.session_registry import start_session
from server.config.session_contract import SessionConfig
from server.index import conflicts
from server.index.indexer import index_vault
from server.mcp.tools import REGISTRY
from server.mcp.tools.base import WriteSpec
from server.writes.capture import capture
from server.writes.conflict_resolve import resolve_conflict

SPECS = {s.name: s for s in REGISTRY if isinstance(s, WriteSpec)}


def _session(env: Env, sid: str) -> SessionConfig:
    start_session(env.conn, session_id=sid, kind="launcher", project="/work/p", now=1_700_000_000)
    tracker = ReadTracker(env.db_path, sid)
    tracker.record([str(value(env.conn, "SELECT id FROM notes LIMIT 1"))])
    tracker.close()
    return SessionConfig(
        db_path=env.db_path,
        config_path=env.tmp / "config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=False,
        session_id=sid,
        watch=False,
    )


def test_the_session_note_is_written_only_where_own_writes_are_on(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    env.note("projects/alpha.md", "# Alpha\n")
    config = _session(env, "s1")
    config.config_path.write_text("[sync]\nown_writes_here = false\n", encoding="utf-8")
    answer = capture(config, "SessionEnd")
    assert answer["written"] is False and "sync.own_writes_here is off" in answer["reason"]
    assert not (env.root / "kms-sessions").exists()
    config.config_path.write_text("[sync]\nown_writes_here = true\n", encoding="utf-8")
    assert capture(dataclasses.replace(config), "SessionEnd")["written"] is True
    assert len(list((env.root / "kms-sessions").glob("*.md"))) == 1


def test_nothing_machine_local_lands_in_the_vault(tmp_path: Path) -> None:
    """Every write kind kms has (an agent's create, append, properties, rename, trash, remember; kms's own
    session note; the person's conflict resolution), then the whole vault tree: notes and the trash only."""
    env = make_env(tmp_path)
    nid = env.note("projects/alpha.md", "# Alpha\n")
    (env.root / "projects" / "alpha.sync-conflict-20261201-101500-ABCDEFG.md").write_text("# Alpha\nother\n")
    index_vault(env.conn, env.vault)
    agent = Writer(env.db_path, "agent-1", RateLimiter(None, None))
    made = agent.create("Beta", "beta text", folder="projects")
    agent.append(made["noteId"], "more")
    agent.update_properties(made["noteId"], {"status": "draft"})
    agent.guard.call(SPECS["kms_rename"], {"noteId": made["noteId"], "title": "Gamma"})
    agent.call("kms_remember", about="person", text="likes short notes")
    other = agent.create("To trash", "bye")
    agent.guard.call(SPECS["kms_trash"], {"noteId": other["noteId"]})
    capture(_session(env, "s2"), "SessionEnd")
    resolve_conflict(env.conn, conflicts.open_conflicts(env.conn)[0]["id"], "both")
    assert nid
    found: list[str] = []
    for folder, dirs, files in os.walk(env.root):
        rel = os.path.relpath(folder, env.root)
        found += [os.path.normpath(os.path.join(rel, f)) for f in files]
        found += [os.path.normpath(os.path.join(rel, d)) + "/" for d in dirs]
    odd = [p for p in found if not (p.endswith((".md", "/")))]
    assert odd == [], f"not a note: {odd}"  # no lock, journal, temp file, database or state of this machine
    assert not [p for p in found if os.path.basename(p.rstrip("/")).startswith(".kms")]
    top = sorted(p for p in found if "/" not in p.rstrip("/"))
    assert top == [".trash/", "kms-memory/", "kms-sessions/", "projects/"]
