"""The CLI shows by default what an agent would see, everywhere: hidden notes are left out of search
hits, of write records found by ``kms search --provenance`` and ``kms log``, and of ``kms status``;
``--include-hidden`` shows them, each marked with the rule that hides it."""

from __future__ import annotations

import json

import apsw
from support.cli import kms, ok, said
from support.sql import tuples

from server.activity.provenance import record
from server.index.notes import set_hidden

SECRET = "Therapy notes"  # hidden by the sample vault's frontmatter `private: true`


def planted(conn: apsw.Connection) -> None:
    nid, path = tuples(conn, "SELECT id, path FROM notes WHERE title = ?", (SECRET,))[0]
    record(
        conn,
        tool="kms_append",
        session_id="s1",
        status="success",
        note_id=nid,
        vault="sample",
        path=path,
        title=SECRET,
        input_summary="zebracorn",
        message="appended zebracorn",
    )
    set_hidden(conn, "Daily template", True)  # a flagged note (invalid YAML), hidden by the person


def test_search_leaves_hidden_notes_out_unless_asked(indexed: apsw.Connection) -> None:
    planted(indexed)
    assert [
        h["title"] for h in json.loads(ok(kms("search", "sessions", "--json")).stdout)["hits"] if h["title"] == SECRET
    ] == []
    hits = json.loads(ok(kms("search", "sessions", "--include-hidden", "--json")).stdout)["hits"]
    assert [h["hidden"] for h in hits if h["title"] == SECRET] == ["frontmatter:private"]
    assert all("hidden" not in h for h in hits if h["title"] != SECRET)
    text = said(ok(kms("search", "sessions", "--include-hidden")).stdout)
    assert f"{SECRET} sample:areas/health/{SECRET}.md" in text and "HIDDEN (frontmatter:private)" in text
    assert SECRET not in ok(kms("search", "sessions")).stdout


def test_write_records_on_hidden_notes_are_left_out_unless_asked(indexed: apsw.Connection) -> None:
    planted(indexed)
    assert json.loads(ok(kms("search", "zebracorn", "--provenance", "--json")).stdout)["provenance"] == []
    assert "No matches." in ok(kms("search", "zebracorn", "--provenance")).stdout
    found = json.loads(ok(kms("search", "zebracorn", "--provenance", "--include-hidden", "--json")).stdout)
    assert [(p["title"], p["hidden"]) for p in found["provenance"]] == [(SECRET, "frontmatter:private")]
    assert json.loads(ok(kms("log", "--json")).stdout) == []
    assert SECRET not in ok(kms("log")).stdout
    logged = json.loads(ok(kms("log", "--json", "--include-hidden")).stdout)
    assert [(r["title"], r["hidden"]) for r in logged] == [(SECRET, "frontmatter:private")]
    table = ok(kms("log", "--include-hidden")).stdout  # (a table cell: folded at the console's width)
    assert "HIDDEN" in table and "frontmatter" in table and ":private)" in table


def test_status_leaves_hidden_notes_out_unless_asked(indexed: apsw.Connection) -> None:
    planted(indexed)
    status = json.loads(ok(kms("status", "--json")).stdout)
    assert status["flagged"] == [] and status["flaggedCount"] == 1  # counted, as `hidden` is, not named
    assert "Daily template" not in ok(kms("status")).stdout
    shown = json.loads(ok(kms("status", "--json", "--include-hidden")).stdout)
    assert [(f["path"], f["hidden"]) for f in shown["flagged"]] == [("templates/Daily template.md", "kms hide")]
    assert "HIDDEN (kms hide)" in said(ok(kms("status", "--include-hidden")).stdout)
