"""The person's side of privacy: a rule set on the command line applies at once, `kms hidden --why`
lists what agents never see and why, status and doctor count per rule and doctor warns about the
filesystem server."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from support.cli import kms, ok, refused, said
from support.vaults import SAMPLE_VAULT


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    root = tmp_path / "notes"
    shutil.copytree(SAMPLE_VAULT, root)
    conn = connect()
    index_vault(conn, add_vault(conn, root, "notes"))
    conn.close()
    return root


def test_rules_from_the_command_line_apply_at_once(sample: Path) -> None:
    [therapy] = json.loads(ok(kms("hidden", "--json")).stdout)
    assert {k: therapy[k] for k in ("vault", "path", "title", "why")} == {
        "vault": "notes",
        "path": "areas/health/Therapy notes.md",
        "title": "Therapy notes",
        "why": ["frontmatter:private"],
    }
    out = said(ok(kms("config", "set", "privacy.hide_folders", "journal/**")).stdout)
    assert "hidden from agents now:" in out and "folder:journal/**: 4" in out
    why = said(ok(kms("hidden", "--why")).stdout)
    assert "notes:journal/2026-11-01.md (folder:journal/**)" in why  # vault:path, as every command takes it
    assert "notes:areas/health/Therapy notes.md (frontmatter:private)" in why
    ok(kms("show", "notes:areas/health/Therapy notes.md"))  # the name printed is one the commands take
    hits = json.loads(ok(kms("search", "tram", "--json")).stdout)["hits"]
    assert [h["path"] for h in hits] == ["projects/Lisbon trip.md"]  # the journal's words are gone

    ok(kms("hide", "Home"))
    status = json.loads(ok(kms("status", "--json")).stdout)
    assert status["hiddenBy"] == {"folder:journal/**": 4, "frontmatter:private": 1, "kms hide": 1}
    assert "hidden from agents by folder:journal/**: 4" in said(ok(kms("status")).stdout)

    out = said(ok(kms("config", "unset", "privacy.hide_folders")).stdout)
    assert "folder:journal" not in out and "frontmatter:private: 1" in out
    assert "Still hidden: Therapy notes" in said(ok(kms("unhide", "Therapy notes")).stdout)
    assert "Visible again: Home" in said(ok(kms("unhide", "Home")).stdout)


def test_bad_rules_are_refused(sample: Path) -> None:
    assert "vault-relative" in said(refused(kms("config", "set", "privacy.hide_folders", "/etc")).stderr)
    assert "frontmatter key" in said(refused(kms("config", "set", "privacy.frontmatter_key", "a b")).stderr)


def test_doctor_counts_per_rule_and_warns_about_the_filesystem_server(sample: Path) -> None:
    report = json.loads(kms("doctor", "--json").stdout)
    assert report["privacy"] == {"hiddenBy": {"frontmatter:private": 1}, "warning": None}
    ok(kms("config", "set", "servers.filesystem.enabled", "on"))
    report = json.loads(kms("doctor", "--json").stdout)
    assert "filesystem server" in report["privacy"]["warning"]
    assert "bypassing them" in said(kms("doctor").stdout)


def test_a_kms_hide_stamp_follows_the_note_through_restore_the_trash_a_put_back_and_a_vault_re_added(
    tmp_path: Path,
) -> None:
    """Dogfood finding cli #1: the person's stamp outlives the note's row, so a note brought back is hidden
    again: by ``kms restore``, ``kms trash restore``, its file put back byte for byte, its vault re-added."""
    root = tmp_path / "v"
    root.mkdir()
    (root / "diary.md").write_text("Diary HIDECANARY91 text\n")
    (root / "other.md").write_text("# Other\n")
    ok(kms("vault", "add", str(root), "--name", "v"))

    def hidden() -> list[str]:
        assert json.loads(ok(kms("search", "HIDECANARY91", "--json")).stdout)["hits"] == []
        return [h["path"] for h in json.loads(ok(kms("hidden", "--json")).stdout)]

    ok(kms("hide", "diary"))
    assert hidden() == ["diary.md"]
    (root / "diary.md").unlink()
    ok(kms("index"))
    assert hidden() == []
    ok(kms("restore", "diary.md", "--version", "1", "--yes"))
    assert hidden() == ["diary.md"]

    (root / ".trash").mkdir()
    (root / "diary.md").rename(root / ".trash/diary.md")
    ok(kms("index"))
    ok(kms("trash", "restore", "diary"))
    ok(kms("index"))
    assert (root / "diary.md").is_file() and hidden() == ["diary.md"]

    data = (root / "diary.md").read_bytes()
    (root / "diary.md").unlink()
    ok(kms("index"))
    (root / "elsewhere").mkdir()
    (root / "elsewhere/diary copy.md").write_bytes(data)  # put back elsewhere: the same bytes
    ok(kms("index"))
    assert hidden() == ["elsewhere/diary copy.md"]

    ok(kms("vault", "remove", "v"))
    moved = tmp_path / "v-moved"
    root.rename(moved)
    ok(kms("vault", "add", str(moved), "--name", "v"))
    assert hidden() == ["elsewhere/diary copy.md"]
    assert "Visible again" in said(ok(kms("unhide", "diary copy")).stdout)
    assert json.loads(ok(kms("search", "HIDECANARY91", "--json")).stdout)["hits"] != []  # the check can fail
