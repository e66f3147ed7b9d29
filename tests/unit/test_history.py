"""Note history (issue 28): every writer kind leaves a version, told with who made it, and restore brings
any kept version back byte for byte, through the write guard as the person (recorded, revertible)."""

from __future__ import annotations

import os
from pathlib import Path

import apsw
import pytest
from support.outside import agent_tool, someone_else
from support.sql import tuples, value
from support.writes import Env, Writer, make_env

from server.activity.note_history import find_line, pick, version_bytes, versions
from server.errors import KmsError
from server.index import note_versions
from server.index.incremental import LinkWork, reindex_file
from server.index.indexer import index_vault
from server.index.watcher import apply_changes
from server.store import version_blobs as blobs
from server.store.db import write_tx
from server.writes.undo.restore import preview_restore, restore
from server.writes.undo.revert import revert

V1 = b"# Plan\r\n\r\nfirst line\r\nsecond line\r\n"  # CRLF kept byte for byte
V2 = V1 + b"third line\r\n"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def _history(env: Env, ref: str) -> list[dict]:
    return versions(env.conn, find_line(env.conn, ref))


def _restore_bytes(env: Env, ref: str, number: int) -> dict:
    plan = preview_restore(env.conn, ref, number=number)
    return restore(env.conn, ref, number=number, expect=plan["expect"])


def test_a_kms_call_is_told_with_its_session_and_call_and_restore_undoes_it_byte_for_byte(env: Env) -> None:
    note_id = env.note("plan.md", V1)
    done = Writer(env.db_path, "s-agent").append(note_id, "added by the agent")
    rows = _history(env, note_id)
    assert [r["version"] for r in rows] == [2, 1]
    assert rows[0]["who"] == {
        "by": "agent",
        "how": "kms_append",
        "sessionId": "s-agent",
        "invocationId": done["invocationId"],
    }
    assert rows[0]["how"] == "kms" and rows[1]["who"]["by"] == "outside kms"
    out = _restore_bytes(env, note_id, 1)
    assert (env.root / "plan.md").read_bytes() == V1
    newest = _history(env, note_id)[0]
    assert newest["who"]["by"] == "person" and newest["who"]["how"] == "restore"
    assert newest["who"]["invocationId"] == out["invocationId"]
    revert(env.conn, out["invocationId"])  # the restore is itself revertible
    assert (env.root / "plan.md").read_bytes().endswith(b"added by the agent\r\n")


def test_the_persons_revert_is_a_version_by_the_person(env: Env) -> None:
    note_id = env.note("plan.md", V1)
    done = Writer(env.db_path, "s1").append(note_id, "x")
    back = revert(env.conn, done["invocationId"])
    rows = _history(env, note_id)
    assert rows[0]["who"]["by"] == "person" and rows[0]["who"]["how"] == "revert"
    assert rows[0]["who"]["invocationId"] == back["invocationId"]
    assert version_bytes(env.conn, pick(env.conn, find_line(env.conn, note_id), number=rows[0]["version"])) == V1


def test_an_outside_rm_is_kept_and_the_note_comes_back_by_its_old_path_or_id(env: Env) -> None:
    note_id = env.note("notes/plan.md", V1)
    (env.root / "notes/plan.md").write_bytes(V2)
    reindex_file(env.conn, env.vault, "notes/plan.md")  # the watcher saw the save
    os.unlink(env.root / "notes/plan.md")
    apply_changes(env.conn, [env.vault], {str(env.root / "notes/plan.md")})
    rows = _history(env, "notes/plan.md")
    assert [r["how"] for r in rows] == ["deleted", "watch", "watch"]
    assert rows[0]["who"]["by"] == "outside kms"
    out = _restore_bytes(env, note_id, 2)  # by its old id
    assert (env.root / "notes/plan.md").read_bytes() == V2
    assert out["restoredVersion"] == 2
    os.unlink(env.root / "notes/plan.md")
    apply_changes(env.conn, [env.vault], {str(env.root / "notes/plan.md")})
    _restore_bytes(env, "notes/plan.md", 1)  # by its old path
    assert (env.root / "notes/plan.md").read_bytes() == V1
    assert len({r["path"] for r in _history(env, note_id)}) == 1  # one line all along


