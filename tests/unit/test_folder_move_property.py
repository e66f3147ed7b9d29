"""Property: a folder moved or renamed, then reverted, gives back every file of the vault byte for byte,
the ids stay, and the index equals a fresh index after each step; over random vaults whose notes link to
each other (inside the folder, out of it, into it) in every style."""

from __future__ import annotations

import posixpath
import tempfile
from pathlib import Path
from urllib.parse import quote

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from support.organize import assert_index_is_fresh, index, vault_bytes

TITLES = ["Alpha", "Beta note", "Gamma", "Delta", "Eps"]
FOLDERS = ["", "a", "a/b", "c d", "a/e f"]
NEWLINES = ["\n", "\r\n"]
PAIRS = "SELECT s.id, l.ord, d.id FROM links l JOIN notes s ON s.rid = l.src_rid LEFT JOIN notes d ON d.rid = l.dst_rid"


def link(src_folder: str, target: str, form: int) -> str:
    stem, title = target[:-3], target.rpartition("/")[2][:-3]
    rel = posixpath.relpath(target, src_folder or ".")
    ending = "/".join(stem.split("/")[-2:])
    return [
        f"[[{title}]]",
        f"[[{stem}]]",
        f"[[{stem}|x]]",
        f"[[{stem}#H]]",
        f"![[{stem}.md]]",
        f"[m]({quote(rel)})",
        f"[m](/{quote(target)})",
        f"[[/{stem}]]",
        f"[[{ending}]]",
        f"[m](<{rel}#H>)",
        f"`[[{stem}]]`",
    ][form]


@hs.composite
def vaults(draw: hs.DrawFn) -> tuple[dict[str, str], str]:
    """Files (path -> text), and the new folder of ``a``."""
    folders = draw(hs.lists(hs.sampled_from(FOLDERS), min_size=len(TITLES), max_size=len(TITLES)))
    folders[0] = draw(hs.sampled_from(["a", "a/b", "a/e f"]))  # the folder has a note at least
    paths = [f"{f}/{t}.md" if f else f"{t}.md" for f, t in zip(folders, TITLES, strict=True)]
    files: dict[str, str] = {}
    for path in paths:
        nl = draw(hs.sampled_from(NEWLINES))
        lines = [f"# {path}"]
        for _ in range(draw(hs.integers(0, 5))):
            target, form = draw(hs.sampled_from(paths)), draw(hs.integers(0, 10))
            lines.append(draw(hs.sampled_from(["", "see ", "é "])) + link(path.rpartition("/")[0], target, form))
        files[path] = nl.join(lines) + (nl if draw(hs.booleans()) else "")
    return files, draw(hs.sampled_from(["x/a", "c d/a", "z", "A2", "x/y/a"]))


@given(vaults())
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
def test_folder_move_then_revert_is_byte_identical_and_the_index_fresh(tmp_path: Path, case: tuple) -> None:
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner
    from server.store.db import connect
    from server.writes.undo.revert import revert

    files, new_folder = case
    with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
        root = Path(tmp) / "v"
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(text.encode("utf-8"))
        db = Path(tmp) / "kms.db"
        conn = connect(db)
        cfg = SessionConfig.from_env(
            {"KMS_DB_PATH": str(db), "KMS_CONFIG": str(Path(tmp) / "c.toml")},
            watch=False,
            enabled=True,
            read_enabled=True,
            write_enabled=True,
            edit_enabled=True,
            organize_enabled=True,
        )
        runner = ToolRunner(cfg)
        try:
            index(conn, root)
            before = vault_bytes(root)
            ids = dict(conn.execute("SELECT path, id FROM notes"))
            pairs = sorted(conn.execute(PAIRS))
            if "/" in new_folder:
                tool, args = "kms_move_folder", {"folder": "a", "to": new_folder.rpartition("/")[0]}
            else:
                tool, args = "kms_rename_folder", {"folder": "a", "name": new_folder}
            out, is_error = runner.call(tool, args)
            assert not is_error, out
            moved = {p: new_folder + p[1:] if p.startswith("a/") else p for p in ids}
            assert dict(conn.execute("SELECT path, id FROM notes")) == {moved[p]: i for p, i in ids.items()}
            assert_index_is_fresh(conn, root, Path(tmp))
            assert sorted(conn.execute(PAIRS)) == pairs  # every link still names the note it named
            revert(conn, out["invocationId"])
            assert vault_bytes(root) == before
            assert dict(conn.execute("SELECT path, id FROM notes")) == ids
            assert_index_is_fresh(conn, root, Path(tmp))
        finally:
            runner.close()
            conn.close()
