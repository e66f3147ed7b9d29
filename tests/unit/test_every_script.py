"""Words in every script (issue 29): Chinese, Japanese, Korean, Thai and mixed-script text found by
substring, and Latin queries answered exactly as before (same hits, same order, same scores)."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest
from support.sql import pairs
from support.vaults import index_notes

from server.index.scripts import index_tokens, query_parts
from server.index.search import build_match, search

NOTES = {
    "zh.md": "# 迁移计划\n\n数据库迁移到新的集群。",
    "ja.md": "# 会議\n\nデータベースの移行について話しました。東京で。",
    "ko.md": "# 회의\n\n데이터베이스를 새 클러스터로 옮겼다",
    "th.md": "# ไทย\n\nการย้ายฐานข้อมูลไปยังคลัสเตอร์ใหม่",
    "mix.md": "# Mixed\n\nKubernetes集群 migration plan",
    "en.md": "# Database migration\n\nWe migrate the database to the new cluster.",
    "en2.md": "# Plans\n\nA migration of notes, then another migration.",
}


@pytest.fixture
def scripts_db(conn: apsw.Connection, tmp_path: Path) -> apsw.Connection:
    return index_notes(conn, tmp_path / "v", NOTES)


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ("迁移", ["zh.md"]),  # the example: two characters inside a longer run
        ("数据库迁移", ["zh.md"]),
        ("迁", ["zh.md"]),  # one character
        ("。", []),  # punctuation is no word
        ("集群", ["mix.md", "zh.md"]),
        ("移行", ["ja.md"]),
        ("データ", ["ja.md"]),
        ("東京", ["ja.md"]),
        ("데이터베이스", ["ko.md"]),
        ("클러스터", ["ko.md"]),
        ("ฐานข้อมูล", ["th.md"]),  # Thai, its vowel signs included
        ("ย้าย", ["th.md"]),
        ("Kubernetes 集群", ["mix.md"]),  # mixed scripts, written together in the note
        ("迁移 集群", ["zh.md"]),
    ],
)
def test_found_by_substring(scripts_db: apsw.Connection, query: str, found: list[str]) -> None:
    result = search(scripts_db, query)
    every_word = result["hits"][: result.get("allWords", len(result["hits"]))]  # before any-word hits
    assert sorted(h["path"] for h in every_word) == found


@pytest.mark.parametrize(
    ("query", "found"),
    [
        ('"迁移"', ["zh.md"]),  # a phrase of one run, inside a longer run
        ("迁移 OR 移行", ["ja.md", "zh.md"]),
        ("body:集群", ["mix.md", "zh.md"]),
        ("title:计划", ["zh.md"]),
        ("迁移*", ["zh.md"]),
        ('"Kubernetes集群"', ["mix.md"]),
        ('"迁移" AND 集群', ["zh.md"]),
        ('"迁移" NOT 集群', []),
        ("集群 NOT Kubernetes", ["zh.md"]),
        ('"迁移" AND nowhere', []),
    ],
)
def test_found_by_substring_in_fts5_syntax(scripts_db: apsw.Connection, query: str, found: list[str]) -> None:
    """Quotes, OR/AND/NOT, a column filter or a ``*`` around a run find what the run alone finds."""
    assert sorted(h["path"] for h in search(scripts_db, query)["hits"]) == found


def test_a_substring_that_is_not_there_is_not_found(scripts_db: apsw.Connection) -> None:
    assert search(scripts_db, "迁集")["hits"] == []  # both characters occur, never together
    assert search(scripts_db, "数据库迁移到旧")["hits"] == []


def test_latin_queries_do_not_touch_the_new_column(scripts_db: apsw.Connection) -> None:
    for query in ("database migration", "migration", "plans"):
        strict, relaxed = build_match(query)
        assert "cjk" not in strict and "cjk" not in (relaxed or "")
    hits = search(scripts_db, "migration")["hits"]
    assert sorted(h["path"] for h in hits) == ["en.md", "en2.md", "mix.md"] and hits[0]["path"] == "en2.md"


def test_latin_ranking_is_bm25_over_the_same_columns(scripts_db: apsw.Connection) -> None:
    """A Latin query's scores are FTS5's bm25 with the weights of titles, body and tags unchanged."""
    hits = search(scripts_db, "migration")["hits"]
    raw = pairs(
        scripts_db,
        "SELECT n.path, -bm25(notes_fts, 10.0, 1.0, 5.0, 0.5, 1.0) FROM notes_fts JOIN notes n "
        "ON n.rid = notes_fts.rowid WHERE notes_fts MATCH '\"migration\"'",
    )
    assert {h["path"]: h["score"] for h in hits} == {p: float(f"{s:.6g}") for p, s in raw.items()}
    assert sorted(raw, key=lambda p: -raw[p]) == [h["path"] for h in hits]


def test_tokens() -> None:
    assert index_tokens("plain latin only") is None
    assert index_tokens("迁移") == "zz008fc10079fb zz0079fb"  # U+8FC1 U+79FB
    rest, runs = query_parts("Kubernetes集群")
    assert rest == ["Kubernetes"] and runs == ['cjk : "zz0096c6007fa4"']


FAR = "今天我们讨论了项目的进度和下一步的计划，大家都同意先完成测试。" * 40  # ~1,300 characters before the word


@pytest.mark.parametrize(
    ("query", "marked"),
    [
        ("迁移", ["**迁移**"]),  # inside the longer run 数据库迁移到: marked where it is
        ("데이터베이스", ["**데이터베이스**"]),  # Hangul as written (folding would decompose it)
        ("ย้าย", ["**ย้าย**"]),
        ("Kubernetes 集群", ["**Kubernetes**", "**集群**"]),  # both scripts marked
    ],
)
def test_an_excerpt_shows_where_a_run_was_found(
    conn: apsw.Connection, tmp_path: Path, query: str, marked: list[str]
) -> None:
    """snippet() reads the body, where a run matched in the cjk column is not a token: the excerpt is a
    window around the first match instead, never the note's start."""
    ending = {
        "迁移": "最后决定把数据库迁移到新的集群。",
        "데이터베이스": "데이터베이스를 새 클러스터로 옮겼다.",
        "ย้าย": "การย้ายฐานข้อมูลไปยังคลัสเตอร์ใหม่",
        "Kubernetes 集群": "Kubernetes集群 migration plan",
    }[query]
    db = index_notes(conn, tmp_path / "v", {"long.md": f"# 会议记录\n\n{FAR}\n\n{ending}\n"})
    (hit,) = search(db, query)["hits"]
    excerpt = hit["excerpt"]
    assert all(m in excerpt for m in marked), excerpt
    assert excerpt.startswith("…") and "会议记录" not in excerpt and len(excerpt) < 400


def test_a_run_and_its_window_in_a_note_past_the_snippet_size(conn: apsw.Connection, tmp_path: Path) -> None:
    """A note over SNIPPET_MAX_BYTES took the window already; the run is found there as in a short note."""
    from server.index.excerpt import SNIPPET_MAX_BYTES

    big = FAR * (SNIPPET_MAX_BYTES // len(FAR.encode()) + 2)
    db = index_notes(conn, tmp_path / "v", {"big.md": f"# 大\n\n{big}\n\n数据库迁移到新的集群。\n"})
    (hit,) = search(db, "迁移")["hits"]
    assert "**迁移**" in hit["excerpt"] and len(hit["excerpt"]) < 400
