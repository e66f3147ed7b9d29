"""The small things a newcomer trips on (issue 32), each with its repro: a literal ``None`` and a notice on stdout
from ``kms search --semantic``, ``kms session list`` and ``kms log`` at 80 columns, a model installed for one
database but "not ready" for another, suggestions that repeat a shared title, ``kms tags -n``, the unresolved
link names, and what ``kms mcp-config --uninstall`` leaves behind."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import apsw
import pytest
from support.cli import kms, ok, refused, said
from support.vaults import write
from support.writes import Writer

from kmscli import hosts
from server.activity.session_registry import start_session
from server.config.settings import set_value
from server.errors import KmsError
from server.index.embed_pending import REQUIRED_FILES
from server.index.indexer import index_vault
from server.index.notes import find_note
from server.vault.registry import get_vault


def reindex(conn: apsw.Connection) -> None:
    index_vault(conn, get_vault(conn, str(conn.execute("SELECT name FROM vaults").fetchall()[0][0])))


def test_semantic_search_without_a_model_prints_no_none_and_its_notice_on_stderr(
    indexed: apsw.Connection, vault_dir: Path, tmp_path: Path
) -> None:
    write(vault_dir / "Kettle.md", "# Kettle\n\nDescale the kettle with citric acid.\n")
    reindex(indexed)
    set_value(
        "embed.model_dir", str(tmp_path / "no-model"), path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True
    )
    result = ok(kms("search", "kettle zzzyqx", "--semantic"))  # one word matches nothing: the any-word fallback
    lines = result.stdout.splitlines()
    assert "Kettle" in result.stdout and "None" not in lines and all(line.strip() != "None" for line in lines)
    assert "unavailable" not in result.stdout and "semantic search unavailable" in said(result.stderr)


def test_tags_takes_n(indexed: apsw.Connection) -> None:
    every = json.loads(ok(kms("tags", "--json")).stdout)
    assert len(every) > 3
    assert json.loads(ok(kms("tags", "-n", "2", "--json")).stdout) == every[:2]
    assert len([line for line in ok(kms("tags", "-n", "3")).stdout.splitlines() if "#" in line]) == 3


def test_unresolved_lists_the_link_names_no_note_answers(indexed: apsw.Connection, vault_dir: Path) -> None:
    write(vault_dir / "Plans.md", "# Plans\n\nSee [[Nowhere note]] and [[Nowhere note]] and [[Also missing]].\n")
    reindex(indexed)
    data = json.loads(ok(kms("unresolved", "--json")).stdout)
    names = {u["target"]: u["links"] for u in data["unresolved"]}
    assert names["Nowhere note"] == 2 and names["Also missing"] == 1 and data["links"] >= 3
    shown = ok(kms("unresolved")).stdout
    assert "[[Nowhere note]]" in shown and "Plans" in shown


def test_a_title_several_notes_share_is_suggested_by_their_paths_once_each(
    indexed: apsw.Connection, vault_dir: Path
) -> None:
    for folder in ("a", "b", "c"):
        write(vault_dir / folder / "11.md", "# 11\n\neleven\n")
    reindex(indexed)
    with pytest.raises(KmsError) as missing:
        find_note(indexed, "111")
    close = missing.value.extra["suggestions"]
    assert close.count("11") == 0 and {"a/11.md", "b/11.md", "c/11.md"} <= set(close)
    assert len(close) == len(set(close))


def test_a_model_installed_once_is_found_with_another_database(tmp_path: Path) -> None:
    source = tmp_path / "model-src"
    source.mkdir()
    for name in REQUIRED_FILES:
        (source / name).write_text("x")
    ok(kms("model", "install", "--from", str(source), KMS_DB_PATH=str(tmp_path / "one" / "kms.db")))
    other = json.loads(ok(kms("model", "status", "--json", KMS_DB_PATH=str(tmp_path / "two" / "kms.db"))).stdout)
    assert other["filesOk"] and other["source"] == "installed", other
    assert not (tmp_path / "one" / "models").exists()  # not beside the first database


def run80(*args: str) -> str:
    """``kms ARGS`` in a terminal 80 columns wide (the width rich reads when the console is made)."""
    env = {**os.environ, "COLUMNS": "80", "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "kmscli", *args], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return done.stdout


def test_session_list_and_log_fit_80_columns_with_whole_headers_and_paths(
    indexed: apsw.Connection, vault_dir: Path, db_path: Path
) -> None:
    write(vault_dir / "reference" / "A Philosophy of Software Design.md", "# A Philosophy of Software Design\n\nx\n")
    reindex(indexed)
    sid = "s3f9a1b2c4d5e"
    start_session(indexed, kind="server", session_id=sid, argv=["kms", "mcp"])
    writer = Writer(db_path, sid)
    [[nid]] = indexed.execute("SELECT id FROM notes WHERE path LIKE 'reference/A Philosophy%'").fetchall()
    assert writer.append(nid, "more")["changed"]
    sessions = run80("session", "list")
    assert max(len(line) for line in sessions.splitlines()) <= 80 and "…" not in sessions
    for header in ("session", "kind", "state", "writes", "total", "calls", "reads", "pending", "started"):
        assert header in sessions
    assert sid in sessions and "server" in sessions
    log = run80("log")
    assert max(len(line) for line in log.splitlines()) <= 80
    assert "reference/A Philosophy of Software Design.md" in log.splitlines()[1]  # the whole path on one line
    assert sid in log and "kms_append" in log and "✓ ok" in log


@pytest.mark.parametrize("host", sorted(hosts.HOSTS))
def test_uninstall_leaves_the_file_as_it_was_and_no_backup(tmp_path: Path, host: str) -> None:
    spec = hosts.get_host(host)
    entry = {"command": "kms", "args": ["mcp"]}
    fresh = tmp_path / f"fresh.{spec.fmt}"
    hosts.install(spec, entry, fresh)
    hosts.uninstall(spec, fresh)
    assert not fresh.exists(), "a file kms made for itself goes with it"
    kept = tmp_path / f"kept.{spec.fmt}"
    before = '# mine\nmodel = "x"\n' if spec.fmt == "toml" else '{\n  "theme": "dark"\n}\n'
    kept.write_text(before)
    hosts.install(spec, entry, kept)
    assert (tmp_path / f"kept.{spec.fmt}.kms-backup").read_text() == before
    hosts.uninstall(spec, kept)
    assert kept.read_text() == before  # no empty server map, no whitespace-only line
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"kept.{spec.fmt}"]


def test_uninstall_keeps_other_servers_and_a_backup_of_what_it_changed(tmp_path: Path) -> None:
    spec = hosts.get_host("cursor")
    path = tmp_path / "mcp.json"
    path.write_text('{\n  "mcpServers": {\n    "other": {"command": "x"}\n  }\n}\n')
    hosts.install(spec, {"command": "kms"}, path)
    path.write_text(path.read_text().replace('"x"', '"y"'))  # the person changed something since
    _, backup, found = hosts.uninstall(spec, path)
    assert found and backup is not None and backup.exists()
    text = path.read_text()
    assert json.loads(text) == {"mcpServers": {"other": {"command": "y"}}}
    assert all(line.strip() for line in text.splitlines())


def test_a_mistyped_database_path_is_said_and_nothing_is_made_there(tmp_path: Path, vault_dir: Path) -> None:
    """Read commands at a ``KMS_DB_PATH`` with no database name the path; they make no database, no folder."""
    typo = tmp_path / "typo" / "deep" / "kms.db"
    for args in (["search", "pasta"], ["vault", "list"], ["status"], ["tags"], ["show", "x"], ["recent"]):
        result = kms(*args, KMS_DB_PATH=str(typo))
        assert result.exit_code == 3 and isinstance(result.exception, SystemExit), (args, result.output)
        assert said(result.stderr) == (
            f"error (not-found): no kms database at {typo} (KMS_DB_PATH); `kms vault add FOLDER` creates it"
        ), args
    assert not (tmp_path / "typo").exists()
    ok(kms("vault", "add", str(vault_dir), KMS_DB_PATH=str(typo)))
    assert typo.exists() and "vault" in ok(kms("vault", "list", KMS_DB_PATH=str(typo))).stdout


def test_vault_names_say_what_is_wrong_and_an_empty_listing_says_so(tmp_path: Path, vault_dir: Path) -> None:
    bad = refused(kms("vault", "add", str(vault_dir), "--name", "-dash"), 2)
    assert "'-dash' is no vault name" in said(bad.stderr) and "not starting with '.' or '-'" in said(bad.stderr)
    assert "an empty vault name" in said(refused(kms("vault", "add", str(vault_dir), "--name", ""), 2).stderr)
    ok(kms("vault", "add", str(vault_dir), "--name", "mine"))
    other = tmp_path / "other"
    other.mkdir()
    taken = refused(kms("vault", "add", str(other), "--name", "mine"), 1)
    assert "a vault named 'mine' exists; choose another with --name" in said(taken.stderr)
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "plain.md").write_text("# Plain\n\nno tags\n")
    ok(kms("vault", "add", str(empty), "--name", "plain"))
    assert ok(kms("tags", "--vault", "plain")).stdout.strip() == "No tags yet (on the notes an agent can see)."


def test_a_long_vault_path_is_printed_whole(tmp_path: Path) -> None:
    """A path is never broken across lines (a copy of it must work): narrow terminals and pipes included."""
    deep = tmp_path / ("a-rather-long-folder-name-" * 4) / "notes"
    write(deep / "n.md", "# n\n")
    out = ok(kms("vault", "add", str(deep), "--name", "deep")).stdout
    assert f"Added vault deep at {deep} (obsidian)" in out.splitlines()
