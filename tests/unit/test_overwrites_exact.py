"""The overwritten flag is exact: set only on text gone from the note as the index holds it, and
cleared as soon as a later version shows it back, however many writes the note has had since."""

from __future__ import annotations

from pathlib import Path

import apsw
from support.sql import value

from server.activity import overwrites
from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.vault.files import sha256_hex
from server.vault.registry import Vault, add_vault


def agent_append(conn: apsw.Connection, vault: Vault, path: Path, line: str, at: float) -> int:
    """What an agent's kms_append leaves: the line at the end of the file and its provenance row."""
    before = path.read_bytes()
    text = before.decode()
    path.write_text(text + line)
    reindex_file(conn, vault, path.name)
    nid = value(conn, "SELECT id FROM notes WHERE path = ?", (path.name,))
    conn.execute(
        "INSERT INTO tool_invocations (at, session_id, tool, note_id, vault, path, input_summary, status, actor, "
        "inserted_text, insert_offset, hash_before, hash_after, change_kind) VALUES (?, 's', 'kms_append', ?, 'v', ?,"
        " 'x', 'success', 'agent', ?, ?, ?, ?, 'text-inserted')",
        (at, nid, path.name, line, len(text), sha256_hex(before), sha256_hex(path.read_bytes())),
    )
    return conn.last_insert_rowid()


def person_saves(
    conn: apsw.Connection, vault: Vault, path: Path, text: str, at: float, settled: overwrites.Settled | None = None
) -> int:
    path.write_text(text)
    reindex_file(conn, vault, path.name)
    return overwrites.check(conn, vault, [path.name], now=at, settled=settled)


def flag(conn: apsw.Connection, rid: int) -> float | None:
    return value(conn, "SELECT overwritten_at FROM tool_invocations WHERE id = ?", (rid,))


def setup(tmp_path: Path, conn: apsw.Connection) -> tuple[Vault, Path]:
    root = tmp_path / "vault"
    root.mkdir()
    (root / "n.md").write_text("# n\n\nbody\n")
    vault = add_vault(conn, root, "v")
    index_vault(conn, vault)
    return vault, root / "n.md"


def test_a_flag_is_cleared_when_the_text_comes_back_after_many_more_writes(
    tmp_path: Path, conn: apsw.Connection
) -> None:
    vault, path = setup(tmp_path, conn)
    first = agent_append(conn, vault, path, "first agent line\n", 1000.0)
    person_saves(conn, vault, path, "# n\n\nbody\n", 1001.0)  # an editor that had the older version
    assert flag(conn, first) == 1001.0
    for i in range(60):  # a busy note: the flagged write is far from the newest
        agent_append(conn, vault, path, f"more {i}\n", 1002.0 + i)
    text = path.read_text()
    assert person_saves(conn, vault, path, text + "first agent line\n", 1100.0) >= 1  # the person put it back
    assert flag(conn, first) is None


def test_a_note_is_judged_by_what_the_index_holds_not_by_a_save_still_landing(
    tmp_path: Path, conn: apsw.Connection
) -> None:
    vault, path = setup(tmp_path, conn)
    write = agent_append(conn, vault, path, "agent line\n", 1000.0)
    kept = path.read_text() + "the person's line\n"
    assert person_saves(conn, vault, path, kept, 1001.0) == 0  # the person's save kept the agent's line
    path.write_text("")  # their next save, truncate-then-write, caught between the two (not indexed yet)
    assert overwrites.check(conn, vault, [path.name], now=1002.0) == 0 and flag(conn, write) is None
    assert person_saves(conn, vault, path, kept + "more\n", 1003.0) == 0
    assert flag(conn, write) is None


def test_a_stale_save_is_flagged_however_old_the_writes_it_dropped(tmp_path: Path, conn: apsw.Connection) -> None:
    """An editor holding a buffer from before 60 agent appends saves it: every one of them is flagged, the
    oldest as well as the newest (a check of the newest 50 writes missed the rest), with or without the
    watcher's memory, and also when an agent appended again before the watcher looked."""
    vault, path = setup(tmp_path, conn)
    settled = overwrites.Settled()
    assert overwrites.check(conn, vault, [path.name], now=999.0, settled=settled) == 0
    stale = path.read_text()
    dropped = [agent_append(conn, vault, path, f"agent line {i}\n", 1000.0 + i) for i in range(60)]
    assert overwrites.check(conn, vault, [path.name], now=1070.0, settled=settled) == 0  # kms's own chain
    path.write_text(stale + "the person's line\n")  # the old buffer, saved
    reindex_file(conn, vault, path.name)
    kept = agent_append(conn, vault, path, "after the save\n", 1080.0)  # on the saved version, before a check
    assert overwrites.check(conn, vault, [path.name], now=1090.0, settled=settled) == 60
    assert all(flag(conn, r) == 1090.0 for r in dropped) and flag(conn, kept) is None
    assert overwrites.check(conn, vault, [path.name], now=1091.0) == 0  # a one-off full check agrees


def test_after_a_settled_check_only_kms_writes_cost_no_judgement(tmp_path: Path, conn: apsw.Connection) -> None:
    """While only kms appended since the version last judged, nothing is judged again (the file is not even
    read); a save that was not kms's breaks the chain and every recent write is judged."""
    vault, path = setup(tmp_path, conn)
    settled = overwrites.Settled()
    first = agent_append(conn, vault, path, "first\n", 1000.0)
    assert overwrites.check(conn, vault, [path.name], now=1001.0, settled=settled) == 0
    for i in range(5):
        agent_append(conn, vault, path, f"more {i}\n", 1002.0 + i)
    newest = value(conn, "SELECT max(id) FROM tool_invocations")
    indexed = path.read_text()
    path.write_text("")  # a save landing: a check that read the file would judge nothing and remember nothing
    assert overwrites.check(conn, vault, [path.name], now=1010.0, settled=settled) == 0
    path.write_text(indexed)
    nid = value(conn, "SELECT id FROM notes WHERE path = ?", (path.name,))
    assert settled.get(conn, nid) == (value(conn, "SELECT content_hash FROM notes WHERE id = ?", (nid,)), newest)
    assert person_saves(conn, vault, path, path.read_text().replace("first\n", ""), 1020.0, settled) == 1
    assert flag(conn, first) == 1020.0
