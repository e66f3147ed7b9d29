"""Property: a rename or a move, then its revert, gives back every file of the vault byte for byte,
and the index equals a fresh index after each step; over random vaults mixing every link form."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from support.organize import assert_index_is_fresh, index, vault_bytes

TITLES = ["Alpha", "Beta note", "Gamma", "Delta"]
FOLDERS = ["", "a", "a/b", "c d"]
NEWLINES = ["\n", "\r\n"]


def link(target_path: str, title: str, form: int, extra: str) -> str:
    stem = target_path[:-3]
    return [
        f"[[{title}]]",
        f"[[{stem}]]",
        f"[[{title}|{extra}]]",
        f"[[{title}#{extra}]]",
        f"![[{title}]]",
        f"[[{stem}.md|{extra}]]",
        f"[[{title}#^b{len(extra)}]]",
        f"`[[{title}]]`",
        f"[[{title.lower()}]]",
        f"[[{title}\\|{extra}]]",
    ][form]


@hs.composite
def vaults(draw: hs.DrawFn) -> tuple[dict[str, str], str, str, str | None]:
    """Files (path -> text), the note to change, and the new title or the new folder."""
    folders = draw(hs.lists(hs.sampled_from(FOLDERS), min_size=len(TITLES), max_size=len(TITLES)))
    paths = [f"{f}/{t}.md" if f else f"{t}.md" for f, t in zip(folders, TITLES, strict=True)]
    files: dict[str, str] = {}
    target = draw(hs.sampled_from(paths))
    title = target.rpartition("/")[2][:-3]
    for path in paths:
        nl = draw(hs.sampled_from(NEWLINES))
        lines = [f"# {path}"]
        if draw(hs.booleans()):
            lines = ["---", f'related: "[[{title}]]"', "---", *lines]
        for _ in range(draw(hs.integers(0, 6))):
            words = draw(hs.text(alphabet="xyz é", max_size=8))
            form, extra = draw(hs.integers(0, 9)), draw(hs.sampled_from(["P", "q r"]))
            lines.append(words + " " + link(target, title, form, extra))
        bom = "\ufeff" if draw(hs.booleans()) else ""
        end = nl if draw(hs.booleans()) else ""
        files[path] = bom + nl.join(lines) + end
    if draw(hs.booleans()):
        return files, target, draw(hs.sampled_from(["Renamed", "Zeta two", title + " 2"])), None
    dest = draw(hs.sampled_from([f for f in ["", "new", "a/b/c", "c d"] if f != target.rpartition("/")[0]]))
    return files, target, "", dest


@given(vaults())
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
def test_rename_or_move_then_revert_is_byte_identical(tmp_path: Path, case: tuple) -> None:
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner
    from server.store.db import connect
    from server.writes.undo.revert import revert

    files, target, title, folder = case
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
            nid = conn.execute("SELECT id FROM notes WHERE path = ?", (target,)).fetchall()[0][0]
            args = {"noteId": nid, "title": title} if folder is None else {"noteId": nid, "folder": folder}
            out, is_error = runner.call("kms_rename" if folder is None else "kms_move", args)
            assert not is_error, out
            assert vault_bytes(root) != before
            assert conn.execute("SELECT path FROM notes WHERE id = ?", (nid,)).fetchall() == [(out["path"],)]
            assert_index_is_fresh(conn, root, Path(tmp))
            revert(conn, out["invocationId"])
            assert vault_bytes(root) == before
            assert conn.execute("SELECT path FROM notes WHERE id = ?", (nid,)).fetchall() == [(target,)]
            assert_index_is_fresh(conn, root, Path(tmp))
        finally:
            runner.close()
            conn.close()
