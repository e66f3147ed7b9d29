"""The links of a vault indexed for the first time, resolved before they are inserted (issue 42).

A cold index used to insert every link unresolved and then run the resolving ``UPDATE`` over all of them
(``server.index.link_resolve.resolve_links``): half the cost of the links. Here the same rule is applied in
memory to the keys the vault's own records give, and the links go in with their targets. The rule is the
writer's SQL (``_note_of_link``, ``_file_of_link``), which stays the one rule for every other index: a
link's written key before a Markdown link's second key, a path or title before an alias (kind 1-2 before
3+), the note in the linking note's folder, then the shortest path, then the path; a name one note holds
goes to it without ranking. A link no note answers goes to an attachment by the same ranking.

A link that names a vault (``[[dendron://name/note]]``) may resolve into another vault: it is inserted
unresolved and left to the SQL (``resolve_named``), as are the links of other vaults that name this one.
The identity test (tests/unit/test_index_identity.py) holds the two to the same result.
"""

from __future__ import annotations

import apsw

from server.index.records import FileRecord, folder_of

# A candidate target: (not the link's written key, kind capped at 2, not in the linking note's folder,
# length of its path, its path) -- the writer's ORDER BY, compared as a tuple -- and the note's rid.
_Ranked = tuple[tuple[bool, int, bool, int, str], int | str]


class NewLinks:
    """The targets the links of a new vault's notes resolve to, from those notes' keys and the vault's
    attachments (every note of the vault is among ``notes``: it had none before)."""

    def __init__(self, conn: apsw.Connection, vault_id: int, notes: list[tuple[int, FileRecord]]) -> None:
        self.keys: dict[str, list[tuple[int, int, str, str]]] = {}  # key -> (kind, rid, folder, path)
        for rid, rec in notes:
            folder = folder_of(rec.path)
            for key, kind in rec.keys:
                self.keys.setdefault(key, []).append((kind, rid, folder, rec.path))
        self.files: dict[str, list[tuple[int, str, str]]] = {}  # key -> (kind, folder, path)
        for key, kind, path, folder in conn.execute(
            "SELECT key, kind, path, folder FROM attachments WHERE vault_id = ?", (vault_id,)
        ):
            self.files.setdefault(key, []).append((kind, folder, path))
        # a key only one note holds (under one kind or more): its links go to that note without ranking
        self.single = {key: found[0][1] for key, found in self.keys.items() if all(f[1] == found[0][1] for f in found)}
        # (key, alt key, linking note's folder) -> (dst_rid, dst_file): most links name a few popular notes
        self.known: dict[tuple[str, str | None, str], tuple[int | None, str | None]] = {}

    def rows(self, rid: int, rec: FileRecord) -> list[tuple]:
        """The note's link rows for ``writer.insert_resolved_links``."""
        folder = folder_of(rec.path)
        out = []
        known, single, keys = self.known, self.single, self.keys
        for ln in rec.links:
            if ln[10] is not None:  # names a vault: resolved by the SQL
                out.append((rid, *ln, None, None))
                continue
            only = single.get(ln[2])
            if only is not None and (ln[9] is None or ln[9] == ln[2] or ln[9] not in keys):
                out.append((rid, *ln, only, None))  # (what ``_note`` answers when one note holds the names)
                continue
            asked = (ln[2], ln[9], folder)
            found = known.get(asked)
            if found is None:
                dst_rid = self._note(*asked)
                found = known[asked] = (dst_rid, None if dst_rid is not None else self._file(*asked))
            out.append((rid, *ln, *found))
        return out

    def _names(self, key: str, alt: str | None) -> list[tuple[bool, str]]:
        return [(False, key)] + ([(True, alt)] if alt is not None and alt != key else [])

    def _note(self, key: str, alt: str | None, folder: str) -> int | None:
        found: list[_Ranked] = [
            ((is_alt, min(kind, 2), f != folder, len(path), path), rid)
            for is_alt, name in self._names(key, alt)
            for kind, rid, f, path in self.keys.get(name, ())
        ]
        if not found:
            return None
        if len({rid for _rank, rid in found}) == 1:
            return int(found[0][1])
        return int(min(found)[1])

    def _file(self, key: str, alt: str | None, folder: str) -> str | None:
        found: list[_Ranked] = [
            ((is_alt, min(kind, 2), f != folder, len(path), path), path)
            for is_alt, name in self._names(key, alt)
            for kind, f, path in self.files.get(name, ())
        ]
        return str(min(found)[1]) if found else None