def test_an_outside_rename_keeps_one_history(env: Env) -> None:
    note_id = env.note("a.md", V1)
    (env.root / "a.md").write_bytes(V2)
    reindex_file(env.conn, env.vault, "a.md")
    os.rename(env.root / "a.md", env.root / "b.md")
    apply_changes(env.conn, [env.vault], {str(env.root / "a.md"), str(env.root / "b.md")})
    rows = _history(env, "b.md")
    assert [(r["how"], r["path"]) for r in rows] == [("moved", "b.md"), ("watch", "a.md"), ("watch", "a.md")]
    assert find_line(env.conn, "a.md").hid == find_line(env.conn, note_id).hid
    _restore_bytes(env, "b.md", 1)
    assert (env.root / "b.md").read_bytes() == V1 and not (env.root / "a.md").exists()


def test_a_sync_style_replace_is_an_outside_version_and_restores(env: Env) -> None:
    env.note("s.md", V1)
    tmp = env.root / "s.md.sync-tmp"
    tmp.write_bytes(b"the sync's version\n")
    os.replace(tmp, env.root / "s.md")
    apply_changes(env.conn, [env.vault], {str(tmp), str(env.root / "s.md")})
    rows = _history(env, "s.md")
    assert [r["who"]["by"] for r in rows] == ["outside kms", "outside kms"]
    assert rows[0]["sizeChange"] == len(b"the sync's version\n") - len(V1)
    _restore_bytes(env, "s.md", 1)
    assert (env.root / "s.md").read_bytes() == V1


def test_a_note_deleted_while_no_server_ran_comes_back_after_the_next_index(env: Env) -> None:
    env.note("gone.md", V1)
    (env.root / "gone.md").write_bytes(V2)  # a save nobody saw, then the file goes: V2 was never seen
    os.unlink(env.root / "gone.md")
    index_vault(env.conn, env.vault)
    rows = _history(env, "gone.md")
    assert [r["how"] for r in rows] == ["deleted", "watch"]
    _restore_bytes(env, "gone.md", 1)
    assert (env.root / "gone.md").read_bytes() == V1
    assert env.conn.execute("SELECT count(*) FROM notes WHERE path = 'gone.md'").fetchone() == (1,)


def test_restore_is_refused_when_the_file_changed_since_the_preview(env: Env) -> None:
    env.note("p.md", V1)
    (env.root / "p.md").write_bytes(V2)
    reindex_file(env.conn, env.vault, "p.md")
    plan = preview_restore(env.conn, "p.md", number=1)
    (env.root / "p.md").write_bytes(b"a save made since the preview\n")
    with pytest.raises(KmsError) as e:
        restore(env.conn, "p.md", number=1, expect=plan["expect"])
    assert e.value.kind == "conflict"
    assert (env.root / "p.md").read_bytes() == b"a save made since the preview\n"
    row = tuples(env.conn, "SELECT tool, actor, status FROM tool_invocations ORDER BY id DESC LIMIT 1")[0]
    assert row[0] == "restore" and row[1] == "person" and row[2] != "success"


def test_a_deleted_note_that_exists_again_is_a_conflict(env: Env) -> None:
    env.note("d.md", V1)
    os.unlink(env.root / "d.md")
    index_vault(env.conn, env.vault)
    plan = preview_restore(env.conn, "d.md", number=1)
    assert plan["expect"] == "" and not plan["exists"]
    (env.root / "d.md").write_bytes(b"new\n")
    with pytest.raises(KmsError) as e:
        restore(env.conn, "d.md", number=1, expect=plan["expect"])
    assert e.value.kind == "conflict" and (env.root / "d.md").read_bytes() == b"new\n"


def test_a_version_is_recorded_in_the_transaction_of_its_row(env: Env) -> None:
    """What the index holds the history holds: a row write rolled back takes its version with it."""
    env.note("t.md", V1)
    (env.root / "t.md").write_bytes(V2)
    with pytest.raises(RuntimeError), write_tx(env.conn):
        reindex_file(env.conn, env.vault, "t.md", batch=LinkWork())  # (inside this transaction)
        assert len(_history(env, "t.md")) == 2
        raise RuntimeError("crash before the commit")
    assert len(_history(env, "t.md")) == 1
    assert value(env.conn, "SELECT content_hash FROM notes WHERE path = 't.md'") == blobs.sha256_hex(V1)
    reindex_file(env.conn, env.vault, "t.md")  # seen again later: kept then
    assert len(_history(env, "t.md")) == 2


