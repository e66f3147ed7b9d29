"""Looking a note up by id, title, path or alias within one vault (server/index/notes.py, a session's scope)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.vaults import note_id, write

from server.errors import KmsError
from server.index.indexer import index_vault
from server.index.notes import find_note, get_note, resolve_note
from server.vault.registry import add_vault


@pytest.fixture
def two_vaults(conn: apsw.Connection, tmp_path: Path) -> tuple[int, int]:
    write(tmp_path / "a" / "Alpha.md", "# Alpha\n")
    write(tmp_path / "a" / "Common.md", "# Common\n")
    write(tmp_path / "b" / "Bravo.md", "---\naliases: [Bee]\n---\n# Bravo\n")
    write(tmp_path / "b" / "Common.md", "# Common\n")
    a, b = add_vault(conn, tmp_path / "a", "a"), add_vault(conn, tmp_path / "b", "b")
    index_vault(conn, a)
    index_vault(conn, b)
    return a.id, b.id


def test_a_note_of_another_vault_is_as_if_absent(conn: apsw.Connection, two_vaults: tuple[int, int]) -> None:
    a, b = two_vaults
    bravo = note_id(conn, "Bravo")
    assert find_note(conn, "Bravo")["id"] == bravo  # unscoped: found by title
    for ref in (bravo, "Bravo", "bravo.md", "Bee", "Bravo.md"):
        with pytest.raises(KmsError) as e:
            find_note(conn, ref, vault_id=a)
        assert e.value.kind == "not-found" and "Bravo" not in e.value.extra["suggestions"], ref
        assert find_note(conn, ref, vault_id=b)["id"] == bravo
    with pytest.raises(KmsError) as e:
        resolve_note(conn, "Bravo", vault_id=a)
    assert e.value.kind == "not-found"
    with pytest.raises(KmsError) as e:
        get_note(conn, bravo, vault_id=a)
    assert e.value.kind == "not-found"
    assert get_note(conn, bravo, vault_id=b)["vault"] == "b"


def test_a_title_in_two_vaults_is_one_note_within_a_scope(conn: apsw.Connection, two_vaults: tuple[int, int]) -> None:
    a, b = two_vaults
    with pytest.raises(KmsError) as e:
        find_note(conn, "Common")
    assert e.value.kind == "invalid-input"  # unscoped: ambiguous
    assert resolve_note(conn, "Common", vault_id=a)["vault"] == "a"
    assert resolve_note(conn, "Common", vault_id=b)["vault"] == "b"


def test_a_scoped_lookup_finds_names_through_the_key_index_not_a_walk_of_the_vault(
    conn: apsw.Connection, two_vaults: tuple[int, int]
) -> None:
    """Every name query of a scoped lookup starts at the name (note_keys' primary key): with the vault as
    an index condition SQLite walked all the vault's notes per kind of name."""
    a, _ = two_vaults
    seen: list[tuple[str, tuple]] = []

    def trace(_cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
        if "note_keys" in sql and not sql.startswith("EXPLAIN"):
            seen.append((sql, tuple(bindings) if isinstance(bindings, (list, tuple)) else ()))
        return True

    conn.exec_trace = trace
    try:
        find_note(conn, "a:Alpha.md", vault_id=a)
    finally:
        conn.exec_trace = None
    assert seen
    for sql, bindings in seen:
        plan = [str(step[3]) for step in conn.execute("EXPLAIN QUERY PLAN " + sql, bindings)]
        assert any("k USING PRIMARY KEY" in step for step in plan), (sql, plan)
