"""Edit and organise tools over real stdio on the generated 10k-note vault (a private copy of it).

Measures, for ``kms mcp`` with the edit and organise tiers on:
- ``kms_edit`` round trips (p50/p95): one replace per call, each with the current version
  (compare-and-swap, fsync, index update and provenance included), and ``kms_append`` on the same
  note interleaved with them, for reference;
- ``kms_rename`` of a note that 500 other notes link to (every link rewritten, 501 files changed
  as one unit, the index updated, one provenance row), renamed back and forth.

Baseline, measured in the same run, each rename paired with one: rewriting copies of those 500 files
(same sizes, same disk, outside the vault so the server's watcher does not see them half-written) in
place with an fsync each (read, write, fsync): the floor for touching 500 files durably. kms writes the
linking notes in place too, under the unit's write-ahead journal (``server/writes/unit_journal.py``).
For reference the bench also times the temp-file way (a temp file, its fsync and a rename per file, what
kms did before the journal): on this machine a file create alone costs 0.15-0.8 ms, depending on the
moment, which put that way at 1.2-2.9x the in-place rewrite before any of kms's own work.
- ``kms_rename_folder`` of a folder of 500 notes that 2,000 other notes link to (``--folder-only`` runs only
  this): every note moved and every link rewritten as one unit, renamed back and forth. Its baseline, paired
  the same way: copies of the same files outside the vault, the linking notes rewritten in place with an
  fsync each and the folder's notes written to a new folder (create, write, fsync, then the old one
  removed): the floor for moving and rewriting those files durably.
Usage: python bench/bench_organize.py [--notes N] [--calls N] [--linking N] [--folder-notes N]
       [--folder-linking N] [--folder-only]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
from pathlib import Path
from typing import Any, cast

from bench_mcp import LeanClient
from common import HERE, OUT, fresh_db, percentiles, table, timed, vault


def setup(notes: int, linking: int, folder: tuple[int, int] = (0, 0)) -> tuple[Path, Path, list[Path], tuple]:
    """A private copy of the vault plus a target note and ``linking`` notes linking to it (and, with
    ``folder``, the folder bench's notes: ``setup_folder``)."""
    root = OUT / f"organize-vault-{notes}"
    shutil.rmtree(root, ignore_errors=True)
    shutil.copytree(vault(notes), root)
    (root / "bench-links").mkdir()
    (root / "bench-links" / "Bench Target.md").write_text("# Bench Target\n\nedit me: line A\n", encoding="utf-8")
    files = []
    for i in range(linking):
        p = root / "bench-links" / f"Linker {i:04d}.md"
        p.write_text(
            f"# Linker {i}\n\nsee [[Bench Target]] and [[bench-links/Bench Target|the target]].\nmore text {i}\n",
            encoding="utf-8",
        )
        files.append(p)
    copies_folder = setup_folder(root, *folder) if folder[0] else ([], [])
    db = fresh_db("organize.db")
    from server.index.indexer import index_vault
    from server.store.db import connect
    from server.vault.registry import add_vault

    conn = connect(db)
    index_vault(conn, add_vault(conn, root, "bench"))
    conn.close()
    raw = OUT / "organize-raw"  # the baseline's copies, outside the vault: the server's watcher must not
    shutil.rmtree(raw, ignore_errors=True)  # see their in-place rewrites (truncate, then write) half done
    raw.mkdir()
    copies = []
    for p in files:
        shutil.copy(p, raw / p.name)
        copies.append(raw / p.name)
    return root, db, copies, copies_folder


def raw_rewrite(files: list[Path], old: str, new: str) -> float:
    """Rewrite every file with the link replaced, in place, fsync each."""

    def go() -> None:
        for p in files:
            text = p.read_text(encoding="utf-8").replace(old, new)
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())

    return timed(go)


