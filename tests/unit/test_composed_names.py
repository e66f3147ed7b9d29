"""A name written decomposed (``Cafe`` + U+0301, as macOS and many sync tools write file names) and the same
name typed composed (``Café``) are one name: a note is found by its title and path, a link resolves to it
and counts as its backlink, a link to an attachment finds the file (``server.vault.paths.name_key``); a
database indexed before (m043) reads those notes again at the next index."""

from __future__ import annotations

import unicodedata
from pathlib import Path

import apsw
from support.vaults import write

from server.index import orientation
from server.index.indexer import index_vault
from server.index.listing import outgoing_links
from server.index.notes import find_note
from server.store.db import connect
from server.store.migrations import applied
from server.vault.registry import add_vault, get_vault

CAFE = "Café"  # composed, as typed
CAFE_ON_DISK = unicodedata.normalize("NFD", CAFE)  # decomposed, as the file system wrote it


def vault(root: Path) -> Path:
    write(root / f"{CAFE_ON_DISK}.md", f"# {CAFE}\n\nabout coffee\n")
    decomposed = unicodedata.normalize("NFD", "Résumé.pdf")
    write(root / "Linker.md", f"# Linker\n\nsee [[{CAFE}]] and ![[{decomposed}|cv]] and [[Résumé.pdf]]\n")
    (root / unicodedata.normalize("NFD", "Résumé.pdf")).write_bytes(b"%PDF")
    return root


def test_a_decomposed_file_name_is_found_and_linked_by_the_composed_name(conn: apsw.Connection, tmp_path: Path) -> None:
    index_vault(conn, add_vault(conn, vault(tmp_path / "v"), "v"))
    for ref in (CAFE, CAFE_ON_DISK, f"v:{CAFE}.md", f"{CAFE}.md", CAFE.upper()):
        assert find_note(conn, ref)["path"] == f"{CAFE_ON_DISK}.md", ref  # the title is the file's name
    linker = find_note(conn, "Linker")
    assert [link["path"] for link in outgoing_links(conn, linker["rid"])["links"]] == [f"{CAFE_ON_DISK}.md"]
    assert orientation.unresolved(conn) == ([], 0)  # the note and the attachment, however each was written


def test_upgrade_to_m043_reads_the_decomposed_notes_again(tmp_path: Path) -> None:
    root, path = vault(tmp_path / "v"), tmp_path / "m042.db"
    conn = connect(path)
    index_vault(conn, add_vault(conn, root, "v"))
    # as m042 left them: keys lower-cased only, so the link typed composed found neither note nor file
    conn.execute("UPDATE note_keys SET key = lower(?) WHERE key = lower(?)", (CAFE_ON_DISK, CAFE))
    conn.execute("UPDATE attachments SET key = replace(key, 'é', ?)", ("e\u0301",))
    conn.execute("UPDATE links SET dst_rid = NULL, dst_file = NULL")
    conn.execute("DELETE FROM _migrations WHERE name = 'm043_composed_name_keys'")
    conn.close()

    conn = connect(path)
    assert "m043_composed_name_keys" in applied(conn)
    index_vault(conn, get_vault(conn, "v"))
    assert find_note(conn, CAFE)["path"] == f"{CAFE_ON_DISK}.md"
    assert orientation.unresolved(conn) == ([], 0)
    conn.close()