def test_small_edits_are_deltas_and_the_same_bytes_are_stored_once(env: Env) -> None:
    body = b"".join(b"line %d of a longer note with some words in it\n" % i for i in range(120))
    env.note("big.md", body)
    env.note("copy.md", body)  # the same bytes in another note: one blob
    for i in range(5):
        (env.root / "big.md").write_bytes(body + b"edit %d\n" % i)
        reindex_file(env.conn, env.vault, "big.md")
    sizes = [r[0] for r in env.conn.execute("SELECT length(data) FROM history_blobs WHERE base IS NOT NULL")]
    assert len(sizes) == 5 and max(sizes) < 100  # each edit: tens of bytes against its neighbour
    assert env.conn.execute("SELECT count(*) FROM history_blobs").fetchone() == (6,)
    line = find_line(env.conn, "big.md")
    for r in versions(env.conn, line):
        assert blobs.sha256_hex(version_bytes(env.conn, pick(env.conn, line, number=r["version"]))) == r["hash"]


def test_history_off_keeps_nothing(env: Env, tmp_path: Path) -> None:
    Path(os.environ["KMS_CONFIG"]).write_text("[history]\nenabled = false\n")
    env.note("off.md", V1)
    assert env.conn.execute("SELECT count(*) FROM history_versions").fetchone() == (0,)
    with pytest.raises(KmsError) as e:
        find_line(env.conn, "off.md")
    assert e.value.kind == "not-found"


def _age(conn: apsw.Connection, days: list[float], now: float) -> None:
    vids = [r[0] for r in conn.execute("SELECT vid FROM history_versions ORDER BY vid")]
    for vid, d in zip(vids, days, strict=True):
        conn.execute("UPDATE history_versions SET at = ? WHERE vid = ?", (now - d * 86400, vid))


def test_retention_keeps_everything_recent_then_one_a_day_then_none(env: Env) -> None:
    env.note("r.md", b"v0\n")
    for i in range(1, 7):
        (env.root / "r.md").write_bytes(b"v%d\n" % i)
        reindex_file(env.conn, env.vault, "r.md")
    now = 2_000_000_000.0
    # v0, v1: 400 days old; v2, v3 on one day 100 days ago; v4 40 days ago; v5, v6 today
    day = 86400
    _age(env.conn, [400, 399.9, 100 + 3600 / day, 100 + 60 / day, 40, 0.01, 0], now)
    with write_tx(env.conn):
        report = note_versions.prune(env.conn, keep_all_days=30, keep_daily_days=365, max_bytes=0, now=now)
    kept = [
        version_bytes(env.conn, pick(env.conn, find_line(env.conn, "r.md"), number=r["version"]))
        for r in reversed(_history(env, "r.md"))
    ]
    assert kept == [b"v3\n", b"v4\n", b"v5\n", b"v6\n"]
    assert report.versions == 3


def test_prune_never_drops_what_a_deleted_note_is_restored_to_and_honours_the_cap(env: Env) -> None:
    env.note("x.md", b"old text\n")
    os.unlink(env.root / "x.md")
    index_vault(env.conn, env.vault)
    body = os.urandom(4000).hex().encode()
    env.note("y.md", body)
    for _ in range(4):
        (env.root / "y.md").write_bytes(os.urandom(4000).hex().encode())
        reindex_file(env.conn, env.vault, "y.md")
    with write_tx(env.conn):
        note_versions.prune(env.conn, keep_all_days=0, keep_daily_days=0, max_bytes=1, now=9e9)
    assert [r["how"] for r in _history(env, "x.md")] == ["deleted", "watch"]
    assert len(_history(env, "y.md")) == 1  # only the newest is left under an impossible cap
    _restore_bytes(env, "x.md", 1)
    assert (env.root / "x.md").read_bytes() == b"old text\n"


def test_forget_leaves_no_byte_of_the_note_behind(env: Env) -> None:
    secret = b"# Secret\nthe launch code is 7741-alpha-zebra\n" * 3
    other = b"# Other\nnothing to hide here, a plain note\n" * 3
    for i in range(70):  # a cold index big enough for a seed dictionary
        (env.root / f"bulk/n{i:02}.md").parent.mkdir(exist_ok=True)
        (env.root / f"bulk/n{i:02}.md").write_bytes(secret if i == 0 else other + b"%d\n" % i)
    index_vault(env.conn, env.vault)
    assert blobs.seed_of(env.conn, env.vault.id) is not None
    (env.root / "bulk/n00.md").write_bytes(secret + b"more\n")
    reindex_file(env.conn, env.vault, "bulk/n00.md")
    line = find_line(env.conn, "bulk/n00.md")
    with write_tx(env.conn):
        assert note_versions.forget(env.conn, line.hid) == 2
    with pytest.raises(KmsError):
        find_line(env.conn, "bulk/n00.md")
    blobs.forget_cached()
    for (bid,) in tuples(env.conn, "SELECT bid FROM history_blobs"):
        assert b"7741-alpha-zebra" not in blobs.blob_bytes(env.conn, bid)
    for r in _history(env, "bulk/n05.md"):  # every other note still reads back
        line5 = find_line(env.conn, "bulk/n05.md")
        assert version_bytes(env.conn, pick(env.conn, line5, number=r["version"])).startswith(b"# Other")


