"""``kms history``, ``kms diff``, ``kms restore`` and ``kms history prune|forget`` in process: tables, JSON,
the confirmation, typed refusals and exits."""

from __future__ import annotations

import json
import os
from pathlib import Path

import apsw
import pytest
from support.cli import kms, ok, refused, said

from server.index.incremental import reindex_file
from server.index.indexer import index_vault
from server.vault.registry import add_vault, get_vault


@pytest.fixture
def vault(tmp_path: Path, conn: apsw.Connection) -> Path:
    root = tmp_path / "v"
    root.mkdir()
    (root / "Plan.md").write_bytes(b"# Plan\n\nfirst\n")
    index_vault(conn, add_vault(conn, root, "v"))
    (root / "Plan.md").write_bytes(b"# Plan\n\nfirst\nsecond\n")
    reindex_file(conn, get_vault(conn, "v"), "Plan.md")
    return root


def test_history_lists_versions_newest_first_and_as_json(vault: Path) -> None:
    out = ok(kms("history", "Plan.md")).stdout
    assert "v:Plan.md" in out and "outside kms" in said(out)
    data = json.loads(ok(kms("history", "Plan", "--json")).stdout)
    assert [v["version"] for v in data["versions"]] == [2, 1] and data["versions"][0]["sizeChange"] == 7
    assert refused(kms("history", "Nothing.md"), 3)


def test_diff_shows_the_change_to_the_note_now_or_between_versions(vault: Path) -> None:
    out = ok(kms("diff", "Plan.md")).stdout  # no version named: the newest unlike the file now
    assert "(version 1)" in out and "+second" in out
    between = ok(kms("diff", "Plan.md", "--version", "1", "--to", "2")).stdout
    assert "+second" in between
    (vault / "Plan.md").write_bytes(b"# Plan\n\nrewritten\n")
    assert "+rewritten" in ok(kms("diff", "Plan.md", "--version", "2")).stdout
    assert refused(kms("diff", "Plan.md", "--at", "yesterday-ish"), 2)


def test_restore_asks_then_writes_the_version_back_recorded_and_revertible(vault: Path) -> None:
    no = kms("restore", "Plan.md", "--version", "1", input="n\n")
    assert no.exit_code == 1 and (vault / "Plan.md").read_bytes() == b"# Plan\n\nfirst\nsecond\n"
    done = json.loads(ok(kms("restore", "Plan.md", "--version", "1", "--yes", "--json")).stdout)
    assert (vault / "Plan.md").read_bytes() == b"# Plan\n\nfirst\n"
    ok(kms("revert", str(done["invocationId"]), "--yes"))
    assert (vault / "Plan.md").read_bytes() == b"# Plan\n\nfirst\nsecond\n"
    assert refused(kms("restore", "Plan.md"), 2)  # neither --at nor --version


def test_restore_brings_back_a_deleted_note_by_its_old_path(vault: Path, conn: apsw.Connection) -> None:
    os.unlink(vault / "Plan.md")
    index_vault(conn, get_vault(conn, "v"))
    out = ok(kms("history", "Plan.md")).stdout
    assert "(deleted)" in out
    ok(kms("restore", "Plan.md", "--at", "0d", "--yes"))
    assert (vault / "Plan.md").read_bytes() == b"# Plan\n\nfirst\nsecond\n"


def test_diff_of_a_deleted_note_shows_its_text_removed_and_how_to_bring_it_back(
    vault: Path, conn: apsw.Connection
) -> None:
    """It compared the newest version with itself and said "(no difference)"."""
    os.unlink(vault / "Plan.md")
    index_vault(conn, get_vault(conn, "v"))
    out = said(ok(kms("diff", "Plan.md")).stdout)
    assert "Plan.md (version 2)" in out and "Plan.md (deleted)" in out
    assert "-first -second" in out and "(no difference)" not in out
    assert "kms restore Plan.md --version 2" in out
    data = json.loads(ok(kms("diff", "Plan.md", "--json")).stdout)
    assert data["deleted"] is True and data["from"]["version"] == 2 and data["to"] is None
    assert "-# Plan" in data["diff"]
    older = said(ok(kms("diff", "Plan.md", "--version", "1")).stdout)  # version 1 against the note now: gone
    assert "Plan.md (version 1)" in older and "(deleted)" in older and "-first" in older
    assert json.loads(ok(kms("diff", "Plan.md", "--version", "1", "--to", "2", "--json")).stdout)["deleted"] is False


def test_forget_asks_then_purges_and_prune_reports(vault: Path) -> None:
    assert kms("history", "forget", "Plan.md", input="n\n").exit_code == 1
    assert "forgot 2 version(s)" in ok(kms("history", "forget", "Plan.md", "--yes")).stdout
    assert refused(kms("history", "Plan.md"), 3)
    report = json.loads(ok(kms("history", "prune", "--json")).stdout)
    assert report["versions"] == 0


def test_a_note_named_like_a_history_command_is_shown_by_history_show(vault: Path, conn: apsw.Connection) -> None:
    (vault / "prune.md").write_bytes(b"# prune\n\nthe note, not the command\n")
    reindex_file(conn, get_vault(conn, "v"), "prune.md")
    data = json.loads(ok(kms("history", "show", "prune", "--json")).stdout)
    assert [v["version"] for v in data["versions"]] == [1]
    assert "kms history show NOTE" in said(ok(kms("history", "--help")).stdout)


LONG_V1 = b"# Long\n\n" + b"a line far longer than any terminal, " * 12 + b"\nkept\n"
LONG_NOW = b"# Long\n\n" + b"the same line rewritten, far longer than eighty columns, " * 8 + b"\nkept\nno newline"


@pytest.mark.parametrize("apply", [["git", "apply"], ["patch", "-p1", "--quiet", "-i"]])
def test_a_diff_written_to_a_file_applies_whatever_the_width(
    tmp_path: Path, conn: apsw.Connection, apply: list[str]
) -> None:
    """At 80 columns `kms diff NOTE --version 1 > d.patch` wrapped each long line, and the wrapped half had no
    diff prefix: the patch did not apply. A last line without a newline is marked as diff marks it."""
    import subprocess

    root = tmp_path / "v"
    root.mkdir()
    (root / "Long.md").write_bytes(LONG_V1)
    index_vault(conn, add_vault(conn, root, "v"))
    (root / "Long.md").write_bytes(LONG_NOW)
    reindex_file(conn, get_vault(conn, "v"), "Long.md")
    patch = ok(kms("diff", "Long.md", "--version", "1", COLUMNS="80")).stdout
    assert max(len(line) for line in patch.splitlines()) > 80 and "\\ No newline at end of file" in patch
    work = tmp_path / "work"
    work.mkdir()
    (work / "Long.md").write_bytes(LONG_V1)
    (work / "d.patch").write_text(patch)
    done = subprocess.run([*apply, "d.patch"], cwd=work, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr + done.stdout
    assert (work / "Long.md").read_bytes() == LONG_NOW
