"""``kms doctor`` names a change of several notes that a crash interrupted and that could not be undone
whole, because a person saved one of its notes before the next write call undid the rest."""

from __future__ import annotations

import json
from pathlib import Path

import apsw
from support.cli import kms, said

from server.writes.unit_journal import Entry, UnitJournal, journal_dir, recover


def test_doctor_names_an_unfinished_unit_and_where_the_old_text_is(
    indexed: apsw.Connection, db_path: Path, vault_dir: Path
) -> None:
    locks = db_path.parent / "locks"
    home, saved = vault_dir / "Home.md", b"the person saved this after the crash\n"
    old = home.read_bytes()
    home.write_bytes(saved)
    UnitJournal.begin(journal_dir(locks), [Entry(str(home), old, old + b"[[x]]\n")]).release()  # a dead writer's
    recover(indexed, locks)
    assert home.read_bytes() == saved  # the person's save is never written over
    shown = said(kms("doctor").stdout)
    assert "a crash interrupted" in shown and "Home.md" in shown and ".kept" in shown
    report = json.loads(kms("doctor", "--json").stdout)
    assert report["database"]["unfinishedUnits"][0]["notes"] == [str(home)]
