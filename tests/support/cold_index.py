"""A new vault's first index killed between its two transactions (``server.index.cold``): a real process
that dies (``os._exit``, no cleanup, nothing more committed) the moment its notes became searchable."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

KILLED_BETWEEN = """
import os, sys
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

conn = connect(sys.argv[1])
index_vault(conn, add_vault(conn, sys.argv[2], sys.argv[3]), on_searchable=lambda report: os._exit(9))
"""


def add_killed_between_phases(db: Path, root: Path, name: str) -> None:
    """Register ``root`` as vault ``name`` in ``db`` and index it in a process killed between the phases."""
    killed = subprocess.run(
        [sys.executable, "-c", KILLED_BETWEEN, str(db), str(root), name],
        env=os.environ.copy(),
        timeout=600,
        check=False,
    )
    assert killed.returncode == 9, killed  # died right after the first commit, as a kill would leave it
