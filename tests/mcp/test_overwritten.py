"""An agent write that a person's later save drops is flagged ``overwritten`` by the real watcher
(as ``kms mcp`` runs it); a save that keeps the text and a reverted write are not."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import apsw
from support.mcp_session import mcp_client
from support.sql import tuples, value

from server.activity import overwrites
from server.activity.feed import invocation_detail, overwritten_ids
from server.index import watcher
from server.index.indexer import index_vault
from server.vault.registry import add_vault


def rename_save(path: Path, text: str) -> None:
    """What most editors do: write a temp file beside the note, rename it over the note."""
    tmp = path.with_name(f".{path.name}.swp")
    tmp.write_text(text)
    os.replace(tmp, path)


def truncate_save(path: Path, text: str) -> None:
    """Editors that save in place: truncate, then write."""
    with open(path, "r+") as f:
        f.truncate(0)
        f.write(text)


def flagged(conn: apsw.Connection, invocation_id: int) -> float | None:
    return value(conn, "SELECT overwritten_at FROM tool_invocations WHERE id = ?", (invocation_id,))


def wait_flagged(conn: apsw.Connection, invocation_id: int) -> float | None:
    deadline = time.monotonic() + 10
    while (at := flagged(conn, invocation_id)) is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return at


async def test_saves_that_drop_an_agent_write_are_flagged_and_others_are_not(
    tmp_path: Path, conn: apsw.Connection, db_path: Path
) -> None:
    from server.writes.undo.revert import revert

    root = tmp_path / "vault"
    (root / "drafts").mkdir(parents=True)
    names = ("renamed", "truncated", "kept", "reverted")
    for name in names:
        (root / "drafts" / f"{name}.md").write_text(f"# {name}\n\nthe person's first line\n")
    index_vault(conn, add_vault(conn, root, "v"))
    stop = threading.Event()
    thread = threading.Thread(
        target=watcher.watch_vaults, args=(db_path,), kwargs={"stop": stop, "after": overwrites.check}, daemon=True
    )
    thread.start()
    try:
        async with mcp_client(db_path, write_enabled=True) as client:
            ids, before, after = {}, {}, {}
            for name in names:
                path = root / "drafts" / f"{name}.md"
                before[name] = path.read_text()  # what an editor that loaded the note earlier holds
                nid = value(conn, "SELECT id FROM notes WHERE path = ?", (f"drafts/{name}.md",))
                r = await client.call_tool("kms_append", {"noteId": nid, "content": f"agent line for {name}"})
                assert not r.is_error, r.structured_content
                ids[name] = r.structured_content["invocationId"]
                after[name] = path.read_text()
            revert(conn, ids["reverted"])

            kept = root / "drafts" / "kept.md"
            truncate_save(kept, kept.read_text() + "the person's second line\n")  # keeps the agent's text
            reverted = root / "drafts" / "reverted.md"
            rename_save(reverted, before["reverted"] + "after the revert\n")  # the text was taken back anyway
            rename_save(root / "drafts" / "renamed.md", before["renamed"] + "an edit from the old buffer\n")
            assert wait_flagged(conn, ids["renamed"]) is not None
            truncate_save(root / "drafts" / "truncated.md", before["truncated"] + "another old-buffer edit\n")
            assert wait_flagged(conn, ids["truncated"]) is not None
            # both saves before were seen first (the watcher handles changes in order)
            assert flagged(conn, ids["kept"]) is None and flagged(conn, ids["reverted"]) is None
            assert overwritten_ids(conn) == {ids["renamed"], ids["truncated"]}

            # the agent's later read says what the note holds now: the person's text, not the agent's
            nid = value(conn, "SELECT id FROM notes WHERE path = 'drafts/renamed.md'")
            read = (await client.call_tool("kms_read", {"noteId": nid})).structured_content
            assert "an edit from the old buffer" in read["body"] and "agent line" not in read["body"]
            detail = invocation_detail(conn, ids["renamed"])
            assert detail is not None and detail.note.state == "edited"
            assert detail.invocation["overwritten_at"] == flagged(conn, ids["renamed"])

            # the person undoes their save (the agent's version is back): the flag is cleared
            rename_save(root / "drafts" / "renamed.md", after["renamed"])
            deadline = time.monotonic() + 10
            while flagged(conn, ids["renamed"]) is not None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert flagged(conn, ids["renamed"]) is None
    finally:
        stop.set()
        thread.join(5)


def test_check_skips_notes_without_recent_agent_writes_and_kms_own_versions(
    tmp_path: Path, conn: apsw.Connection
) -> None:
    """The cheap paths: a note no agent wrote, a write older than the window, kms's own version after the
    version the watcher last judged (``Settled``: not even read)."""
    root = tmp_path / "vault"
    root.mkdir()
    (root / "n.md").write_text("# n\n\nbody\n")
    vault = add_vault(conn, root, "v")
    index_vault(conn, vault)
    nid, digest = tuples(conn, "SELECT id, content_hash FROM notes")[0]
    assert overwrites.check(conn, vault, ["n.md", "gone.md"], now=1000.0) == 0
    conn.execute(
        "INSERT INTO tool_invocations (at, session_id, tool, note_id, vault, path, input_summary, status, "
        "inserted_text, insert_offset, hash_before, hash_after, change_kind) VALUES (?, 's', 'kms_append', ?, 'v',"
        " 'n.md', 'x', 'success', 'gone text\n', 12, 'judged', ?, 'text-inserted')",
        (1000.0, nid, digest),
    )
    settled = overwrites.Settled()
    settled.put(conn, nid, "judged", 0)  # the watcher judged version "judged"; kms's append made this one
    assert overwrites.check(conn, vault, ["n.md"], now=1001.0, settled=settled) == 0  # the file is kms's version
    conn.execute("UPDATE tool_invocations SET hash_after = 'older'")
    assert overwrites.check(conn, vault, ["n.md"], now=1000.0 + overwrites.RECENT_S + 1) == 0  # too old
    assert overwrites.check(conn, vault, ["n.md"], now=1002.0) == 1
    assert value(conn, "SELECT overwritten_at FROM tool_invocations") == 1002.0
