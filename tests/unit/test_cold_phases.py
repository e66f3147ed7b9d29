"""A new vault's first index in two transactions (issue 42, ``server.index.cold``): searchable after the
first, complete after the second; a process killed between them leaves a searchable vault that the next
index completes into the index an uninterrupted run leaves; saves made while the second is pending or
running (the watcher's reindex, an agent's write through the guard, a new note, a deleted one) are kept,
and the second transaction still completes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import apsw
from support.cold_index import add_killed_between_phases
from support.gen_vault import generate
from support.index_dump import digests, dump
from support.sql import value
from support.vaults import REPO
from support.writes import Writer

from server.activity.ratelimit import RateLimiter
from server.config.settings import set_value
from server.index import note_versions
from server.index.cold import incomplete
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.index.report import IndexReport
from server.store import kept_counts
from server.store.db import connect
from server.vault.registry import add_vault, get_vault

REFERENCE = REPO / "tests" / "data" / "index_identity.json"  # (test_index_identity.py's)


def _count(conn: apsw.Connection, sql: str, params: tuple = ()) -> int:
    n = value(conn, sql, params)
    assert isinstance(n, int)
    return n


def _hits(conn: apsw.Connection, word: str) -> list[str]:
    return [
        str(r[0])
        for r in conn.execute(
            "SELECT n.path FROM notes_fts f JOIN notes n ON n.rid = f.rowid WHERE notes_fts MATCH ?", (word,)
        )
    ]


def test_a_kill_between_the_phases_leaves_a_searchable_vault_the_next_index_completes_identically(
    tmp_path: Path,
) -> None:
    set_value("privacy.hide_tags", ["idea"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
    gen = generate(tmp_path / "gen", notes=450)
    db = tmp_path / "generated.db"
    add_killed_between_phases(db, gen, "gen")

    conn = connect(db)
    vault = get_vault(conn, "gen")
    assert incomplete(conn) == {vault.id: "gen"}
    assert _count(conn, "SELECT count(*) FROM notes") > 400
    last = sorted(p.relative_to(gen).as_posix() for p in gen.rglob("*.md"))[-1]
    assert last in _hits(conn, '"' + (gen / last).read_text(errors="replace").split()[-1].strip(".") + '"')
    for table in ("note_tags", "links", "note_keys", "kept_tags", "kept_folders", "history_versions"):
        assert _count(conn, f"SELECT count(*) FROM {table}") == 0, table

    report = index_vault(conn, vault)
    assert report.completed and incomplete(conn) == {}
    report = index_vault(conn, add_vault(conn, generate(tmp_path / "other", notes=60), "other"))
    assert report.added > 50 and report.searchable_seconds is not None
    reference = json.loads(REFERENCE.read_text())["generated"]
    got = digests(dump(conn, str(tmp_path)))
    assert {t: d for t, d in got.items() if reference.get(t) != d} == {}


def test_saves_during_the_second_phase_are_kept_and_the_phase_completes(tmp_path: Path) -> None:
    gen = generate(tmp_path / "gen", notes=450)
    db = tmp_path / "kms.db"
    conn = connect(db)
    vault = add_vault(conn, gen, "gen")
    watcher = connect(db)  # the watcher's own connection (another thread or process)
    agent = Writer(db, "agent-session", RateLimiter(None, None))
    plain = sorted(p.relative_to(gen).as_posix() for p in gen.rglob("*.md") if "/" not in p.relative_to(gen).as_posix())
    person_saves, agent_appends, removed = plain[0], plain[1], plain[2]
    seen: dict[str, object] = {}
    thread_errors: list[BaseException] = []

    def agent_writes(note_id: str) -> None:
        try:
            seen["appended"] = agent.append(note_id, "agent line #agenttag [[Shared 2]] quokkaword")
        except BaseException as exc:  # reported to the test below
            thread_errors.append(exc)

    def between(report: IndexReport) -> None:
        seen["searchable"] = incomplete(watcher)
        (gen / person_saves).write_text("the person saved this #savedtag [[Shared 1]] zebraword\n")
        assert reindex_file(watcher, vault, person_saves)  # the watcher's reindex of the person's save
        (gen / "new during.md").write_text("[[Shared 3]] #newtag made while the links were built\n")
        assert reindex_file(watcher, vault, "new during.md")
        (gen / removed).unlink()
        assert reindex_file(watcher, vault, removed) is None
        note_id = watcher.execute("SELECT id FROM notes WHERE path = ?", (agent_appends,)).fetchall()[0][0]
        writing = threading.Thread(target=agent_writes, args=(note_id,))  # while the second phase runs or waits
        writing.start()
        seen["thread"] = writing

    report = index_vault(conn, vault, on_searchable=between)
    writing = seen["thread"]
    assert isinstance(writing, threading.Thread)
    writing.join(60)
    assert not thread_errors and seen["appended"]
    assert seen["searchable"] == {vault.id: "gen"} and incomplete(conn) == {}
    assert report.searchable_seconds is not None and report.added > 400

    assert _hits(conn, "zebraword") == [person_saves] and _hits(conn, "quokkaword") == [agent_appends]
    tags = {
        r[0]: r[1]
        for r in conn.execute(
            "SELECT n.path, group_concat(t.tag) FROM note_tags t JOIN notes n USING (rid) GROUP BY n.path"
        )
    }
    assert tags[person_saves] == "savedtag" and "agenttag" in tags[agent_appends] and tags["new during.md"] == "newtag"
    assert _count(conn, "SELECT count(*) FROM notes WHERE path = ?", (removed,)) == 0
    for table, select in kept_counts.RECOUNT.items():
        assert sorted(conn.execute(f"SELECT * FROM {table}").fetchall()) == sorted(conn.execute(select).fetchall())
    assert note_versions.missing(conn, vault.id) == []  # every note has a first version once complete

    # the index is the one a cold index of the files as they are now gives (history aside: the saved
    # notes' first versions are their writers', not the index's)
    fresh = connect(tmp_path / "fresh.db")
    index_vault(fresh, add_vault(fresh, gen, "gen"))
    now, then = dump(conn, str(tmp_path)), dump(fresh, str(tmp_path))
    for table in ("note_tags", "note_keys", "links", "headings", "note_props", "kept_folders", "kept_tags"):
        assert now[table] == then[table], table
    for table in ("kept_unresolved", "kept_backlinks", "notes_fts (instances)", "attachments"):
        assert now[table] == then[table], table
