"""The real ``kms`` CLI (Typer's ``CliRunner``, in process) against a DB and settings file in tmp_path
(issues 2 and 3). Only the colour check runs a subprocess (see ``colored_search``)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support.cli import kms, ok, refused, said
from support.sql import value
from support.vaults import SAMPLE_VAULT, write

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def colored_search(tmp_path: Path, query: str) -> subprocess.CompletedProcess:
    """``kms search`` in a subprocess: rich decides about colour from the environment when its
    console is created at start-up (``FORCE_COLOR``), which an in-process runner cannot redo."""
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(FORCE_COLOR="1", TERM="xterm-256color", COLUMNS="200", PYTHONIOENCODING="utf-8")
    return subprocess.run(
        [sys.executable, "-m", "kmscli", "search", query],
        capture_output=True,
        text=True,
        encoding="utf-8",
        env=env,
        cwd=tmp_path,
        timeout=90,
        check=True,
    )


def tree_hashes(root: Path) -> dict[str, str]:
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def md_count(root: Path) -> int:
    return sum(1 for p in root.rglob("*.md") if not any(part.startswith(".") for part in p.relative_to(root).parts))


@pytest.fixture
def cli_vault(tmp_path: Path) -> Path:
    """The sample vault plus two notes these tests rely on, registered and indexed (in-process: fast)."""
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    root = tmp_path / "notes"
    shutil.copytree(SAMPLE_VAULT, root)
    write(
        root / "cli" / "Widget manual.md",
        "---\ntags: [manual]\n---\n# Widget manual\n\nThe sprocket calibration routine for widgets. [[Widget FAQ]]\n",
    )
    write(root / "cli" / "Widget FAQ.md", "# Widget FAQ\n\nQuestions about the sprocket. See [[Widget manual]].\n")
    conn = connect(tmp_path / "kms.db")
    assert not index_vault(conn, add_vault(conn, root, "notes")).errors
    conn.close()
    return root


def test_vault_add_list_remove_leaves_files_untouched(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    shutil.copytree(SAMPLE_VAULT, root)
    before = tree_hashes(root)
    assert "kms vault add" in said(refused(kms("index")).stderr)
    added = ok(kms("vault", "add", str(root), "--name", "mine"))
    assert "Added vault mine" in said(added.stdout)
    assert f"+{md_count(root)} new" in said(added.stdout)

    data = json.loads(ok(kms("vault", "list", "--json")).stdout)
    assert [(v["name"], v["root"], v["notes"], v["hidden"]) for v in data] == [
        ("mine", str(root.resolve()), md_count(root), 1)
    ]  # "Therapy notes" has private: true
    assert "already registered" in said(refused(kms("vault", "add", str(root))).stderr)
    missing = said(refused(kms("vault", "add", str(tmp_path / "nope")), 3).stderr)
    assert missing.startswith("error (not-found): no folder at"), missing
    (tmp_path / "a-file.md").write_text("# not a vault\n")
    assert "is a file, not a folder" in said(refused(kms("vault", "add", str(tmp_path / "a-file.md")), 2).stderr)
    (tmp_path / "empty").mkdir()
    said_on_add = said(ok(kms("vault", "add", str(tmp_path / "empty"))).stdout)
    assert "no Markdown (.md) file in empty" in said_on_add, said_on_add
    ok(kms("vault", "remove", "empty"))
    table = said(ok(kms("vault", "list")).stdout)
    assert "mine" in table and str(md_count(root)) in table

    removed = ok(kms("vault", "remove", "mine"))
    assert "untouched" in said(removed.stdout)
    assert json.loads(ok(kms("vault", "list", "--json")).stdout) == []
    assert "No vaults yet" in said(ok(kms("vault", "list")).stdout)
    assert "no vault named 'mine'" in said(refused(kms("vault", "remove", "mine"), 3).stderr)
    assert tree_hashes(root) == before


def test_index_full_and_status_json(tmp_path: Path) -> None:
    from server.store.db import connect
    from server.vault.registry import add_vault

    root = tmp_path / "v"
    write(root / "a.md", "---\ntags: [alpha]\n---\n# A\n[[b]] [[missing]]\n")
    write(root / "b.md", "# B\n#beta")
    write(root / "broken.md", "---\ndate: {{date}}\n---\nbody")
    conn = connect(tmp_path / "kms.db")
    add_vault(conn, root, "v")
    conn.close()
    first = ok(kms("index"))
    assert "v: 3 files, +3 new" in said(first.stdout) and "1 flagged" in said(first.stdout)
    write(root / "c.md", "gamma")
    again = ok(kms("index"))
    assert "+1 new" in said(again.stdout) and "3 unchanged" in said(again.stdout)
    full = ok(kms("index", "--full"))
    assert "4 unchanged" in said(full.stdout)
    status = json.loads(ok(kms("status", "--json")).stdout)
    assert status["notes"] == 4 and status["hidden"] == 0
    assert status["tags"] == 2 and status["links"] == 2 and status["unresolvedLinks"] == 1
    assert status["flaggedCount"] == 1 and status["flagged"][0]["path"] == "broken.md"
    assert "invalid YAML" in status["flagged"][0]["reason"] and status["flagged"][0]["vault"] == "v"
    assert "flagged v:broken.md" in said(ok(kms("status")).stdout)  # which vault: a path can be in two
    assert status["dbPath"] == str(tmp_path / "kms.db") and status["dbBytes"] > 0
    assert status["vaults"][0]["name"] == "v" and status["vaults"][0]["lastIndexedAt"] > 0


def test_read_commands(tmp_path: Path, cli_vault: Path) -> None:
    from server.store.db import connect

    conn = connect(tmp_path / "kms.db")
    nid = value(conn, "SELECT id FROM notes WHERE title = 'Widget manual'")
    conn.close()

    # search: ranked hits with highlighted excerpts; bad FTS syntax is a clear error, not a traceback
    hits = json.loads(ok(kms("search", "sprocket", "--json", "-n", "5")).stdout)["hits"]
    assert {h["title"] for h in hits} == {"Widget manual", "Widget FAQ"}
    assert all("**sprocket**" in h["excerpt"].lower() and h["score"] > 0 for h in hits)
    bad = refused(kms("search", '"unbalanced'), 2)
    assert "invalid-input" in said(bad.stderr) and "cannot parse the search query" in said(bad.stderr)
    assert "No matches." in said(ok(kms("search", "xylophonezzz")).stdout)
    plain = said(ok(kms("search", "sprocket")).stdout)
    assert "Widget manual" in plain and "cli/Widget manual.md" in plain and "**" not in plain
    # the matched word is styled (bold yellow), not shown with raw ** markers
    colored = colored_search(tmp_path, "sprocket")
    assert re.search(r"\x1b\[[0-9;]*m[Ss]procket\x1b\[0?m", colored.stdout), colored.stdout
    assert "**" not in ANSI.sub("", colored.stdout) and "Widget manual" in ANSI.sub("", colored.stdout)

    # show: by id, title (any case) or path; an unknown name suggests close matches
    note = json.loads(ok(kms("show", "widget manual", "--json")).stdout)
    assert note["noteId"] == nid and note["tags"] == ["manual"] and note["vault"] == "notes"
    assert json.loads(ok(kms("show", nid, "--json")).stdout)["path"] == "cli/Widget manual.md"
    assert json.loads(ok(kms("show", "cli/Widget manual.md", "--json")).stdout)["noteId"] == nid
    out = said(ok(kms("show", nid)).stdout)
    assert "Widget manual" in out and nid in out and "sprocket calibration routine" in out
    unknown = said(refused(kms("show", "Widget manul"), 3).stderr)
    assert "not-found" in unknown and "did you mean" in unknown and "Widget manual" in unknown

    # listings
    tag_rows = json.loads(ok(kms("tags", "--json")).stdout)
    assert {"tag": "manual", "count": 1} in tag_rows
    counts = [(-t["count"], t["tag"]) for t in tag_rows]
    assert counts == sorted(counts)
    notes = json.loads(ok(kms("recent", "--json", "-n", "3")).stdout)
    assert len(notes) == 3
    keys = [(-n["updatedAt"], n["path"], n["noteId"]) for n in notes]
    assert keys == sorted(keys)
    assert {"Widget manual", "Widget FAQ"} <= {n["title"] for n in notes}  # written last
    assert "#manual" in said(ok(kms("tags")).stdout)
    assert "Widget FAQ" in said(ok(kms("recent", "-n", "3")).stdout)
    links = json.loads(ok(kms("backlinks", "Widget manual", "--json")).stdout)
    assert [b["title"] for b in links] == ["Widget FAQ"]
    assert "[[Widget manual]]" in links[0]["snippet"]
    assert "Widget FAQ" in said(ok(kms("backlinks", "Widget manual")).stdout)


def test_hide_and_unhide(tmp_path: Path, cli_vault: Path) -> None:
    hidden = ok(kms("hide", "Widget FAQ"))
    assert "Hidden: Widget FAQ" in said(hidden.stdout)
    hits = json.loads(ok(kms("search", "sprocket", "--json")).stdout)["hits"]
    assert [h["title"] for h in hits] == ["Widget manual"]
    assert "HIDDEN" in said(ok(kms("show", "Widget FAQ")).stdout)  # the person still sees their own note
    assert json.loads(ok(kms("status", "--json")).stdout)["hidden"] == 2  # and "Therapy notes" (private: true)
    assert json.loads(ok(kms("backlinks", "Widget manual", "--json")).stdout) == []
    assert "Visible again: Widget FAQ" in said(ok(kms("unhide", "Widget FAQ")).stdout)
    hits = json.loads(ok(kms("search", "sprocket", "--json")).stdout)["hits"]
    assert {h["title"] for h in hits} == {"Widget manual", "Widget FAQ"}


def test_status_shows_connected_sessions_with_their_write_limits(tmp_path: Path, cli_vault: Path) -> None:
    from server.activity.ratelimit import RateLimiter, record_limits
    from server.activity.session_registry import end_session, start_session
    from server.store.db import connect

    conn = connect(tmp_path / "kms.db")
    start_session(conn, session_id="sfresh0000001", kind="launcher")
    record_limits(conn, "sfresh0000001", RateLimiter(10, 200))
    start_session(conn, session_id="sended0000001")
    end_session(conn, "sended0000001", 0)
    conn.close()
    out = said(ok(kms("status")).stdout)
    assert re.search(
        r"session sfresh0000001 \(launcher, live, started \d+s ago\): "
        r"writes 0/10 this minute, 0/200 in all",
        out,
    ), out
    assert "sended0000001" not in out  # only sessions that are still there
    [s] = json.loads(ok(kms("status", "--json")).stdout)["sessions"]
    assert (s["id"], s["writesThisMinute"], s["writesTotal"], s["exhausted"]) == (
        "sfresh0000001",
        "0/10",
        "0/200",
        False,
    )
