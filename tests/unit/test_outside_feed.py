"""The dashboard's feed shows what a ``kms claude`` session changed outside kms (issue 28): each edit its hooks
reported that kms kept a version of is a row of that session, merged with the kms calls by time, filtered like
them, paged back and tailed live without gaps or duplicates whichever of the report and the version comes
first; a change nobody reported is no session's."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.outside import agent_tool, report_tool, someone_else
from support.writes import Env, Writer, make_env

from server.activity import outside_feed
from server.activity.feed import FeedFilter
from server.activity.outside_feed import Mark, merged_page, row_key, since
from server.index.incremental import reindex_file

SID = "s-outside"
V1 = b"# Plan\n\nfirst line\n"
V2 = V1 + b"second line, by the agent's Edit tool\n"


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def outside_rows(env: Env, flt: FeedFilter | None = None) -> list[dict]:
    return [r for r in merged_page(env.conn, flt).rows if outside_feed.is_outside(r)]


def test_a_reported_edit_is_a_row_of_its_session_with_the_note_and_the_size_change(env: Env) -> None:
    env.note("plan.md", V1)
    agent_tool(env.conn, env.vault, SID, "plan.md", V2)
    [row] = outside_rows(env)
    assert (row["session_id"], row["tool"], row["status"]) == (SID, "Edit (outside kms)", "outside")
    assert (row["vault"], row["path"], row["title"]) == ("v", "plan.md", "plan")
    assert row["size_change"] == len(V2) - len(V1) and not row["created"]
    assert row_key(row) == f"o{row['fid']}"
    shown = outside_feed.detail(env.conn, row["fid"])
    assert shown is not None and (shown.number, shown.before) == (2, 1)
    assert "+second line, by the agent's Edit tool" in shown.diff and "--- a/v/plan.md\t(version 1)" in shown.diff


def test_a_note_the_agent_wrote_new_shows_as_created_with_its_whole_text(env: Env) -> None:
    (env.root / "new.md").write_bytes(V1)
    report_tool(env.conn, SID, env.root / "new.md", tool="Write")
    reindex_file(env.conn, env.vault, "new.md")
    [row] = outside_rows(env)
    assert row["tool"] == "Write (outside kms)" and row["created"] and row["size_change"] == len(V1)
    shown = outside_feed.detail(env.conn, row["fid"])
    assert shown is not None and shown.before is None and "+first line" in shown.diff


def test_an_unreported_change_is_no_sessions_row(env: Env) -> None:
    """A person's save, and a report whose bytes kms never saw (a save landed before the watcher looked)."""
    env.note("plan.md", V1)
    someone_else(env.conn, env.vault, "plan.md", V2)
    (env.root / "plan.md").write_bytes(V1 + b"the agent's line\n")
    report_tool(env.conn, SID, env.root / "plan.md")
    someone_else(env.conn, env.vault, "plan.md", V1 + b"the person's line, saved before the watcher saw the agent's\n")
    assert outside_rows(env) == []
    assert [r["tool"] for r in merged_page(env.conn).rows] == []  # no kms call either


def test_the_session_tool_and_status_filters_apply_to_outside_rows(env: Env) -> None:
    env.note("a.md", V1)
    env.note("b.md", V1)
    agent_tool(env.conn, env.vault, "s-a", "a.md", V2)
    agent_tool(env.conn, env.vault, "s-b", "b.md", V2, tool="Write")
    Writer(env.db_path, "s-a").append(env.note("c.md", V1), "appended by a kms call")
    assert [r["session_id"] for r in outside_rows(env)] == ["s-b", "s-a"]
    assert [r["path"] for r in outside_rows(env, FeedFilter(session="s-a"))] == ["a.md"]
    assert [r.get("path") for r in merged_page(env.conn, FeedFilter(session="s-a")).rows] == ["c.md", "a.md"]
    assert [r["path"] for r in outside_rows(env, FeedFilter(tool="Write (outside kms)"))] == ["b.md"]
    assert outside_rows(env, FeedFilter(tool="kms_append")) == []
    assert outside_rows(env, FeedFilter(status="success")) == []
    for r in merged_page(env.conn).rows:  # the test a live row gets is the same as the query's
        assert FeedFilter(session="s-a").matches(r) == (r["session_id"] == "s-a")


def test_paging_back_through_both_sources_never_skips_or_repeats_a_row(env: Env) -> None:
    writer = Writer(env.db_path, "s-kms")
    target = env.note("log.md", V1)
    for i in range(7):
        env.note(f"n{i}.md", V1)
        agent_tool(env.conn, env.vault, SID, f"n{i}.md", V2 + f"{i}\n".encode())
        writer.append(target, f"call {i}")
        if i % 3 == 0:
            writer.append(target, f"second call {i}")
    everything = merged_page(env.conn, limit=100).rows
    assert len(everything) == 7 + 7 + 3
    assert [r["at"] for r in everything] == sorted((r["at"] for r in everything), reverse=True)
    seen: list[str] = []
    before_id = before_report = None
    while True:
        page = merged_page(env.conn, before_id=before_id, before_report=before_report, limit=4)
        seen += [row_key(r) for r in page.rows]
        calls = [r["id"] for r in page.rows if not outside_feed.is_outside(r)]
        reports = [r["fid"] for r in page.rows if outside_feed.is_outside(r)]
        before_id = min(calls, default=before_id)
        before_report = min(reports, default=before_report)
        if not page.more:
            break
    assert seen == [row_key(r) for r in everything]


def test_the_tail_finds_a_row_once_whichever_of_the_report_and_the_version_comes_last(env: Env) -> None:
    env.note("a.md", V1)
    env.note("b.md", V1)
    mark = merged_page(env.conn).mark
    # the report first: no row until the watcher sees the file
    (env.root / "a.md").write_bytes(V2)
    report_tool(env.conn, SID, env.root / "a.md")
    found, mark, more = since(env.conn, mark)
    assert found == [] and not more
    reindex_file(env.conn, env.vault, "a.md")
    found, mark, _ = since(env.conn, mark)
    assert [r["path"] for r in found] == ["a.md"]
    # the version first (the watcher was quicker than the hook)
    (env.root / "b.md").write_bytes(V2)
    reindex_file(env.conn, env.vault, "b.md")
    found, mark, _ = since(env.conn, mark)
    assert found == []
    report_tool(env.conn, SID, env.root / "b.md")
    found, mark, _ = since(env.conn, mark)
    assert [r["path"] for r in found] == ["b.md"]
    assert since(env.conn, mark)[0] == []  # nothing new: nothing again


def test_the_tail_pages_forward_without_duplicates(env: Env) -> None:
    for i in range(5):
        env.note(f"n{i}.md", V1)
    mark = merged_page(env.conn).mark
    for i in range(5):
        agent_tool(env.conn, env.vault, SID, f"n{i}.md", V2)
    keys: list[str] = []
    more = True
    while more:
        found, mark, more = since(env.conn, mark, limit=2)
        keys += [row_key(r) for r in found]
    assert len(keys) == len(set(keys)) == 5
    assert mark == outside_feed.marks(env.conn) != Mark()


def test_every_feed_query_reads_an_index(env: Env) -> None:
    """The dashboard asks several times a second and the history may keep many versions."""
    plan = " ".join(
        str(r) for r in env.conn.execute(f"EXPLAIN QUERY PLAN {outside_feed.ROWS_SQL} WHERE f.id > 0 ORDER BY f.id")
    )
    assert "history_versions_path" in plan and "SCAN v" not in plan and "SCAN h" not in plan
