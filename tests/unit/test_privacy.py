"""Privacy rules in the index layer: how each rule reads (``.kmsignore`` through pathspec), where
they are judged (index time, a rule change, a symlink), and a stamp that follows an offline rename."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import apsw
import pytest
from support.vaults import SAMPLE_VAULT, write

from server.config.schema import SettingValueError
from server.config.settings import set_value
from server.config.values import parse_value
from server.index.indexer import index_vault
from server.index.notes import set_hidden
from server.index.privacy import Rules, hidden_counts, hidden_notes, refresh, rules_for
from server.store.db import connect
from server.store.migrations import migrate
from server.vault.registry import add_vault, get_vault


def _hidden(conn: apsw.Connection) -> dict[str, str | None]:
    return {p: why for p, why in conn.execute("SELECT path, hidden_rule FROM notes WHERE hidden_at IS NOT NULL")}


def _config(key: str, *values: str) -> None:
    set_value(key, list(values), path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)


def test_kmsignore_is_gitignore_syntax_read_by_pathspec() -> None:
    rules = Rules(
        kmsignore=(
            "# comment",
            "",
            "journal/",
            "*.private.md",
            "!keep.private.md",
            "/top.md",
            "areas/**/health/",
            "\\#hash.md",
        )
    )
    assert rules.path_reason("journal/2026/a.md") == "kmsignore:journal/"
    assert rules.path_reason("x/journal/a.md") == "kmsignore:journal/"  # unanchored, as git reads it
    assert rules.path_reason("notes/a.private.md") == "kmsignore:*.private.md"
    assert rules.path_reason("notes/keep.private.md") is None  # negation
    assert rules.path_reason("top.md") == "kmsignore:/top.md" and rules.path_reason("sub/top.md") is None
    assert rules.path_reason("areas/a/b/health/x.md") == "kmsignore:areas/**/health/"
    assert rules.path_reason("#hash.md") == "kmsignore:\\#hash.md"
    assert rules.path_reason("journal.md") is None and rules.path_reason("notes/a.md") is None


def test_folder_globs_are_recursive_from_the_root() -> None:
    rules = Rules(hide_folders=("journal", "areas/health/**", "*/private"))
    assert rules.path_reason("journal/a.md") == "folder:journal"
    assert rules.path_reason("journal/2026/11/a.md") == "folder:journal"
    assert rules.path_reason("areas/health/x/y.md") == "folder:areas/health/**"
    assert rules.path_reason("people/private/a.md") == "folder:*/private"
    for visible in ("journal.md", "x/journal/a.md", "areas/healthy/a.md", "areas/a.md", "private/a.md"):
        assert rules.path_reason(visible) is None, visible


def test_tags_and_frontmatter() -> None:
    rules = Rules(hide_tags=("private", "#personal/*"))
    fm = lambda **kw: json.dumps(kw)  # noqa: E731  # as the notes row stores it
    assert rules.reason("a.md", None, "work private") == "tag:private"
    assert rules.reason("a.md", None, "personal/health") == "tag:#personal/*"
    assert rules.reason("a.md", None, "personal privately") is None
    assert rules.reason("a.md", fm(private=True), "") == "frontmatter:private"
    assert rules.reason("a.md", fm(private="yes"), "") == "frontmatter:private"
    assert rules.reason("a.md", fm(private=False), "") is None
    assert rules.reason("a.md", fm(title="private", note="visibility"), "") is None
    assert rules.reason("a.md", fm(visibility="Private"), "") == "frontmatter:visibility"
    assert Rules(frontmatter_key="secret").reason("a.md", fm(private=True, secret=True), "") == "frontmatter:secret"
    assert Rules(frontmatter_key=None).reason("a.md", fm(private=True), "") is None
    assert Rules(frontmatter_key=None).reason("a.md", fm(visibility="private"), "") == "frontmatter:visibility"


def test_settings_grammar() -> None:
    assert parse_value("privacy.hide_folders", ["journal/**", "areas/health/"]) == ["journal/**", "areas/health"]
    assert parse_value("privacy.frontmatter_key", "") is None
    for key, bad in (
        ("privacy.hide_folders", "/abs"),
        ("privacy.hide_folders", "../up"),
        ("privacy.hide_tags", "two words"),
        ("privacy.frontmatter_key", "a: b"),
    ):
        with pytest.raises(SettingValueError):
            parse_value(key, [bad])


def test_the_sample_vaults_private_note_is_hidden_without_any_command(conn: apsw.Connection, tmp_path: Path) -> None:
    root = tmp_path / "sample"
    shutil.copytree(SAMPLE_VAULT, root)
    index_vault(conn, add_vault(conn, root, "sample"))
    assert _hidden(conn) == {"areas/health/Therapy notes.md": "frontmatter:private"}
    assert hidden_counts(conn) == {"frontmatter:private": 1}


def test_each_rule_at_index_time_and_a_rule_change(conn: apsw.Connection, tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    vault_dir.mkdir()
    write(vault_dir / "journal" / "day.md", "# Day\n")
    write(vault_dir / "health" / "blood.md", "# Blood\n")
    write(vault_dir / "tagged.md", "# Tagged\n\n#personal/money\n")
    write(vault_dir / "open.md", "# Open\n")
    _config("privacy.hide_folders", "journal/**")
    _config("privacy.hide_tags", "personal/*")
    (vault_dir / ".kmsignore").write_text("health/\n")
    vault = add_vault(conn, vault_dir, "v")
    index_vault(conn, vault)
    assert _hidden(conn) == {
        "journal/day.md": "folder:journal/**",
        "health/blood.md": "kmsignore:health/",
        "tagged.md": "tag:personal/*",
    }
    set_hidden(conn, "Open", True)
    assert refresh(conn, vault.id, vault.root) is False  # same rules: nothing to re-judge

    _config("privacy.hide_folders", "nothing")
    (vault_dir / ".kmsignore").unlink()
    assert refresh(conn, vault.id, vault.root) is True
    assert _hidden(conn) == {"tagged.md": "tag:personal/*", "open.md": None}  # the stamp stays
    assert [n["why"] for n in hidden_notes(conn)] == [["kms hide"], ["tag:personal/*"]]
    # unhiding a note a rule hides keeps it hidden, and says why
    assert set_hidden(conn, "Tagged", False)["hidden_at"] is not None


def test_an_edit_that_adds_a_rule_hides_the_note_and_drops_its_chunks(conn: apsw.Connection, tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    vault_dir.mkdir()
    from server.index.incremental import reindex_file

    write(vault_dir / "a.md", "# A\n\nplain\n")
    vault = add_vault(conn, vault_dir, "v")
    index_vault(conn, vault)
    rid = conn.execute("SELECT rid FROM notes").fetchall()[0][0]
    conn.execute(
        "INSERT INTO chunks(rid, ord, heading, hash, text, tokens) VALUES (?, 0, NULL, 'h', 'plain', 1)", (rid,)
    )
    conn.execute("INSERT INTO embeddings VALUES ('h', x'00', 0)")
    write(vault_dir / "a.md", "---\nprivate: true\n---\n# A\n\nplain\n")
    reindex_file(conn, vault, "a.md")
    assert _hidden(conn) == {"a.md": "frontmatter:private"}
    assert conn.execute("SELECT count(*) FROM chunks").fetchall() == [(0,)]
    assert conn.execute("SELECT count(*) FROM embeddings").fetchall() == [(0,)]
    write(vault_dir / "a.md", "# A\n\nplain again\n")
    reindex_file(conn, vault, "a.md")
    assert _hidden(conn) == {}


def test_a_symlink_follows_the_note_it_points_at(conn: apsw.Connection, tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    vault_dir.mkdir()
    write(vault_dir / "journal" / "day.md", "# Day\n\nsecret words\n")
    write(vault_dir / "inbox" / "target.md", "# Target\n")
    os.symlink(vault_dir / "journal" / "day.md", vault_dir / "inbox" / "day-link.md")
    os.symlink(vault_dir / "inbox" / "target.md", vault_dir / "target-link.md")
    _config("privacy.hide_folders", "journal")
    vault = add_vault(conn, vault_dir, "v")
    index_vault(conn, vault)
    assert _hidden(conn) == {"journal/day.md": "folder:journal", "inbox/day-link.md": "folder:journal"}
    set_hidden(conn, "inbox/target.md", True)  # a stamp on the target hides the link too
    assert _hidden(conn)["target-link.md"] == "symlink"
    set_hidden(conn, "inbox/target.md", False)
    assert "target-link.md" not in _hidden(conn)


def test_a_stamp_follows_a_rename_with_edits_made_while_no_kms_ran(conn: apsw.Connection, tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    vault_dir.mkdir()
    body = "\n".join(f"Line {i} about the divorce lawyer and the house." for i in range(20))
    write(vault_dir / "Lawyer.md", f"# Lawyer\n\n{body}\n")
    write(vault_dir / "Other.md", "# Other\n\nNothing alike.\n")
    vault = add_vault(conn, vault_dir, "v")
    index_vault(conn, vault)
    note = set_hidden(conn, "Lawyer", True)
    # offline: renamed into another folder and edited (a new heading, a paragraph added)
    (vault_dir / "Lawyer.md").unlink()
    write(vault_dir / "legal" / "Lawyer 2026.md", f"# Lawyer (2026)\n\n{body}\n\nCalled again on Monday.\n")
    write(vault_dir / "New.md", "# New\n\nA fresh note about gardening.\n")
    report = index_vault(conn, vault)
    assert (report.renamed, report.added, report.deleted) == (1, 1, 0)
    assert _hidden(conn) == {"legal/Lawyer 2026.md": None}
    assert conn.execute("SELECT id FROM notes WHERE path = 'legal/Lawyer 2026.md'").fetchall() == [(note["id"],)]
    # a vanished stamped note whose words mostly went is not guessed: the new file is a new note
    set_hidden(conn, "legal/Lawyer 2026.md", False)
    set_hidden(conn, "Other", True)
    (vault_dir / "Other.md").unlink()
    write(vault_dir / "Unrelated.md", "# Unrelated\n\nCompletely different words here, about sailing.\n")
    report = index_vault(conn, vault)
    assert (report.renamed, report.added, report.deleted) == (0, 1, 1) and _hidden(conn) == {}


def test_rules_cache_sees_an_edit(tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    vault_dir.mkdir()
    assert rules_for(vault_dir).hide_tags == ()
    _config("privacy.hide_tags", "x")
    assert rules_for(vault_dir).hide_tags == ("x",)
    (vault_dir / ".kmsignore").write_text("a/\n")
    assert rules_for(vault_dir).kmsignore == ("a/",)


def test_upgrade_to_m008_keeps_the_stamps(tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    vault_dir.mkdir()
    path = tmp_path / "m007.db"
    old = apsw.Connection(str(path))
    migrate(old, upto="m007_change_kind")
    write(vault_dir / "a.md", "# A\n")
    old.execute("INSERT INTO vaults(id, name, root, added_at) VALUES (1, 'v', ?, 0)", (str(vault_dir),))
    old.execute("""INSERT INTO notes(rid, id, vault_id, path, folder, title, content_hash, size_bytes, token_estimate,
                   mtime_ns, created_at, updated_at, indexed_at, hidden_at, body)
                   VALUES (1, 'n000000000001', 1, 'a.md', '', 'A', 'x', 4, 1, 1, 0, 0, 0, 123.0, '')""")
    old.execute("INSERT INTO notes_fts(rowid, title, body, tags) VALUES (1, 'A', '', '')")
    old.close()
    conn = connect(path)
    assert conn.execute("SELECT hidden_at, hidden_stamp, hidden_rule FROM notes").fetchall() == [(123.0, 123.0, None)]
    index_vault(conn, get_vault(conn, "v"))  # the file is re-read: the stamp survives
    assert conn.execute("SELECT hidden_at, hidden_stamp FROM notes").fetchall() == [(123.0, 123.0)]
    assert conn.execute("SELECT privacy_rules FROM vaults").fetchall()[0][0] is not None


def test_a_broken_settings_file_never_makes_hidden_notes_visible(conn: apsw.Connection, tmp_path: Path) -> None:
    vault_dir = tmp_path / "v"
    write(vault_dir / "journal" / "day.md", "# Day\n")
    write(vault_dir / "open.md", "# Open\n")
    _config("privacy.hide_folders", "journal")
    vault = add_vault(conn, vault_dir, "v")
    index_vault(conn, vault)
    assert _hidden(conn) == {"journal/day.md": "folder:journal"}
    config = Path(os.environ["KMS_CONFIG"])
    for broken in (
        '[privacy\nhide_folders = "journal"\n',
        '[privacy]\nhide_folders = "not a list"\n',
        "[privacy]\nhide_foldrs = []\n",
    ):
        config.write_text(broken)
        assert rules_for(vault_dir).unreadable
        assert refresh(conn, vault.id, vault.root) is False  # the rules the vault was judged by are kept
        write(vault_dir / "journal" / "day.md", "# Day\n\nedited while the file was broken\n")
        index_vault(conn, vault)
        assert _hidden(conn) == {"journal/day.md": "folder:journal"}
    config.write_text("")  # fixed (here: emptied): the person's new rules apply
    assert refresh(conn, vault.id, vault.root) is True and _hidden(conn) == {}


def test_a_broken_frontmatter_block_still_hides_its_note(conn: apsw.Connection, tmp_path: Path) -> None:
    """YAML that cannot be read (a flagged note) must not turn ``private: true`` into a visible note."""
    vault_dir = tmp_path / "v"
    write(vault_dir / "broken.md", "---\nprivate: true\ntitle: [unclosed\n---\n# Broken\n")
    write(vault_dir / "template.md", "---\ndate: {{date}}\nVisibility: 'private'\n---\n# Template\n")
    write(vault_dir / "open.md", "---\npublic: true\ntitle: [unclosed\n---\n# Open\n\nprivate: true\n")
    vault = add_vault(conn, vault_dir, "v")
    index_vault(conn, vault)
    assert conn.execute("SELECT count(*) FROM notes WHERE fm_error IS NOT NULL").fetchall() == [(3,)]
    assert _hidden(conn) == {"broken.md": "frontmatter:private", "template.md": "frontmatter:visibility"}
    _config("privacy.frontmatter_key", "public")  # re-judged from the files' raw start
    assert refresh(conn, vault.id, vault.root) is True
    assert _hidden(conn) == {"template.md": "frontmatter:visibility", "open.md": "frontmatter:public"}
