"""The real ``kms`` CLI in subprocesses, against a DB and settings file in tmp_path (issues 2 and 3).

CLI start-up dominates the cost, so independent commands of one test run concurrently.
"""

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
from support.vaults import SAMPLE_VAULT, write

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KMS_")}
    env.update(KMS_DB_PATH=str(tmp_path / "kms.db"), KMS_CONFIG=str(tmp_path / "config.toml"),
               COLUMNS="200", NO_COLOR="1", PYTHONIOENCODING="utf-8")
    env.pop("FORCE_COLOR", None)
    env.update(extra)
    if "FORCE_COLOR" in extra:
        env.pop("NO_COLOR", None)
    return env


Command = list[str] | tuple[list[str], dict[str, str]]


def run_many(tmp_path: Path, *commands: Command, **env: str) -> list[subprocess.CompletedProcess]:
    """Run ``kms <args>`` for each command at once (a command may carry its own extra env); results in order."""
    procs = []
    for cmd in commands:
        args, extra = cmd if isinstance(cmd, tuple) else (cmd, {})
        e = env_for(tmp_path, **env, **extra)
        procs.append((args, subprocess.Popen([sys.executable, "-m", "kmscli", *args], stdout=subprocess.PIPE,
                                             stderr=subprocess.PIPE, text=True, encoding="utf-8", env=e,
                                             cwd=tmp_path)))
    out = []
    for args, p in procs:
        stdout, stderr = p.communicate(timeout=90)
        out.append(subprocess.CompletedProcess(args, p.returncode, stdout, stderr))
    return out


