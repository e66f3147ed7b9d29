"""``kms doctor`` reports the rolling copies of the database (issue 37): how many, where and how old the newest
is, a warning when there is none or none recent, and says so when they are turned off."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import apsw
from support.cli import kms, said

from server.store.backup import backup_folder, make_backup


def test_doctor_reports_the_copies_and_warns_when_none_is_recent(indexed: apsw.Connection, db_path: Path) -> None:
    report = json.loads(kms("doctor", "--json").stdout)["database"]["backups"]
    assert (report["enabled"], report["copies"], report["newestAt"]) == (True, 0, None)
    assert "no copy of the database yet" in report["warning"]
    assert "no copy of the database yet" in said(kms("doctor").stdout)

    copy = make_backup(db_path)
    assert copy is not None
    shown = said(kms("doctor").stdout)
    assert f"backups: 1 of 3 in {backup_folder(db_path)}" in shown and "no copy" not in shown
    assert json.loads(kms("doctor", "--json").stdout)["database"]["backups"]["warning"] is None

    three_days_ago = time.time() - 3 * 86_400
    os.utime(copy, (three_days_ago, three_days_ago))
    assert "more than two days old" in said(kms("doctor").stdout)


def test_doctor_says_when_no_copies_are_made(indexed: apsw.Connection) -> None:
    assert kms("config", "set", "backup.enabled", "false").exit_code == 0
    assert "no copies of the database are made (backup.enabled is off)" in said(kms("doctor").stdout)
