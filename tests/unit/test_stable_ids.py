"""A note's id is made from what travels with the note, so two machines indexing copies of one vault (each its
own database) give every note the same id: real folders, two real databases."""

from __future__ import annotations

import shutil
from pathlib import Path

from support.sql import value
from support.writes import Writer

from server.activity.ratelimit import RateLimiter
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

NOTES = {
    "Plan.md": "# Plan\n\nthe plan\n",
    "projects/Café.md": "# Café\n\nwith an accent\n",
    "zettel/20261201.md": "---\nid: 20261201-zebra\n---\nA zettel that carries its id\n",
    "dup-a.md": "---\nid: same\n---\na\n",
    "dup-b.md": "---\nid: same\n---\nb\n",
}


def _ids(db: Path, root: Path) -> dict[str, str]:
    conn = connect(db)
    vault = add_vault(conn, root, "notes")
    index_vault(conn, vault)
    return {str(r[0]): str(r[1]) for r in conn.execute("SELECT path, id FROM notes")}


def _machine(tmp_path: Path, name: str, src: Path) -> Path:
    root = tmp_path / name / "notes"
    shutil.copytree(src, root)
    return root


def test_two_databases_give_one_vaults_notes_the_same_ids(tmp_path: Path) -> None:
    src = tmp_path / "src"
    for path, text in NOTES.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text, encoding="utf-8")
    a = _ids(tmp_path / "a" / "kms.db", _machine(tmp_path, "a", src))
    b_root = _machine(tmp_path, "b", src)
    (b_root / "zettel" / "20261201.md").rename(b_root / "zettel" / "renamed before B ever saw it.md")
    b = _ids(tmp_path / "b" / "kms.db", b_root)
    assert len(set(a.values())) == len(NOTES)  # the two notes copied with one frontmatter id get two
    for path in ("Plan.md", "projects/Café.md", "dup-a.md", "dup-b.md"):
        assert a[path] == b[path], path
    assert a["zettel/20261201.md"] == b["zettel/renamed before B ever saw it.md"]  # its id travels in its text


def test_a_note_an_agent_made_on_one_machine_has_its_id_on_the_other(tmp_path: Path) -> None:
    root_a = tmp_path / "a" / "notes"
    root_a.mkdir(parents=True)
    db_a = tmp_path / "a" / "kms.db"
    conn = connect(db_a)
    index_vault(conn, add_vault(conn, root_a, "notes"))
    made = Writer(db_a, "agent-a", RateLimiter(None, None)).create("Made on A", "by the agent")
    b = _ids(tmp_path / "b" / "kms.db", _machine(tmp_path, "b", root_a))  # the sync tool carried the file over
    assert b[made["path"]] == made["noteId"]
    stored = value(conn, "SELECT note_id FROM tool_invocations ORDER BY id DESC LIMIT 1")
    assert stored == made["noteId"]  # provenance names the id both machines know the note by


def test_a_new_note_at_a_renamed_notes_old_path_gets_another_id(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "Old.md").write_text("# Old\n\nkept words\n", encoding="utf-8")
    conn = connect(tmp_path / "kms.db")
    vault = add_vault(conn, root, "notes")
    index_vault(conn, vault)
    first = value(conn, "SELECT id FROM notes")
    (root / "Old.md").rename(root / "New.md")
    index_vault(conn, vault)  # a rename (same bytes): the note keeps the id it was born with
    (root / "Old.md").write_text("# Old again\n", encoding="utf-8")
    index_vault(conn, vault)
    ids = {str(r[0]): str(r[1]) for r in conn.execute("SELECT path, id FROM notes")}
    assert ids["New.md"] == first and ids["Old.md"] != first


LONG = "# Plan\n\n" + " ".join(f"word{i}" for i in range(40)) + "\n"


def test_a_note_renamed_and_edited_while_kms_was_off_keeps_its_id_on_both_machines(tmp_path: Path) -> None:
    ids = {}
    for machine in ("a", "b"):
        root = tmp_path / machine / "notes"
        root.mkdir(parents=True)
        (root / "Plan.md").write_text(LONG, encoding="utf-8")
        (root / "Short.md").write_text("# Short\n\ntiny\n", encoding="utf-8")
        conn = connect(tmp_path / machine / "kms.db")
        vault = add_vault(conn, root, "notes")
        index_vault(conn, vault)
        born = value(conn, "SELECT id FROM notes WHERE path = 'Plan.md'")
        short = value(conn, "SELECT id FROM notes WHERE path = 'Short.md'")
        (root / "projects").mkdir()
        (root / "Plan.md").rename(root / "projects" / "The plan.md")
        if machine == "a":
            index_vault(conn, vault)  # A's kms was running: it saw the rename, then the edit
        with (root / "projects" / "The plan.md").open("a", encoding="utf-8") as f:
            f.write("\nand a line added after the rename\n")
        (root / "Short.md").rename(root / "Shorter.md")
        (root / "Shorter.md").write_text("# Short\n\ntiny, and edited\n", encoding="utf-8")
        index_vault(conn, vault)  # B's kms was off: both arrive at once
        ids[machine] = value(conn, "SELECT id FROM notes WHERE path = 'projects/The plan.md'")
        assert ids[machine] == born, machine
        # a note too short to know after an edit is a new note (an empty daily note is not yesterday's)
        assert value(conn, "SELECT id FROM notes WHERE path = 'Shorter.md'") != short
    assert ids["a"] == ids["b"]
