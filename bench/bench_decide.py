"""What approving a detached staged call costs over the write itself (issue 40's ≤ 20 ms).

A detached session (``SessionConfig.review_detached``) stages each ``kms_append`` and is answered at once; the
person's ``decide_pending`` then records the decision and applies the call in its own process, through the
write guard of the session rebuilt from the row. Against it: the same append written directly by a session that
needs no approval, on the same note of the sample vault, alternating. Prints p50 and p95 of each, and the
difference.

Usage: python bench/bench_decide.py [--calls N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from common import percentiles, table, timed  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kms-bench-decide-"))
    env = {"KMS_DB_PATH": str(tmp / "kms.db"), "KMS_CONFIG": str(tmp / "config.toml")}
    os.environ.update(env)

    import server.mcp.tools  # noqa: F401 - the write tools a decision applies with
    from server.config.session_contract import SessionConfig
    from server.index.indexer import index_vault
    from server.mcp.tools.base import WriteSpec
    from server.mcp.tools.dispatch import ToolRunner
    from server.store.db import connect
    from server.vault.registry import add_vault
    from server.writes.review import decide_pending

    vault = tmp / "vault"
    shutil.copytree(Path(__file__).resolve().parent.parent / "kmscli" / "sample_vault", vault)
    conn = connect(tmp / "kms.db")
    index_vault(conn, add_vault(conn, vault, "sample"))
    nid = conn.execute("SELECT id FROM notes WHERE title = 'Home'").fetchall()[0][0]
    unlimited = {"watch": False, "write_enabled": True, "per_minute": 0, "per_session": 0}
    detached = ToolRunner(SessionConfig.from_env(env, approval="always", review_detached=True, **unlimited))
    direct = ToolRunner(SessionConfig.from_env(env, **unlimited))
    spec = detached.by_name["kms_append"]
    assert isinstance(spec, WriteSpec)
    written: list[float] = []
    approved: list[float] = []
    try:
        for i in range(args.calls):
            written.append(timed(lambda i=i: direct.writes.call(spec, {"noteId": nid, "content": f"direct {i}"})))
            staged = detached.writes.call(spec, {"noteId": nid, "content": f"staged {i}"})
            approved.append(timed(lambda s=staged: decide_pending(conn, s["pendingId"], True, channel="cli")))
    finally:
        detached.close()
        direct.close()
        conn.close()
        shutil.rmtree(tmp, ignore_errors=True)
    (w50, w95), (a50, a95) = percentiles(written), percentiles(approved)
    ms = lambda s: f"{1000 * s:.1f} ms"  # noqa: E731
    table(
        f"approving a detached kms_append ({args.calls} calls, sample vault)",
        [
            ("the write itself p50 / p95", f"{ms(w50)} / {ms(w95)}", "", "", ""),
            ("approve + apply p50 / p95", f"{ms(a50)} / {ms(a95)}", "", "", ""),
            ("over the write (p50)", ms(a50 - w50), "", "", "<= 20 ms"),
        ],
    )


if __name__ == "__main__":
    main()