def test_a_cold_index_keeps_every_first_version_compressed(env: Env) -> None:
    for i in range(500):  # past the worker threshold: read by worker processes, compressed once searchable
        (env.root / f"n{i:03}.md").write_bytes(b"# Note %d\n\n" % i + b"some shared words of a vault\n" * 40)
    index_vault(env.conn, env.vault)
    assert env.conn.execute("SELECT count(*) FROM history_versions").fetchone() == (500,)
    raw = sum(p.stat().st_size for p in env.root.glob("*.md"))
    assert blobs.stored_bytes(env.conn) < raw * 0.4
    line = find_line(env.conn, "n123.md")
    assert version_bytes(env.conn, pick(env.conn, line)) == (env.root / "n123.md").read_bytes()


def test_notes_indexed_before_history_get_their_version_at_the_next_index(env: Env) -> None:
    Path(os.environ["KMS_CONFIG"]).write_text("[history]\nenabled = false\n")
    env.note("early.md", V1)
    Path(os.environ["KMS_CONFIG"]).write_text("[history]\nenabled = true\n")
    index_vault(env.conn, env.vault)
    assert [r["how"] for r in _history(env, "early.md")] == ["index"]


def test_repair_carries_the_history_over_and_adds_no_version_for_an_unchanged_note(env: Env) -> None:
    from server.index.repair import repair_database

    note_id = env.note("kept.md", V1)
    (env.root / "kept.md").write_bytes(V2)
    reindex_file(env.conn, env.vault, "kept.md")
    env.note("gone.md", b"bye\n")
    os.unlink(env.root / "gone.md")
    index_vault(env.conn, env.vault)
    env.conn.close()
    report = repair_database(env.db_path, force=True)
    assert report.recovered["history_versions"] == 4
    from server.store.db import connect

    env.conn = connect(env.db_path)
    rows = _history(env, note_id)
    assert [r["version"] for r in rows] == [2, 1]  # the re-index of the unchanged file added none
    assert find_line(env.conn, "kept.md").rid is not None
    _restore_bytes(env, "gone.md", 1)
    assert (env.root / "gone.md").read_bytes() == b"bye\n"
    _restore_bytes(env, note_id, 1)
    assert (env.root / "kept.md").read_bytes() == V1


def test_an_edit_a_session_reported_through_its_hooks_is_told_as_that_sessions(env: Env) -> None:
    """A change no kms call made, which a ``kms claude`` session reported (its PostToolUse hook: the agent's own
    Edit tool), is that session's in the history; the same change unreported stays "outside kms"."""
    note_id = env.note("plan.md", V1)
    agent_tool(env.conn, env.vault, "s-hooks", "plan.md", V2)  # reported, and the watcher saw the save
    someone_else(env.conn, env.vault, "other.md", V1)
    newest = _history(env, note_id)[0]
    assert newest["who"]["sessionId"] == "s-hooks" and "Edit" in newest["who"]["how"], newest
    assert newest["who"]["how"].startswith("outside kms")
    assert _history(env, "other.md")[0]["who"]["by"] == "outside kms"


def test_a_persons_save_just_before_a_reported_edit_stays_the_persons(env: Env) -> None:
    """The session's report names the bytes its edit left: a person's save moments before the agent's edit (well
    inside the report window) is told as "outside kms", and only the version with the edit's bytes as the
    session's."""
    note_id = env.note("plan.md", V1)
    someone_else(env.conn, env.vault, "plan.md", V1 + b"the person's line\n")  # the person saves
    agent_tool(env.conn, env.vault, "s-hooks", "plan.md", V2)  # then the agent's Edit tool
    agent_version, person_version = _history(env, note_id)[:2]
    assert agent_version["who"]["sessionId"] == "s-hooks", agent_version
    assert person_version["who"]["by"] == "outside kms" and person_version["who"]["sessionId"] is None, person_version
