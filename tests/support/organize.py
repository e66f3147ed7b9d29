"""A small vault with every link form the indexer knows, and the check that an index equals a fresh one."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw

from support.vaults import write

TARGET = "---\naliases: [Tee]\n---\n# Target\n\nbody line\n\n## Part\n\npart text, see [[Target#Part]]\n"
LINKER = (
    '---\nrelated: "[[Target]]"\nother: ["[[notes/Target|t]]", "[[Elsewhere]]"]\n---\n'
    "# Linker\n\n"
    "title [[Target]], path [[notes/Target]], alias [[Target|shown]], heading [[Target#Part]],\n"
    "block [[Target#^b1]], embed ![[Target]], suffix [[notes/Target.md|x]], by alias [[Tee]],\n"
    "spaced [[ Target | s ]], slash [[/notes/Target]], case [[target]]\n\n"
    "| table | [[Target\\|a]] |\n| --- | --- |\n\n"
    "code `[[Target]]` stays\n\n```\n[[Target]]\n```\n"
)
FILES = {
    "notes/Target.md": TARGET,
    "Linker.md": LINKER,
    "Crlf.md": "# Crlf\r\n\r\nsee [[Target]] and [[notes/Target#Part|p]]\r\n",
    "private/Secret.md": "secret link to [[Target]]\n",
    "Other.md": "# Other\n\nno link to it, only [[Elsewhere]] and [[Target2]]\n",
    "drafts/Draft.md": "# Draft\n\nfirst line\nsecond line\n",
}


def make_vault(root: Path, files: dict[str, str] | None = None) -> Path:
    for rel, text in (files or FILES).items():
        write(root / rel, text)
    return root


def index(conn: apsw.Connection, root: Path, name: str = "v") -> Any:
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    vault = add_vault(conn, root, name)
    index_vault(conn, vault)
    return vault


def snapshot(conn: apsw.Connection) -> dict[str, Any]:
    """Everything the index says about the files, keyed by path (ids and times left out)."""

    def q(sql: str) -> list[tuple]:
        return sorted(tuple(r) for r in conn.execute(sql))

    return {
        "notes": q("SELECT path, title, folder, content_hash, size_bytes, body, tags FROM notes"),
        "tags": q("SELECT n.path, t.tag FROM note_tags t JOIN notes n ON n.rid = t.rid"),
        "keys": q("SELECT n.path, k.key, k.kind FROM note_keys k JOIN notes n ON n.rid = k.rid"),
        "links": q(
            "SELECT s.path, l.ord, l.target, l.target_key, l.heading, l.block, l.alias, l.embed, "
            "l.in_frontmatter, l.line, d.path FROM links l JOIN notes s ON s.rid = l.src_rid "
            "LEFT JOIN notes d ON d.rid = l.dst_rid"
        ),
        "headings": q("SELECT n.path, h.ord, h.level, h.text, h.line FROM headings h JOIN notes n ON n.rid = h.rid"),
        "fts": q("SELECT rowid, title, body, tags FROM notes_fts"),
    }


def fresh_snapshot(root: Path, tmp: Path) -> dict[str, Any]:
    """The snapshot of a brand-new index of ``root``."""
    import tempfile

    from server.store.db import connect

    with tempfile.TemporaryDirectory(dir=tmp) as folder:
        fresh = connect(Path(folder) / "fresh.db")
        try:
            index(fresh, root)
            return snapshot(fresh)
        finally:
            fresh.close()


def assert_index_is_fresh(conn: apsw.Connection, root: Path, tmp: Path) -> None:
    now, fresh = snapshot(conn), fresh_snapshot(root, tmp)
    now.pop("fts"), fresh.pop("fts")  # rowids differ; the FTS content is compared through ``body`` and ``tags``
    assert now == fresh
    # the FTS index itself answers like the rows it was built from
    for path, title, *_rest in now["notes"]:
        word = title.split()[0]
        hits = [
            r[0]
            for r in conn.execute(
                "SELECT n.path FROM notes_fts f JOIN notes n ON n.rid = f.rowid WHERE notes_fts MATCH ?",
                (f'title:"{word}"',),
            )
        ]
        assert path in hits, (path, hits)


def vault_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the trash too), by relative path."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@contextlib.contextmanager
def organize_runner(db_path: Path) -> Iterator[Any]:
    """A ``ToolRunner`` with every tier on and no watcher: tool calls in process, through the real guard."""
    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner

    config = SessionConfig.from_env(
        {"KMS_DB_PATH": str(db_path)}, write_enabled=True, edit_enabled=True, organize_enabled=True, watch=False
    )
    runner = ToolRunner(config)
    try:
        yield runner
    finally:
        runner.close()
