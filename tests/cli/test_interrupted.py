"""Ctrl-C during ``kms vault add`` / ``kms index`` says what was kept and what to run next; a vault
registered but never indexed is indexed by the next ``kms vault add`` of the same folder."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
from support.cli import interruptible, kms, ok, refused, said
from support.sql import value

ROOT = Path(__file__).resolve().parents[2]


def many_notes(folder: Path, count: int) -> Path:
    folder.mkdir()
    for i in range(count):
        (folder / f"note {i:05d}.md").write_text(f"# Note {i}\n\nwords about topic {i} and [[note {i + 1:05d}]]\n")
    return folder


def test_ctrl_c_during_vault_add_says_what_was_kept_and_the_next_add_finishes(tmp_path: Path, db_path: Path) -> None:
    vault = many_notes(tmp_path / "big", 20_000)  # a window wide enough to interrupt on a loaded machine
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "vault", "add", str(vault)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # interrupt once the vault is registered
        if db_path.exists():
            try:
                conn = apsw.Connection(str(db_path), flags=apsw.SQLITE_OPEN_READONLY)
                found = value(conn, "SELECT count(*) FROM vaults")
                conn.close()
            except apsw.Error:
                found = 0
            if found:
                break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, out + err
    assert "Traceback" not in err
    text = said(err)
    assert "stopped; kept vault big:" in text and "notes in the index" in text
    assert "run `kms index --vault big` to finish indexing" in text
    again = said(ok(kms("vault", "add", str(vault))).stdout)
    assert "was registered but never indexed: indexing it now" in again
    conn = apsw.Connection(str(db_path))
    assert value(conn, "SELECT count(*) FROM notes") == 20_000
    conn.close()


def test_a_vault_registered_without_its_index_is_indexed_by_the_next_add(vault_dir: Path, db_path: Path) -> None:
    ok(kms("vault", "add", str(vault_dir), "--no-index"))
    again = said(ok(kms("vault", "add", str(vault_dir))).stdout)
    assert "registered but never indexed: indexing it now" in again and " new" in again
    conn = apsw.Connection(str(db_path))
    assert value(conn, "SELECT count(*) FROM notes") > 20
    conn.close()
    third = refused(kms("vault", "add", str(vault_dir)))
    assert "already registered" in said(third.stderr) and "`kms index --vault vault` brings its index" in said(
        third.stderr
    )


def test_doctor_says_to_index_a_vault_that_never_was(vault_dir: Path) -> None:
    ok(kms("vault", "add", str(vault_dir), "--no-index"))
    assert "indexed never: kms index --vault vault" in said(kms("doctor").stdout)
    ok(kms("index"))
    assert "kms index --vault" not in said(kms("doctor").stdout)


def test_ctrl_c_during_kms_index_says_what_was_kept(tmp_path: Path, db_path: Path) -> None:
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    vault = many_notes(tmp_path / "big", 20_000)  # a window wide enough to interrupt on a loaded machine
    conn = connect(db_path)
    index_vault(conn, add_vault(conn, vault, "big"))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    for note in vault.iterdir():  # every note changed: the index writes them all again
        note.write_text(note.read_text() + "one more line\n")
    wal = Path(f"{db_path}-wal")
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "index", "--no-embed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:  # interrupt once it writes rows
        if wal.exists() and wal.stat().st_size > 1024 * 1024:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    if proc.returncode == 0:  # it finished first: nothing to say about an interruption
        return
    assert proc.returncode == 130 and "Traceback" not in err, out + err
    text = said(err)
    assert "stopped; kept vault big:" in text and "run `kms index` to finish indexing" in text
    ok(kms("index", "--no-embed"))


def interrupt_once_registered(
    tmp_path: Path, db_path: Path, vault_dir: Path, where: str
) -> subprocess.CompletedProcess:
    """``kms vault add`` (``python -m``) with a KeyboardInterrupt raised, for certain, in the first frame
    of code built from a string (``where``: a condition on its code object) once the vault is registered."""
    (tmp_path / "ctrl_c_once_registered.py").write_text(
        "import sys\n"
        "import apsw\n"
        "from kmscli.entry import entry\n"
        "def registered():\n"
        f"    conn = apsw.Connection({str(db_path)!r})\n"
        "    try:\n        return next(conn.execute('SELECT count(*) FROM vaults'))[0] > 0\n"
        "    except apsw.Error:\n        return False\n"
        "    finally:\n        conn.close()\n"
        "def ctrl_c(frame, event, arg):\n"
        "    code = frame.f_code\n"
        f"    if code.co_filename == '<string>' and {where} and registered():\n"
        "        sys.settrace(None)\n"
        "        raise KeyboardInterrupt\n"
        "sys.settrace(ctrl_c)\n"
        f"sys.argv = ['kms', 'vault', 'add', {str(vault_dir)!r}]\n"
        "entry()\n"
    )
    return subprocess.run(
        [sys.executable, "-m", "ctrl_c_once_registered"], capture_output=True, text=True, cwd=tmp_path
    )


def test_a_ctrl_c_inside_exec_still_exits_130(tmp_path: Path, vault_dir: Path, db_path: Path) -> None:
    """CPython marks a Ctrl-C raised inside ``exec`` of a string (the dataclasses a deferred import builds)
    unhandled even when kms catches it, and ``python -m`` then ends by SIGINT, not by kms's 130."""
    done = interrupt_once_registered(tmp_path, db_path, vault_dir, "code.co_name == '<module>'")
    assert done.returncode == 130, done.stdout + done.stderr
    assert "stopped; kept vault vault:" in said(done.stderr)


def test_a_ctrl_c_just_after_the_vault_is_registered_says_it_was(
    tmp_path: Path, vault_dir: Path, db_path: Path
) -> None:
    """Interrupted after its row is committed and before ``add_vault`` returns (building the ``Vault`` it
    hands back): the vault is registered, and the message says so and what to run."""
    done = interrupt_once_registered(tmp_path, db_path, vault_dir, "code.co_name == '__init__'")
    assert done.returncode == 130, done.stdout + done.stderr
    text = said(done.stderr)
    assert "stopped; kept vault vault: 0 notes in the index" in text and "nothing kept" not in text
    again = said(ok(kms("vault", "add", str(vault_dir))).stdout)
    assert "was registered but never indexed: indexing it now" in again
