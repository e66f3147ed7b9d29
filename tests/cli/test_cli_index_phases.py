"""``kms vault add`` says when a new vault became searchable and when its index was complete; ``kms status``
shows a vault a stop left searchable but not complete, and ``kms index`` completes it (issue 42)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from support.cli import kms, ok, said
from support.cold_index import add_killed_between_phases
from support.gen_vault import generate


def test_vault_add_says_when_the_vault_became_searchable_and_when_complete(tmp_path: Path) -> None:
    out = said(ok(kms("vault", "add", str(generate(tmp_path / "gen", notes=120)), "--name", "gen")).stdout)
    searchable = re.search(r"gen: searchable after (\d+\.\d+)s \((\d+) notes\); building links, tags and history", out)
    complete = re.search(r"gen: \d+ files, \+\d+ new.* complete in (\d+\.\d+)s", out)
    assert searchable and complete, out
    assert int(searchable[2]) > 100 and float(searchable[1]) <= float(complete[1])
    assert out.index("searchable after") < out.index("complete in")


def test_status_shows_a_vault_searchable_but_not_complete_until_kms_index_completes_it(tmp_path: Path) -> None:
    add_killed_between_phases(Path(os.environ["KMS_DB_PATH"]), generate(tmp_path / "gen", notes=60), "gen")
    status = json.loads(ok(kms("status", "--json")).stdout)
    assert status["vaults"][0]["index"] == "searchable; links and tags still being built"
    text = said(ok(kms("status")).stdout)
    assert "searchable; links and tags still being built (kms index completes it)" in text
    done = said(ok(kms("index")).stdout)
    assert "finished an index stopped between its two phases" in done
    status = json.loads(ok(kms("status", "--json")).stdout)
    assert status["vaults"][0]["index"] == "complete" and status["tags"] > 0
