"""Resources and completion benchmark (issue 27) over a real stdio ``kms mcp`` on the generated 10k-note vault.

Measures, through the lean JSON-lines client of ``bench_mcp`` (one request line out, one response line in):
- ``completion/complete`` on the note template's ``path``: nothing typed (the most recent notes), a folder
  prefix, title words, a typo, and a string that matches nothing (p50/p95 each, after one warm call that
  builds the fuzzy index);
- the same after a write by another connection (the index of paths and titles is rebuilt);
- ``resources/list``: the first page, and every page (what a host does on each connect);
- ``resources/read`` of a note, for scale; and ``kms_list_folder``, the inline tool, as the baseline of a
  round trip that does almost nothing.

Usage: python bench/bench_resources.py [--notes N] [--calls N] [--vault DIR]

``--vault``: a vault made by the shared generator (``python3 /work/shared/tools/genvault.py DIR --notes 10000``)
instead of bench/genvault.py's; its partial strings are the ones that generator's paths and titles answer.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path
from typing import Any

from bench_mcp import LeanClient
from common import HERE, fresh_db, percentiles, table, timed, vault

TEMPLATE = {"type": "ref/resource", "uri": "kms://{vault}/{+path}"}
PARTIALS = {
    "nothing typed": "",
    "folder prefix": "projects/api des",
    "title words": "database migration check",
    "typo": "databse migraton",
    "no match": "zqxjv",
}
SHARED_PARTIALS = {  # for /work/shared/tools/genvault.py's vault (--vault)
    "nothing typed": "",
    "folder prefix": "projects/osprey cach",
    "title words": "cache eviction retro",
    "typo": "cahce evictoin",
    "no match": "zqxjv",
}


def ms(samples: list[float]) -> str:
    p50, p95 = percentiles(samples)
    return f"{p50 * 1000:.2f} / {p95 * 1000:.2f} ms"


def run(args: argparse.Namespace) -> None:
    root = Path(args.vault).resolve() if args.vault else vault(args.notes)
    partials = SHARED_PARTIALS if args.vault else PARTIALS
    db = fresh_db("resources.db")
    from kmscli.compose import kms_command
    from server.config.session_contract import SessionConfig
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    session = SessionConfig(
        db_path=db,
        config_path=HERE / "out" / "bench-config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=False,
        session_id="benchres",
        embed_enabled=False,
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KMS_")}, **session.to_env()}
    command, kms_args = kms_command()
    client = LeanClient([command, *kms_args], env)
    rows = []
    try:

        def complete(value: str) -> dict[str, Any]:
            return client.request(
                "completion/complete", {"ref": TEMPLATE, "argument": {"name": "path", "value": value}}
            )

        for label, value in partials.items():
            first = complete(value)["completion"]
            samples = [timed(lambda v=value: complete(v)) for _ in range(args.calls)]
            rows.append((f"complete: {label} ({len(first['values'])} values)", ms(samples), "", "", "p50 / p95"))
        rebuilt = []
        for i in range(max(5, args.calls // 10)):
            with conn:  # another connection commits: the next completion rebuilds its index
                conn.execute("UPDATE vaults SET last_indexed_at = ? WHERE name = 'bench'", (float(i),))
            rebuilt.append(timed(lambda: complete(partials["title words"])))
        rows.append(("complete after another connection's commit (rebuild)", ms(rebuilt), "", "", "p50 / p95"))
        first_page = [timed(lambda: client.request("resources/list", {})) for _ in range(args.calls)]
        rows.append(("resources/list: first page", ms(first_page), "", "", "p50 / p95"))

        def every_page() -> int:
            cursor, count = None, 0
            while True:
                page = client.request("resources/list", {"cursor": cursor} if cursor else {})
                count += len(page["resources"])
                cursor = page.get("nextCursor")
                if not cursor:
                    return count

        listed = every_page()
        pages = [timed(every_page) for _ in range(args.calls)]
        rows.append((f"resources/list: every page ({listed} notes)", ms(pages), "", "", "p50 / p95"))
        uri = client.request("resources/list", {})["resources"][0]["uri"]
        reads = [timed(lambda: client.request("resources/read", {"uri": uri})) for _ in range(args.calls)]
        rows.append(("resources/read: one note", ms(reads), "", "", "p50 / p95"))
        folder = [timed(lambda: client.call("kms_list_folder", {"path": "projects"})) for _ in range(args.calls)]
        rows.append(("baseline: kms_list_folder (inline tool)", ms(folder), "", "", "p50 / p95"))
    finally:
        client.close()
        conn.close()
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    table(f"resources and completion, {args.notes} notes, {args.calls} calls each (load: {load})", rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--notes", type=int, default=10_000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--vault", help="an existing vault (the shared generator's) instead of bench/genvault.py's")
    run(parser.parse_args())


if __name__ == "__main__":
    main()