def kms(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return run_many(tmp_path, list(args), **env)[0]


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, f"kms {' '.join(result.args)} -> {result.returncode}\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def tree_hashes(root: Path) -> dict[str, str]:
    return {p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


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
    write(root / "cli" / "Widget manual.md",
          "---\ntags: [manual]\n---\n# Widget manual\n\nThe sprocket calibration routine for widgets. [[Widget FAQ]]\n")
    write(root / "cli" / "Widget FAQ.md", "# Widget FAQ\n\nQuestions about the sprocket. See [[Widget manual]].\n")
    conn = connect(tmp_path / "kms.db")
    assert not index_vault(conn, add_vault(conn, root, "notes")).errors
    conn.close()
    return root


def test_vault_add_list_remove_leaves_files_untouched(tmp_path: Path) -> None:
    root = tmp_path / "mine"
    shutil.copytree(SAMPLE_VAULT, root)
    before = tree_hashes(root)
    no_vault = kms(tmp_path, "index")
    assert no_vault.returncode != 0 and "kms vault add" in no_vault.stderr and "Traceback" not in no_vault.stderr
    added = ok(kms(tmp_path, "vault", "add", str(root), "--name", "mine"))
    assert "Added vault mine" in added.stdout
    assert f"+{md_count(root)} new" in added.stdout

    listed, dup, bad = run_many(tmp_path, ["vault", "list", "--json"], ["vault", "add", str(root)],
                                ["vault", "add", str(tmp_path / "nope")])
    data = json.loads(ok(listed).stdout)
    assert [(v["name"], v["root"], v["notes"], v["hidden"]) for v in data] == [
        ("mine", str(root.resolve()), md_count(root), 0)]
    assert dup.returncode != 0 and "already registered" in dup.stderr and "Traceback" not in dup.stderr
    assert bad.returncode == 2 and "is not a folder" in bad.stderr and "Traceback" not in bad.stderr

    removed = ok(kms(tmp_path, "vault", "remove", "mine"))
    assert "untouched" in removed.stdout
    after_list, gone = run_many(tmp_path, ["vault", "list", "--json"], ["vault", "remove", "mine"])
    assert json.loads(ok(after_list).stdout) == []
    assert gone.returncode == 3 and "no vault named 'mine'" in gone.stderr
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
    first = ok(kms(tmp_path, "index"))
    assert "v: 3 files, +3 new" in first.stdout and "1 flagged" in first.stdout
    write(root / "c.md", "gamma")
    again = ok(kms(tmp_path, "index"))
    assert "+1 new" in again.stdout and "3 unchanged" in again.stdout
    full = ok(kms(tmp_path, "index", "--full"))
    assert "~4 changed" in full.stdout
    status = json.loads(ok(kms(tmp_path, "status", "--json")).stdout)
    assert status["notes"] == 4 and status["hidden"] == 0
    assert status["tags"] == 2 and status["links"] == 2 and status["unresolvedLinks"] == 1
    assert status["flaggedCount"] == 1 and status["flagged"][0]["path"] == "broken.md"
    assert "invalid YAML" in status["flagged"][0]["reason"]
    assert status["dbPath"] == str(tmp_path / "kms.db") and status["dbBytes"] > 0
    assert status["vaults"][0]["name"] == "v" and status["vaults"][0]["lastIndexedAt"] > 0


def test_read_commands(tmp_path: Path, cli_vault: Path) -> None:
    from server.store.db import connect

    conn = connect(tmp_path / "kms.db")
    nid = conn.execute("SELECT id FROM notes WHERE title = 'Widget manual'").fetchall()[0][0]
    conn.close()
    (as_json, bad, nothing, colored, by_title, by_id, by_path, text, unknown, tags, recent, backlinks) = run_many(
        tmp_path, ["search", "sprocket", "--json", "-n", "5"],
        ["search", '"unbalanced'], ["search", "xylophonezzz"],
        (["search", "sprocket"], {"FORCE_COLOR": "1", "TERM": "xterm-256color"}),
        ["show", "widget manual", "--json"], ["show", nid, "--json"], ["show", "cli/Widget manual.md", "--json"],
        ["show", nid], ["show", "Widget manul"],
        ["tags", "--json"], ["recent", "--json", "-n", "3"], ["backlinks", "Widget manual", "--json"])

    # search: ranked hits with highlighted excerpts; bad FTS syntax is a clear error, not a traceback
    hits = json.loads(ok(as_json).stdout)["hits"]
    assert {h["title"] for h in hits} == {"Widget manual", "Widget FAQ"}
    assert all("**sprocket**" in h["excerpt"].lower() and h["score"] > 0 for h in hits)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "invalid-input" in bad.stderr and "cannot parse the search query" in bad.stderr
    assert "No matches." in ok(nothing).stdout
    # the matched word is styled (bold yellow), not shown with raw ** markers
    assert re.search(r"\x1b\[[0-9;]*m[Ss]procket\x1b\[0?m", colored.stdout), colored.stdout
    assert "**" not in ANSI.sub("", colored.stdout) and "Widget manual" in ANSI.sub("", colored.stdout)

    # show: by id, title (any case) or path; an unknown name suggests close matches
    note = json.loads(ok(by_title).stdout)
    assert note["id"] == nid and note["tags"] == ["manual"] and note["vault"] == "notes"
    assert json.loads(ok(by_id).stdout)["path"] == "cli/Widget manual.md"
    assert json.loads(ok(by_path).stdout)["id"] == nid
    out = ok(text).stdout
    assert "Widget manual" in out and nid in out and "sprocket calibration routine" in out
    assert unknown.returncode == 3 and "Traceback" not in unknown.stderr
    assert "not-found" in unknown.stderr and "did you mean" in unknown.stderr and "Widget manual" in unknown.stderr

    # listings
    tag_rows = json.loads(ok(tags).stdout)
    assert {"tag": "manual", "count": 1} in tag_rows
    counts = [(-t["count"], t["tag"]) for t in tag_rows]
    assert counts == sorted(counts)
    notes = json.loads(ok(recent).stdout)
    assert len(notes) == 3
    keys = [(-n["updatedAt"], n["noteId"]) for n in notes]
    assert keys == sorted(keys)
    assert {"Widget manual", "Widget FAQ"} <= {n["title"] for n in notes}  # written last
    links = json.loads(ok(backlinks).stdout)
    assert [b["title"] for b in links] == ["Widget FAQ"]
    assert "[[Widget manual]]" in links[0]["snippet"]


def test_hide_and_unhide(tmp_path: Path, cli_vault: Path) -> None:
    hidden = ok(kms(tmp_path, "hide", "Widget FAQ"))
    assert "Hidden: Widget FAQ" in hidden.stdout
    search, show, status, links = run_many(tmp_path, ["search", "sprocket", "--json"], ["show", "Widget FAQ"],
                                           ["status", "--json"], ["backlinks", "Widget manual", "--json"])
    assert [h["title"] for h in json.loads(ok(search).stdout)["hits"]] == ["Widget manual"]
    assert "HIDDEN" in ok(show).stdout  # the person still sees their own note
    assert json.loads(ok(status).stdout)["hidden"] == 1
    assert json.loads(ok(links).stdout) == []
    assert "Visible again: Widget FAQ" in ok(kms(tmp_path, "unhide", "Widget FAQ")).stdout
    hits = json.loads(ok(kms(tmp_path, "search", "sprocket", "--json")).stdout)["hits"]
    assert {h["title"] for h in hits} == {"Widget manual", "Widget FAQ"}
