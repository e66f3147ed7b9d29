"""``kms_recall`` (``server.index.recall``) over the bench vault plus a few hundred session notes (issue 26).

The session notes are rendered by kms's own ``session_note.render`` (decisions, findings, next steps, the
searches and reads of each session, three projects), in a second vault ``sessions`` beside the generated
10k-note vault. Timed: ``recall`` at the default budget, keyword-only (``index=None``) and hybrid (the real
model loaded; the vault's chunks get synthetic vectors as in ``bench_embed.py``, since embedding 10k notes
takes hours on 2 cores), over ``--rounds`` rounds of the queries; each round's p50/p95 and the load average.

``--scope v`` recalls in the notes vault only (no session note in scope: the cost without them).
``--code DIR`` imports ``server`` from another tree (e.g. ``git archive`` of the base commit) on the same
database, for the before/after comparison. The database is built once and kept (``--rebuild`` to redo it).

Run: ``.venv/bin/python bench/bench_recall.py [--vault DIR] [--sessions 300] [--code DIR]``.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

from bench_mcp import QUERIES as MCP_QUERIES
from common import OUT, percentiles, vault

QUERIES = [*MCP_QUERIES, "how do we retry a failed login", "osprey launch plan"]  # the stdio bench's words, and two
PROJECTS = ["/code/app", "/code/osprey", "/code/billing"]
VERBS = ["keep", "drop", "retry", "document", "split", "move", "test", "review"]


def sessions_vault(root: Path, count: int) -> None:
    """``count`` session notes as kms writes them, in ``root/kms-sessions``."""
    from server.activity.session_note import SessionFacts, render

    rng = random.Random(26)
    folder = root / "kms-sessions"
    folder.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        facts = SessionFacts(f"bench{n:04d}", project=PROJECTS[n % 3], started_at=1_790_000_000 + n * 3_600)
        topics = rng.sample(QUERIES, 3)
        facts.captures = {
            "decision": [f"{rng.choice(VERBS).title()} the {t} part: {rng.choice(VERBS)} it first" for t in topics[:2]]
            + ["Ship on Tuesdays"],
            "finding": [f"The {topics[2]} code path is slow"],
            "next": [f"{rng.choice(VERBS).title()} {topics[0]}"],
        }
        facts.searches = [{"tool": "kms_search", "query": t} for t in topics]
        facts.reads = [
            {"title": f"Note {k}", "path": f"projects/note-{k}.md", "vault": "v", "count": 1}
            for k in rng.sample(range(10_000), 6)
        ]
        (folder / f"Session {facts.session_id}.md").write_text(render(facts), encoding="utf-8")


def build(db: Path, vault_dir: Path, sessions: int, model_dir: Path) -> None:
    from bench_embed import synthetic_fill

    from server.index.embed import Embedder, embed_pending
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    sroot = OUT / f"recall-sessions-{sessions}"
    if not (sroot / "kms-sessions").exists():
        sessions_vault(sroot, sessions)
    conn = connect(db)
    started = time.perf_counter()
    index_vault(conn, add_vault(conn, vault_dir, "v"))
    index_vault(conn, add_vault(conn, sroot, "sessions"))
    print(f"  indexed in {time.perf_counter() - started:.0f} s", flush=True)
    emb = Embedder(model_dir)
    assert emb.load(), emb.reason
    embed_pending(conn, emb, max_notes=40)
    synthetic_fill(conn)
    conn.close()


def measure(db: Path, model_dir: Path, rounds: int, scope: str | None) -> dict[str, list[tuple[float, float, float]]]:
    from server.index.embed import Embedder
    from server.index.recall import recall
    from server.index.semantic import SemanticIndex
    from server.store.db import connect
    from server.vault.registry import get_vault

    conn = connect(db)
    vault_id = None if scope is None else get_vault(conn, scope).id
    emb = Embedder(model_dir)
    assert emb.load(), emb.reason
    index = SemanticIndex(emb)
    index.refresh(conn)
    out: dict[str, list[tuple[float, float, float]]] = {"keyword-only": [], "hybrid": []}
    for q in QUERIES:  # warm: page cache, regexes
        recall(conn, q, vault_id=vault_id)
        recall(conn, q, vault_id=vault_id, index=index)
    for _ in range(rounds):
        for mode, idx in (("keyword-only", None), ("hybrid", index)):
            load = os.getloadavg()[0]
            times = []
            for _rep in range(3):
                for q in QUERIES:
                    t0 = time.perf_counter()
                    bundle = recall(conn, q, vault_id=vault_id, index=idx)
                    times.append((time.perf_counter() - t0) * 1000)
                    assert bundle["usedTokens"] <= 4000
            p50, p95 = percentiles(times)
            out[mode].append((p50, p95, (load + os.getloadavg()[0]) / 2))
    kinds: dict[str, int] = {}
    for q in QUERIES:
        for item in recall(conn, q, vault_id=vault_id, index=index)["items"]:
            kinds[item["kind"]] = kinds.get(item["kind"], 0) + 1
    print(f"  items by kind over the queries (hybrid): {kinds}")
    conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vault", help="the notes vault (default: the generated 10k-note vault)")
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--code", help="import server from this tree instead (a before/after comparison)")
    parser.add_argument("--rebuild", action="store_true")
    parser.add_argument("--model-dir")
    parser.add_argument("--scope", help="recall in this vault only (v: the notes without the session notes)")
    args = parser.parse_args()
    if args.code:
        sys.path.insert(0, str(Path(args.code).resolve()))
    import server

    print(f"server from {Path(server.__file__).parent.parent}")
    from bench_embed import model_dir

    mdir = model_dir(args.model_dir)
    db = OUT / f"recall-{args.sessions}.db"
    if args.rebuild or not db.exists():
        build(db, Path(args.vault) if args.vault else vault(10_000), args.sessions, mdir)
    for mode, runs in measure(db, mdir, args.rounds, args.scope).items():
        cells = ", ".join(f"{p50:.1f}/{p95:.1f} (load {load:.1f})" for p50, p95, load in runs)
        print(f"recall {mode} p50/p95 ms per round: {cells}")


if __name__ == "__main__":
    main()
