"""``write.allowlist`` as its example says (issue 29), through every write tool of the registry: with
``drafts/*`` (the notes directly in drafts/) and ``inbox`` (inbox/ and below), each tool writes a note
where the entries allow it and is refused ``folder-denied`` one folder deeper, naming the entry that
would allow it, with the file untouched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
from support.examples import ALLOW, denied, example, write_example_vault, writers
from support.mcp_session import mcp_client

from server.index.indexer import index_vault
from server.mcp.tools import REGISTRY
from server.mcp.tools.base import Denied
from server.vault.registry import add_vault

ON: dict[str, Any] = {"write_enabled": True, "edit_enabled": True, "organize_enabled": True, "per_minute": 1000}
# each write tool's own example (written where the allowlist allows) and denied call (one folder too deep, and
# the path the refusal names), from its spec; a tool that writes only in a folder of its own says why instead
CASES: dict[str, tuple[dict[str, Any], Denied]] = {
    s.name: (example(s), d) for s in writers() if (d := denied(s)) is not None
}
EXEMPT = {s.name: s.denied for s in writers() if isinstance(s.denied, str)}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.md"))}


async def test_every_write_tool_follows_the_allowlist_over_note_paths(
    conn: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    root = write_example_vault(tmp_path / "v")
    index_vault(conn, add_vault(conn, root, "v"))
    names = {s.name for s in REGISTRY if s.tier != "read"}
    assert names == set(CASES) | set(EXEMPT), "a write tool without an allowlist case"

    async def with_version(client: Any, args: dict[str, Any]) -> dict[str, Any]:
        if "version" in args:  # an example's version stands for the note's current one
            args["version"] = (await client.call_tool("kms_read", {"noteId": args["noteId"]})).structured_content[
                "version"
            ]
        return args

    async with mcp_client(db_path, allowlist=ALLOW, **ON) as client:
        for tool, (_ok, refused) in CASES.items():
            before = snapshot(root)
            path = refused.path
            r = await client.call_tool(tool, await with_version(client, dict(refused.args)))
            refusal = r.structured_content if r.is_error else (r.structured_content.get("results") or [{}])[0]
            assert refusal.get("error") == "folder-denied", (tool, r.structured_content)
            assert refusal["wouldAllow"] == path.rpartition("/")[0] + "/*", (tool, refusal)
            assert "drafts/* (the notes directly in drafts/)" in refusal["message"], tool
            assert snapshot(root) == before, tool
        for tool, (ok, _denied) in CASES.items():
            r = await client.call_tool(tool, await with_version(client, ok))
            assert not r.is_error, (tool, r.structured_content)
    assert (root / "drafts" / "Made.md").exists() and (root / "inbox" / "later" / "move.md").exists()
    assert (root / "inbox" / "c" / "a" / "b" / "Deep.md").exists()  # created, then moved with inbox/a
    assert (root / "inbox" / "d" / "n.md").exists()  # inbox/x, renamed
    assert (root / "drafts" / "Renamed.md").exists() and not (root / "drafts" / "trash.md").exists()
