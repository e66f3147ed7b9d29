"""The one vault summary (``server.index.overview``) behind kms status, vault list, doctor and the header."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import cast

import apsw
from support.vaults import write

from server.index.indexer import index_vault
from server.index.listing import status
from server.index.notes import set_hidden
from server.index.overview import Overview, overview
from server.vault.registry import add_vault


def test_counts_per_vault_and_in_total(indexed: apsw.Connection, tmp_path: Path) -> None:
    other = tmp_path / "other"
    write(other / "Broken.md", "---\ntitle: [unclosed\n---\nbody\n")
    write(other / "Fine.md", "# Fine\n")
    index_vault(indexed, add_vault(indexed, other, "other"))
    set_hidden(indexed, "Fine", True)
    [(sample_notes, sample_flagged)] = cast(
        list[tuple[int, int]],
        indexed.execute(
            "SELECT count(*), count(fm_error) FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE v.name = 'sample'"
        ).fetchall(),
    )

    cheap = overview(indexed)
    assert [(v.name, v.notes, v.hidden, v.flagged) for v in cheap.vaults] == [
        ("other", 2, 1, None),
        ("sample", sample_notes, 1, None),
    ]  # the sample's "Therapy notes": private: true
    assert (cheap.notes, cheap.hidden, cheap.flagged) == (sample_notes + 2, 2, None)
    assert cheap.last_indexed_at == max(v.last_indexed_at or 0 for v in cheap.vaults)

    full = overview(indexed, flagged=True)
    assert [v.flagged for v in full.vaults] == [1, sample_flagged] and full.flagged == 1 + sample_flagged
    st = status(indexed)
    assert (st["notes"], st["hidden"], st["flaggedCount"]) == (full.notes, full.hidden, full.flagged)
    assert st["vaults"] == [v.to_json() for v in full.vaults]


def test_a_missing_root_and_an_empty_index(conn: apsw.Connection, vault_dir: Path) -> None:
    assert overview(conn) == Overview() and overview(conn).last_indexed_at is None
    add_vault(conn, vault_dir, "gone")
    shutil.rmtree(vault_dir)
    [v] = overview(conn).vaults
    assert (v.notes, v.last_indexed_at, v.root_exists) == (0, None, False)
