"""Walk ``kms_append``'s write context from the guard down and count the rooms it crosses (issue 43).

Run from a checkout (its own code is traced): ``python bench/walk_append.py``. A real vault and database in a
temporary folder; one keyed append is made first (warm-up: every import and cache done), then a second one
(with an ``idempotencyKey``, so the at-most-once journal is on the walk too) is traced with
``sys.setprofile`` from ``WriteService.run`` down, Python frames of kms's own modules (``server.*``) only.

What is counted: ``tests/support/context_walk.py``.

On af0ff5c (before the seam) this gives 19 rooms crossed, 15 climbs back, 23 returns.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "tests"))


def main() -> None:
    from support.context_walk import walk  # the walk itself (shared with tests/unit/test_write_seam.py)
    from support.writes import write_service  # the tests' own real guard

    from server.index.indexer import index_vault
    from server.mcp.tools.write_tools import WRITE_TOOLS
    from server.store.db import connect
    from server.vault.registry import add_vault
    from server.writes.context import WriteContext
    from server.writes.guard import WriteService

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "vault"
        root.mkdir()
        (root / "note.md").write_text("# Note\n\nfirst line\n")
        db = Path(tmp) / "kms.db"
        conn = connect(db)
        index_vault(conn, add_vault(conn, root, "v"))
        guard = write_service(db, "walk")
        spec = next(s for s in WRITE_TOOLS if s.name == "kms_append")
        guard.call(spec, {"noteId": "note.md", "content": "warm-up", "idempotencyKey": "warm-up"})
        args = {"noteId": "note.md", "content": "traced", "idempotencyKey": "t"}
        seen, answer = walk(WriteContext, lambda: WriteService.run(guard, spec, args))
        assert answer.get("noteId"), answer
    print(f"kms_append's context: {len(seen.entries)} rooms crossed, {seen.climbs} climbs back, {seen.returns} returns")
    print("  " + "\n  ".join(seen.entries))


if __name__ == "__main__":
    main()
