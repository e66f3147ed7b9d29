"""m057: a database made before ids were machine-independent (random ids, or ids made from the vault's kms
name) has every note's id made again by today's rule, and every table naming one follows: real database,
real files, the real writer for provenance and history."""

from __future__ import annotations

import secrets
import shutil
from pathlib import Path

import apsw
from support.writes import Writer
from test_stable_ids import NOTES  # the same notes: carried ids, an accent, two carrying one id

from server.activity import session_material
from server.activity.ratelimit import RateLimiter
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

# every (table, column) naming a note's public id
REFERENCES = (
    ("note_reads", "note_id"),
    ("tool_invocations", "note_id"),
    ("session_records", "note_id"),
    ("history_notes", "note_id"),
)


def _vault(root: Path) -> Path:
    for path, text in NOTES.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text, encoding="utf-8")
    return root


def _ids(conn: apsw.Connection) -> dict[str, str]:
    return {str(p): str(i) for p, i in conn.execute("SELECT path, id FROM notes")}


def _made_the_old_way(conn: apsw.Connection) -> dict[str, str]:
    """Give every note a random id, as kms did before, in every table that names one (what an old database
    holds), and forget that m057 ran. Returns old id -> path."""
    old = {}
    with conn:
        for rid, nid, path in conn.execute("SELECT rid, id, path FROM notes").fetchall():
            rnd = "n" + secrets.token_hex(6)
            old[rnd] = str(path)
            conn.execute("UPDATE notes SET id = ? WHERE rid = ?", (rnd, rid))
            for table, column in REFERENCES:
                conn.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = ?", (rnd, nid))
            conn.execute("UPDATE history_ids SET note_id = ? WHERE note_id = ?", (rnd, nid))
        conn.execute("DELETE FROM _migrations WHERE name = 'm057_machine_independent_ids'")
    return old


def test_old_random_ids_are_derived_again_and_nothing_dangles(tmp_path: Path) -> None:
    db = tmp_path / "a" / "kms.db"
    root = _vault(tmp_path / "a" / "notes")
    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "work"))  # registered under another name than its folder's
    made = Writer(db, "agent-a", RateLimiter(None, None)).create("Made here", "by the agent")
    plan_id = next(conn.execute("SELECT id FROM notes WHERE path = 'Plan.md'"))[0]
    with conn:
        conn.execute("INSERT INTO note_reads VALUES (?, 'agent-a', 1, 1.0, 1.0)", (plan_id,))
    session_material.set_note(conn, "agent-a", note_id=made["noteId"], vault="work", path=made["path"], digest="x")
    old = _made_the_old_way(conn)
    conn.close()

    conn = connect(db)  # an older database upgrades on open
    ids = _ids(conn)
    # the ids a machine indexing a copy for the first time gives, whatever it names the vault
    fresh = connect(tmp_path / "b" / "kms.db")
    copy = tmp_path / "b" / "notes"
    shutil.copytree(root, copy)
    index_vault(fresh, add_vault(fresh, copy, "notes"))
    theirs = _ids(fresh)
    contested = ("dup-a.md", "dup-b.md")  # one carried id: which takes the next attempt is the order met
    assert {p: i for p, i in theirs.items() if p not in contested} == {
        p: i for p, i in ids.items() if p not in contested
    }
    assert {theirs[p] for p in contested} == {ids[p] for p in contested}
    assert not set(ids.values()) & set(old)

    live = set(ids.values())
    for table, column in REFERENCES:
        named = {r[0] for r in conn.execute(f"SELECT {column} FROM {table} WHERE {column} IS NOT NULL")}
        assert named, table  # the test wrote a reference in each
        assert named <= live, f"{table}.{column} names an id no note has: {named - live}"
    assert next(conn.execute("SELECT note_id FROM note_reads"))[0] == ids["Plan.md"]
    assert session_material.note_of(conn, "agent-a") == ids[made["path"]]
    stale = list(conn.execute("SELECT h.note_id, n.id FROM history_notes h JOIN notes n ON n.rid = h.rid"))
    assert stale and all(h == n for h, n in stale)
    for rnd, path in old.items():  # an old id quoted somewhere still finds the note's history
        hid = next(conn.execute("SELECT hid FROM history_ids WHERE note_id = ?", (rnd,)))[0]
        now = next(conn.execute("SELECT hid FROM history_ids WHERE note_id = ?", (ids[path],)))[0]
        assert hid == now


def test_two_machines_naming_the_vault_differently_give_the_same_ids(tmp_path: Path) -> None:
    a = connect(tmp_path / "a" / "kms.db")
    index_vault(a, add_vault(a, _vault(tmp_path / "a" / "notes"), "notes"))
    b = connect(tmp_path / "b" / "kms.db")
    index_vault(b, add_vault(b, _vault(tmp_path / "b" / "notes"), "work-notes"))
    assert _ids(a) == _ids(b)
