"""The orientation core (issue 14, part A): the budget fitting of kms_start, memory facts, identities."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, cast

import apsw
import pytest
from support.vaults import write

from server.activity.start import answer_tokens, fit
from server.activity.visits import default_project, normalize_project
from server.errors import KmsError
from server.index.memory import parse_facts
from server.index.orientation import normalize_folder, normalize_tag
from server.vault.registry import get_vault
from server.writes.context import WriteContext


def _answer(n: int) -> dict:
    card = {"noteId": "n" + "0" * 12, "title": "t" * 80, "path": "p" * 80}
    return {
        "session": {"tiers": {"read": True}},
        "vaults": [{"name": "v", "folders": [card] * n}],
        "map": {"tags": [{"tag": "x" * 30, "count": 1}] * n, "mostLinked": [card] * n, "recent": [card] * n},
        "health": {},
        "sinceLastVisit": {"notes": [card] * 10},
        "memory": {},
    }


def test_fit_drops_whole_items_least_useful_first() -> None:
    big = _answer(60)
    assert answer_tokens(big) > 2_500
    out = fit(big, 2_500)
    assert out["tokenEstimate"] == answer_tokens(out) <= 2_500
    assert out["map"]["tags"] == [] or len(out["map"]["tags"]) < 60  # the tags gave way first
    assert out["omitted"]["map.tags"] == {"items": 60 - len(out["map"]["tags"]), "see": "kms_list_tags"}
    assert len(out["sinceLastVisit"]["notes"]) == 10  # what changed is the last to go
    assert all(c["title"] == "t" * 80 for c in out["map"]["recent"])  # items whole, never cut


def test_fit_leaves_a_small_answer_alone() -> None:
    small = _answer(2)
    out = fit(small, 2_500)
    assert "omitted" not in out and len(out["map"]["tags"]) == 2


def test_parse_facts_reads_items_under_headings_only() -> None:
    body = (
        "intro\n- not a fact (no heading yet)\n## Tools\n\n- 2026-12-01: uses uv\n* plain item\n"
        "```\n- 2026-01-01: in code\n```\n### Deep ##\n  - 2026-02-02: nested heading fact\n"
    )
    facts = parse_facts(body)
    assert [(f.category, f.date, f.text) for f in facts] == [
        ("Tools", "2026-12-01", "uses uv"),
        ("Tools", None, "plain item"),
        ("Deep", "2026-02-02", "nested heading fact"),
    ]
    assert facts[0].line == "- 2026-12-01: uses uv"


def test_identities(tmp_path: Path) -> None:
    assert normalize_project("  /a/b/ ") == "/a/b" and normalize_project("/") == "/" and normalize_project(" ") is None
    assert default_project("/x/") == "/x" and default_project(None, "/") is None
    assert default_project(None, str(Path.home())) is None
    assert default_project(None, str(tmp_path)) == str(tmp_path.resolve())


@pytest.mark.parametrize("bad", ["..", "a/../b", "a//b", "a/./b"])
def test_folder_paths_stay_in_the_vault(bad: str) -> None:
    with pytest.raises(KmsError) as e:
        normalize_folder(bad)
    assert e.value.kind == "invalid-input"
    assert normalize_folder(" /projects/kms/ ") == "projects/kms" and normalize_folder(".") == ""
    assert normalize_tag("#Project/") == "project"


def test_a_file_in_the_way_gets_a_memory_note_of_its_own(indexed: apsw.Connection, vault_dir: Path) -> None:
    from server.index.indexer import index_vault
    from server.writes.memory import remember

    write(vault_dir / "kms-memory" / "person.md", "# person\n\nThe person's own note, not kms memory.\n")
    index_vault(indexed, get_vault(indexed, "sample"))
    ctx = WriteContext.for_person(indexed, memory_folder="kms-memory")
    first = remember(ctx, about="person", text="Likes tea", now=0.0)
    second = remember(ctx, about="person", text="Likes tea too", now=0.0)
    assert first.result["path"] == second.result["path"] != "kms-memory/person.md"
    own = "# person\n\nThe person's own note, not kms memory.\n"
    assert (vault_dir / "kms-memory" / "person.md").read_text() == own
    assert re.fullmatch(
        r"- 19(69-12-31|70-01-01): Likes tea", cast(dict[str, Any], first.result)["line"]
    )  # the local date of now=0
    text = (vault_dir / first.result["path"]).read_text()
    assert [f.text for f in parse_facts(text)] == ["Likes tea", "Likes tea too"]