def raw_atomic(files: list[Path], old: str, new: str) -> float:
    """The same rewrite the temp-file way, and nothing else (no lock, no re-check, no index): each file
    through a temp file (create, write, fsync) renamed over it, then one fsync of the folder. What kms
    did before its unit journal, for reference: what the creates cost at the moment."""

    def go() -> None:
        for p in files:
            data = p.read_text(encoding="utf-8").replace(old, new).encode("utf-8")
            tmp = p.parent / f".kms-{secrets.token_hex(8)}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(tmp, p)
        fd = os.open(files[0].parent, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    return timed(go)


def run(args) -> None:
    folder = (args.folder_notes, args.folder_linking) if args.folder_notes else (0, 0)
    root, db, files, (moving, linkers) = setup(args.notes, args.linking, folder)
    from kmscli.compose import kms_command
    from server.config.session_contract import SessionConfig
    from server.store.db import connect

    session = SessionConfig(
        db_path=db,
        config_path=HERE / "out" / "bench-config.toml",
        enabled=True,
        read_enabled=True,
        write_enabled=True,
        edit_enabled=True,
        organize_enabled=True,
        session_id="bench",
        per_minute=10_000,
        per_session=1_000_000,
        max_files_per_call=100_000,
        embed_enabled=False,
    )
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("KMS_")}, **session.to_env()}
    command, cargs = kms_command()
    conn = connect(db)
    target = cast(str, conn.execute("SELECT id FROM notes WHERE title = 'Bench Target'").fetchall()[0][0])
    conn.close()
    client = LeanClient([command, *cargs], env)
    r: dict[str, list[float]] = {"edit": [], "append": [], "rename": [], "raw": [], "atomic": []}
    folder_r: dict[str, list[float]] | None
    try:
        if args.folder_only:
            folder_r = run_folder(args, client, moving, linkers)
        else:
            folder_r = run_rest(args, client, target, files, r, moving, linkers)
    finally:
        client.close()
    if not args.folder_only:
        report(args, r)
    if folder_r is not None:
        report_folder(args, folder_r)


def run_rest(
    args,
    client: LeanClient,
    target: str,
    files: list[Path],
    r: dict[str, list[float]],
    moving: list[Path],
    linkers: list[Path],
) -> dict[str, list[float]] | None:
    """The edit and note-rename part, then the folder part when asked."""
    read = client.call("kms_read", {"noteId": target})
    version = json.loads(read["content"][0]["text"])["version"]
    words = ("line A", "line B")
    for i in range(args.calls + 1):
        old, new = words[i % 2], words[(i + 1) % 2]
        args_ = {"noteId": target, "version": version, "edits": [{"replace": {"old": old, "new": new}}]}
        out: dict[str, Any] = {}
        t = timed(lambda a=args_, o=out: o.update(client.call("kms_edit", a)))
        version = json.loads(out["content"][0]["text"])["version"]
        if i:  # the first call pays for lazy imports
            r["edit"].append(t)
        if i % 2:  # kms_append on the same note, interleaved: what the machine gives a write right now
            r["append"].append(timed(lambda: client.call("kms_append", {"noteId": target, "content": "- x"})))
            version = json.loads(client.call("kms_read", {"noteId": target})["content"][0]["text"])["version"]
    titles = ("Bench Target", "Bench Goal")
    for i in range(-2, args.renames * 2):  # the first round trip warms up (imports, lock files): not timed
        new_title = titles[(i + 1) % 2]
        res: dict[str, Any] = {}
        t = timed(
            lambda nt=new_title, o=res: o.update(
                client.call("kms_rename", {"noteId": target, "title": nt, "keepAlias": False})
            )
        )
        body = json.loads(res["content"][0]["text"])
        assert len(body["linksRewritten"]["notes"]) == args.linking, body
        if i < 0:
            continue
        r["rename"].append(t)
        r["raw"].append(raw_rewrite(files, "[[x", "[[x"))  # same files, same run (text kept)
        r["atomic"].append(raw_atomic(files, "[[x", "[[x"))
    return run_folder(args, client, moving, linkers) if args.folder_notes else None


def report(args, r: dict[str, list[float]]) -> None:
    e50, e95 = (x * 1000 for x in percentiles(r["edit"]))
    ren, raw = statistics.median(r["rename"]), statistics.median(r["raw"])
    ratio = statistics.median(a / b for a, b in zip(r["rename"], r["raw"], strict=True))  # paired: same moment
    floor = statistics.median(a / b for a, b in zip(r["atomic"], r["raw"], strict=True))
    table(
        f"Edit and organise over stdio: {args.notes} notes + {args.linking} linking, {args.calls} edits, "
        f"{len(r['rename'])} renames",
        [
            ("kms_edit p50 (ms)", f"{e50:.1f}", "", "", f"<= 10 ms: {'PASS' if e50 <= 10 else 'FAIL'}"),
            ("kms_edit p95 (ms)", f"{e95:.1f}", "", "", ""),
            (
                "  kms_append p50, same run (ms)",
                f"{percentiles(r['append'])[0] * 1000:.1f}",
                "",
                "",
                "for reference: the same write path",
            ),
            (
                f"kms_rename, {args.linking} linking notes (s)",
                f"{ren:.3f}",
                f"{raw:.3f} (rewrite {args.linking} files + fsync)",
                f"{ratio:.2f}x",
                f"<= 2x: {'PASS' if ratio <= 2 else 'FAIL'} (median of paired runs)",
            ),
            (
                "  temp-file way, no kms (s)",
                f"{statistics.median(r['atomic']):.3f}",
                f"{raw:.3f} (in place)",
                f"{floor:.2f}x",
                "temp file + fsync + rename per file, for reference; "
                f"kms = {ren / statistics.median(r['atomic']):.2f}x",
            ),
        ],
    )


