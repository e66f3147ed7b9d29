"""What the index holds of a vault's files, for the scan that decides what to read again: path, rid,
mtime and size from the narrow manifest index (m031), and content hashes only for the paths that need
them (a changed file is compared by its hash, a vanished one matched to a new path by it)."""

from __future__ import annotations

import apsw


def read(conn: apsw.Connection, vault_id: int) -> dict[str, tuple[int, int, int, str]]:
    """path -> (rid, mtime, size, '') from the narrow manifest index (m031), not the notes' wide rows;
    the content hash ('' here) is read by ``with_hashes`` for the few paths that need it."""
    return {
        path: (rid, mtime_ns, size, "")
        for rid, path, mtime_ns, size in conn.execute(
            "SELECT rid, path, mtime_ns, size_bytes FROM notes WHERE vault_id = ?", (vault_id,)
        )
    }


def with_hashes(
    conn: apsw.Connection, manifest: dict[str, tuple[int, int, int, str]], paths: list[str]
) -> dict[str, tuple[int, int, int, str]]:
    """``manifest`` with the content hashes of ``paths`` (a changed file is compared by its hash, a gone
    one is matched to a new path by it)."""
    by_rid = {manifest[p][0]: p for p in paths if p in manifest}
    rids = list(by_rid)
    for at in range(0, len(rids), 500):
        chunk = rids[at : at + 500]
        for rid, chash in conn.execute(
            f"SELECT rid, content_hash FROM notes WHERE rid IN ({','.join('?' * len(chunk))})", chunk
        ):
            path = by_rid[rid]
            manifest[path] = (*manifest[path][:3], chash)
    return manifest
