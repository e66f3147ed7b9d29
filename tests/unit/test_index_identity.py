"""The index a cold ``kms index`` leaves is the one it always left (issue 42): every table's rows, as sorted
dumps with what legitimately differs between two runs taken out (``support.index_dump`` says what), are
compared with the digests committed in ``tests/data/index_identity.json``, which the code of main at
af0ff5c wrote (before the cold index was split into phases and given its savings), written again after
the merges of the git mode and of the sync tools (m054's ``vaults.git_mode``, NULL after an index, and m053's
``vaults.sync``, what keeps the folder in sync, are the only differences: every other table's digest is
af0ff5c's; the new tables, empty after an index, are now listed too).

A committed reference rather than the old code kept behind a switch: the old route would be a second copy
of the indexer to maintain, and the product keeps no route the person never runs. A change that means to
change the index (a new column, a new rule) writes the reference again with ``WRITE_INDEX_IDENTITY=1``
and says why in its commit.

The scenarios: the packaged sample vault, each test vault of ``tests/data/vaults`` (a Dendron workspace as
one vault by its root, and as two vaults whose ``dendron://`` links cross from the first indexed into the
second), and a generated vault large enough for the worker processes and the history's seed dictionary,
with a privacy rule and a second vault its ``dendron://other/`` links resolve into.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest
from support.dialect_vaults import CHECKOUT_NS, checkout
from support.gen_vault import generate
from support.index_dump import digests, dump
from support.vaults import REPO, SAMPLE_VAULT

from server.config.settings import set_value
from server.index.indexer import index_vault
from server.store.db import connect
from server.vault.registry import add_vault

REFERENCE = REPO / "tests" / "data" / "index_identity.json"
EMPTY = digests({"": []})[""][1]


def _fixed_copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest)
    for dirpath, _dirs, files in os.walk(dest):
        for f in files:
            os.utime(os.path.join(dirpath, f), ns=(CHECKOUT_NS, CHECKOUT_NS))
    return dest


def _index(conn: apsw.Connection, root: Path, name: str) -> None:
    report = index_vault(conn, add_vault(conn, root, name))
    assert report.added > 0


def _sample(conn: apsw.Connection, tmp: Path) -> None:
    _index(conn, _fixed_copy(SAMPLE_VAULT, tmp / "sample"), "sample")


def _dialect(name: str) -> Callable[[apsw.Connection, Path], None]:
    def build(conn: apsw.Connection, tmp: Path) -> None:
        _index(conn, checkout(name, tmp / name), name)

    return build


def _workspace_vaults(conn: apsw.Connection, tmp: Path) -> None:
    ws = checkout("dendron-workspace", tmp / "ws")
    _index(conn, ws / "main", "handbook")  # its dendron://acme.team links resolve once the second is indexed
    _index(conn, ws / "team" / "shared", "team")


def _generated(conn: apsw.Connection, tmp: Path) -> None:
    set_value("privacy.hide_tags", ["idea"], path=Path(os.environ["KMS_CONFIG"]), env={}, has_vault=True)
    _index(conn, generate(tmp / "gen", notes=450), "gen")
    _index(conn, generate(tmp / "other", notes=60), "other")  # gen's [[dendron://other/...]] land here


SCENARIOS: dict[str, Callable[[apsw.Connection, Path], None]] = {
    "sample": _sample,
    "obsidian": _dialect("obsidian"),
    "foam": _dialect("foam"),
    "logseq": _dialect("logseq"),
    "dendron": _dialect("dendron"),
    "dendron-workspace": _dialect("dendron-workspace"),
    "dendron-workspace-vaults": _workspace_vaults,
    "generated": _generated,
}


def scenario_dump(name: str, tmp: Path) -> dict:
    tmp.mkdir(parents=True, exist_ok=True)
    conn = connect(tmp / f"{name}.db")
    try:
        SCENARIOS[name](conn, tmp)
        assert conn.execute("SELECT count(*) FROM vaults WHERE index_state IS NOT NULL").fetchall() == [(0,)]
        return dump(conn, str(tmp))
    finally:
        conn.close()


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_the_cold_index_is_identical_to_the_reference(name: str, tmp_path: Path) -> None:
    got = digests(scenario_dump(name, tmp_path))
    reference = json.loads(REFERENCE.read_text()) if REFERENCE.exists() else {}
    if os.environ.get("WRITE_INDEX_IDENTITY") == "1":
        reference[name] = got
        REFERENCE.write_text(json.dumps(reference, indent=1, sort_keys=True) + "\n")
    assert name in reference, f"no reference for {name}: run with WRITE_INDEX_IDENTITY=1 on the reference code"
    # a table the reference does not know (another part's new table) must be empty after an index
    differ = {t: d for t, d in got.items() if reference[name].get(t, [0, EMPTY]) != d}
    missing = set(reference[name]) - set(got)
    assert not differ and not missing, f"tables that differ from the reference: {sorted(differ)} {sorted(missing)}"


def test_the_dump_is_the_same_for_two_runs_of_the_same_code(tmp_path: Path) -> None:
    """The reference means something only if the dump is deterministic: rids, ids, scan order and times out."""
    first = scenario_dump("generated", tmp_path / "a")
    second = scenario_dump("generated", tmp_path / "b")
    assert first == second
    assert len(first["notes"]) > 450 and len(first["links"]) > 1000 and len(first["notes_fts (instances)"]) > 10_000
    assert len(first["history_versions"]) > 450  # history on: every note's first version
    assert any(v is True for row in first["notes"] for v in row)  # some hidden (hidden_at set) by the rules
