"""One seam from a write to the index, one recorder for the person's writes (issue 43).

A write point says what it wrote (``reindex.note``); the guard and the person's writes index it once, when the
operation returns, in the call's one commit, before its provenance row (``reindex.flush``). These tests hold
the house to that: the context's walk for ``kms_append`` stays short, nothing in ``server/writes`` but the
seam reaches the indexer, the person's writes record through ``person.person_write`` only, a person's
revert puts its index rows and its provenance row in one commit, and a unit of several files
(``multifile.apply_plans``) is indexed the same way: after its operation, under the lock it took.
"""

from __future__ import annotations

import ast
from functools import partial
from pathlib import Path

import apsw
import pytest
from support.context_walk import walk
from support.sql import value
from support.writes import Env, Writer, make_env, write_service

from server.activity.ratelimit import RateLimiter
from server.mcp.tools.write_tools import WRITE_TOOLS
from server.store.db import connect, shared_commit
from server.writes import organize, reindex
from server.writes.context import WriteContext, load_note
from server.writes.guard import WriteService
from server.writes.undo.restore import restore
from server.writes.undo.revert import revert

WRITES = Path(__file__).resolve().parents[2] / "server" / "writes"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def _counted(commits: list[int]) -> bool:
    """A commit hook that counts the commits (and lets each one go ahead)."""
    commits.append(1)
    return False


def _imports(path: Path) -> list[tuple[str, bool]]:
    """(module imported, at the module's top level) for every import in ``path``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append((node.module, id(node) in top))
        elif isinstance(node, ast.Import):
            out.extend((a.name, id(node) in top) for a in node.names)
    return out


def test_kms_append_context_crosses_at_most_twelve_rooms(env: Env) -> None:
    """Issue 43's walk (``tests/support/context_walk.py``): 19 rooms crossed and 15 climbs back before the
    seam (the reindex called from deep inside ``cas``), at most 12 and 9 now."""
    nid = env.note("n.md", "# N\n\nfirst\n")
    guard = write_service(env.db_path, "walk")
    spec = next(s for s in WRITE_TOOLS if s.name == "kms_append")
    guard.call(spec, {"noteId": nid, "content": "warm-up", "idempotencyKey": "one"})  # (imports, caches)
    args = {"noteId": nid, "content": "traced", "idempotencyKey": "two"}
    seen, answer = walk(WriteContext, lambda: WriteService.run(guard, spec, args))
    assert answer["noteId"] == nid and env.read("n.md").endswith("traced\n")
    assert value(env.conn, "SELECT content_hash FROM notes WHERE id = ?", (nid,)) == answer["version"]
    assert len(seen.entries) <= 12, seen.entries
    assert seen.climbs <= 9, seen.entries


def test_only_the_seam_reaches_the_indexer() -> None:
    """No write module but ``reindex`` imports the indexer (the whole-vault one or the one-file one,
    ``server.index.incremental``), and none imports the index's records or the indexer inside a function
    ("not at import: the dashboard imports this module" is gone)."""
    indexers = ("server.index.indexer", "server.index.incremental")
    for path in sorted(WRITES.rglob("*.py")):
        for module, at_top in _imports(path):
            if module in indexers:
                assert path.name == "reindex.py", f"{path.name} reaches the indexer past the seam"
            if module in (*indexers, "server.index.records"):
                assert at_top, f"{path.name} imports {module} inside a function"


def test_the_persons_writes_record_through_one_recorder() -> None:
    """``record_call`` is called by the guard (an agent's call) and ``person.person_write`` only: a revert, a
    restore, a trash restore and a session undo's trash do not record by hand."""
    callers = set()
    for path in sorted(WRITES.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "record_call":
                callers.add(path.name)
    assert callers == {"guard.py", "person.py"}, callers


def test_a_persons_revert_indexes_and_records_in_one_commit(env: Env) -> None:
    """The note's new row and the revert's provenance row are one commit: no moment where the index shows the
    reverted note and no row says who did it (or the other way round)."""
    nid = env.note("n.md", "# N\n\nfirst\n")
    out = Writer(env.db_path, "agent", RateLimiter(None, None)).append(nid, "second")
    commits: list[int] = []
    env.conn.set_commit_hook(partial(_counted, commits))
    try:
        res = revert(env.conn, out["invocationId"])
    finally:
        env.conn.set_commit_hook(None)
    assert env.read("n.md") == "# N\n\nfirst\n"
    row = value(env.conn, "SELECT hash_after FROM tool_invocations WHERE id = ?", (res["invocationId"],))
    assert value(env.conn, "SELECT content_hash FROM notes WHERE id = ?", (nid,)) == row
    assert len(commits) == 1, commits


def test_a_persons_restore_of_a_deleted_note_gives_its_id_back_in_one_commit(env: Env) -> None:
    """A restore that creates the note again: the answer carries the note id the index gave it (filled in
    once the operation returned), and the index and the row are one commit."""
    env.note("gone.md", "# Gone\n\nkept words\n")
    (env.root / "gone.md").unlink()
    env.reindex()
    commits: list[int] = []
    env.conn.set_commit_hook(partial(_counted, commits))
    try:
        res = restore(env.conn, "gone.md", vault="v")
    finally:
        env.conn.set_commit_hook(None)
    assert env.read("gone.md") == "# Gone\n\nkept words\n"
    assert res["noteId"] and value(env.conn, "SELECT path FROM notes WHERE id = ?", (res["noteId"],)) == "gone.md"
    assert value(env.conn, "SELECT note_id FROM tool_invocations WHERE id = ?", (res["invocationId"],)) == res["noteId"]
    assert len(commits) == 1, commits


def test_a_unit_is_indexed_after_its_operation_under_the_lock_it_took(env: Env) -> None:
    """A rename (a unit: the note moves, a linking note is rewritten) says what it wrote; its rows are written by
    ``reindex.flush`` once the operation returned, not inside it. Meanwhile the database's write lock taken
    before its first file change is still held, so no other writer (the watcher) indexes the moved file
    before its row has moved with it; after the flush the note keeps its id at its new path, and the linking
    note's row is the rewritten one."""
    nid = env.note("old.md", "# Old\n\nbody\n")
    env.note("linker.md", "see [[old]]\n")
    ctx = WriteContext.for_person(env.conn, index_after=[])
    other = connect(env.db_path)
    other.set_busy_timeout(0)
    try:
        with shared_commit(env.conn):
            note, vault = load_note(env.conn, nid)
            done = organize.rename(ctx, vault, note, title="New", keep_alias=False)
            assert (env.root / "New.md").exists() and env.read("linker.md") == "see [[New]]\n"
            assert value(env.conn, "SELECT path FROM notes WHERE id = ?", (nid,)) == "old.md"  # not indexed yet
            assert [type(item) for item in ctx.index_after or []] == [reindex.Unit]
            with pytest.raises(apsw.BusyError):  # the unit's write lock, held until the call's commit
                other.execute("BEGIN IMMEDIATE")
            reindex.flush(ctx)
        assert value(env.conn, "SELECT path FROM notes WHERE id = ?", (nid,)) == "New.md"
        linker_hash = value(env.conn, "SELECT content_hash FROM notes WHERE path = 'linker.md'")
        assert linker_hash == next(f.hash_after for f in done.change.files if f.path == "linker.md")  # type: ignore[union-attr]
        other.execute("BEGIN IMMEDIATE")  # (the commit let it go)
        other.execute("ROLLBACK")
    finally:
        other.close()
