"""Another process holds the database's write lock for longer than kms waits: every command that
writes, and ``kms mcp`` at start, waits its bounded time and then ends with one clear line, never a
traceback; a command that only reads is served meanwhile (WAL readers do not wait)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import apsw

ROOT = Path(__file__).resolve().parents[2]
INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25",'
    b'"capabilities":{},"clientInfo":{"name":"t","version":"0"}}}\n'
)
LOCKER = (
    "import apsw, sys\nc = apsw.Connection(sys.argv[1])\nc.execute('BEGIN IMMEDIATE')\n"
    "print('locked', flush=True)\nsys.stdin.read()\n"
)


def test_a_write_lock_held_by_another_process_is_one_line_from_every_command(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    locker = subprocess.Popen(
        [sys.executable, "-c", LOCKER, str(db_path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert locker.stdin is not None and locker.stdout is not None
    try:
        assert locker.stdout.readline().strip() == "locked"
        writers = [["mcp"], ["index"], ["vault", "add", str(vault_dir)], ["hide", "Shakshuka"]]
        readers = [["search", "shakshuka"], ["status", "--json"], ["log"]]
        procs = [
            (
                args,
                subprocess.Popen(
                    [sys.executable, "-m", "kmscli", *args],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    cwd=ROOT,
                ),
            )
            for args in writers + readers
        ]  # all at once: one wait for the lock, not one per command
        for args, proc in procs:
            out, err = proc.communicate(INIT if args == ["mcp"] else b"", timeout=240)
            text = err.decode()
            assert "Traceback" not in text and "BusyError" not in text, (args, text[-2000:])
            if args in readers:
                assert proc.returncode == 0, (args, text)
                continue
            assert proc.returncode != 0 and out == b"", (args, out)
            lines = [line for line in text.splitlines() if line.strip()]
            assert len(lines) == 1 and "is busy: another process held its write lock" in lines[0], (args, text)
    finally:
        locker.stdin.close()
        locker.wait(timeout=30)