def setup_folder(root: Path, members: int, linking: int) -> tuple[list[Path], list[Path]]:
    """A folder of ``members`` notes (linking to each other) and ``linking`` notes outside it, each with links
    into it in three styles; returns the baseline's copies of both (outside the vault)."""
    folder, links = root / "bench-folder", root / "bench-folder-links"
    folder.mkdir()
    links.mkdir()
    for i in range(members):
        (folder / f"Member {i:04d}.md").write_text(
            f"# Member {i}\n\nnext [[bench-folder/Member {(i + 1) % members:04d}]], by name [[Member {i:04d}]]\n"
            f"text {i}\n",
            encoding="utf-8",
        )
    for i in range(linking):
        j = i % members
        (links / f"Folder linker {i:04d}.md").write_text(
            f"# Folder linker {i}\n\nsee [[bench-folder/Member {j:04d}]], [[Member {j:04d}|by name]] and "
            f"[md](../bench-folder/Member%20{(j + 7) % members:04d}.md).\nmore text {i}\n",
            encoding="utf-8",
        )
    raw = OUT / "organize-raw-folder"
    shutil.rmtree(raw, ignore_errors=True)
    (raw / "a").mkdir(parents=True)
    (raw / "links").mkdir()
    moving = [Path(shutil.copy(p, raw / "a" / p.name)) for p in sorted(folder.iterdir())]
    linkers = [Path(shutil.copy(p, raw / "links" / p.name)) for p in sorted(links.iterdir())]
    return moving, linkers


def raw_folder_move(moving: list[Path], linkers: list[Path], dest: Path) -> tuple[float, list[Path]]:
    """The linking notes rewritten in place (fsync each), the folder's notes written to ``dest`` (fsync each)
    and the old ones removed, the two folders fsynced; returns the time and the notes' new paths."""
    dest.mkdir(exist_ok=True)
    out: list[Path] = []

    def go() -> None:
        for p in linkers:
            text = p.read_text(encoding="utf-8")
            with open(p, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
        for p in moving:
            data = p.read_bytes()
            fd = os.open(dest / p.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            try:
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.unlink(p)
            out.append(dest / p.name)
        for d in (dest, moving[0].parent):
            fd = os.open(d, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)

    return timed(go), out


def run_folder(args, client: LeanClient, moving: list[Path], linkers: list[Path]) -> dict[str, list[float]]:
    """``kms_rename_folder`` there and back, each paired with the raw baseline."""
    r: dict[str, list[float]] = {"folder": [], "folder_raw": []}
    names = ("bench-folder", "bench-folder-2")
    for i in range(-2, args.folder_moves * 2):  # the first round trip warms up: not timed
        old, new = names[i % 2], names[(i + 1) % 2]
        res: dict[str, Any] = {}
        t = timed(lambda o=old, n=new, d=res: d.update(client.call("kms_rename_folder", {"folder": o, "name": n})))
        body = json.loads(res["content"][0]["text"])
        assert body["notesMoved"] == args.folder_notes and body["linkingNotes"] == args.folder_linking, body
        if i < 0:
            continue
        r["folder"].append(t)
        raw_t, moving = raw_folder_move(moving, linkers, moving[0].parent.parent / ("b" if i % 2 == 0 else "a"))
        r["folder_raw"].append(raw_t)
    return r


def report_folder(args, r: dict[str, list[float]]) -> None:
    kms, raw = statistics.median(r["folder"]), statistics.median(r["folder_raw"])
    ratio = statistics.median(a / b for a, b in zip(r["folder"], r["folder_raw"], strict=True))
    table(
        f"Folder rename over stdio: {args.folder_notes} notes moved, {args.folder_linking} linking notes, "
        f"{len(r['folder'])} renames",
        [
            (
                f"kms_rename_folder, {args.folder_notes + args.folder_linking} files (s)",
                f"{kms:.3f}",
                f"{raw:.3f} (move {args.folder_notes} + rewrite {args.folder_linking}, fsync each)",
                f"{ratio:.2f}x",
                f"<= 2x: {'PASS' if ratio <= 2 else 'FAIL'} (median of paired runs)",
            ),
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--notes", type=int, default=10_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--linking", type=int, default=500)
    ap.add_argument("--renames", type=int, default=5, help="round trips (there and back)")
    ap.add_argument("--folder-notes", type=int, default=500)
    ap.add_argument("--folder-linking", type=int, default=2000)
    ap.add_argument("--folder-moves", type=int, default=3, help="folder round trips (there and back)")
    ap.add_argument("--folder-only", action="store_true", help="only the folder rename")
    run(ap.parse_args())


if __name__ == "__main__":
    main()
