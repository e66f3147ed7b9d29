"""The four write operations on real files and a real index (no mocks)."""

from __future__ import annotations

import codecs
import json
import os
import time
from pathlib import Path

import pytest
import yaml
from support.sql import value
from support.writes import Env, Writer, make_env

from server.activity.provenance import list_invocations
from server.errors import KmsError
from server.vault.files import TextFormat, sha256_hex
from server.writes import cas, operations
from server.writes.context import WriteContext, load_note
from server.writes.outcome import Edit


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return make_env(tmp_path)


def svc(env: Env, allowlist: list[str] | None = None) -> Writer:
    from server.activity.ratelimit import RateLimiter

    return Writer(env.db_path, "test-session", RateLimiter(None, None), allowlist)


def err(fn, *args, **kwargs) -> KmsError:
    with pytest.raises(KmsError) as e:
        fn(*args, **kwargs)
    return e.value


def tags_of(env: Env, note_id: str) -> list[str]:
    return sorted(
        r[0]
        for r in env.conn.execute(
            "SELECT tag FROM note_tags t JOIN notes n ON n.rid = t.rid WHERE n.id = ?", (note_id,)
        )
    )


def last_row(env: Env) -> dict:
    return list_invocations(env.conn, limit=1)[0]


# ----- create -----------------------------------------------------------------------------------


def test_create_writes_indexes_and_reports(env: Env) -> None:
    out = svc(env).create("Meeting: 10/2", "Agenda\n\n- one", tags=["Work", "plan"], folder="inbox/2024")
    assert out["path"] == "inbox/2024/Meeting- 10-2.md" and out["title"] == "Meeting- 10-2"
    text = env.read(out["path"])
    assert text == "---\ntags:\n  - Work\n  - plan\n---\nAgenda\n\n- one\n"
    assert out["bytesBefore"] == 0 and out["bytesAfter"] == len(text.encode()) and out["linesAdded"] == 8
    assert out["vault"] == "v" and out["version"] == sha256_hex(text.encode())
    assert env.conn.execute("SELECT path FROM notes WHERE id = ?", (out["noteId"],)).fetchall() == [(out["path"],)]
    assert tags_of(env, out["noteId"]) == ["plan", "work"]
    row = last_row(env)
    assert row["status"] == "success" and row["inserted_text"] == text and row["insert_offset"] == 0


def test_create_never_overwrites_case_insensitively(env: Env) -> None:
    env.note("Ideas.md", "mine\n")
    e = err(svc(env).create, "ideas", "agent text")
    assert e.kind == "already-exists" and e.extra["path"] == "ideas.md"  # what was asked for, never the file
    assert env.read("Ideas.md") == "mine\n" and not (env.root / "ideas.md").exists()
    assert err(svc(env).create, "IDEAS.md", "x").kind == "already-exists"
    assert last_row(env)["status"] == "error" and last_row(env)["error"] == "already-exists"


def test_create_merges_tags_into_content_frontmatter(env: Env) -> None:
    out = svc(env).create("T", "---\nstatus: draft  # keep\ntags: [a]\n---\nbody\n", tags=["b", "A"])
    assert env.read(out["path"]) == "---\nstatus: draft  # keep\ntags: [a, b]\n---\nbody\n"


@pytest.mark.parametrize(
    ("kwargs", "kind"),
    [
        ({"title": "x", "content": "a" * (100 * 1024 + 1)}, "invalid-input"),
        ({"title": "x", "tags": ["bad tag"]}, "invalid-input"),
        ({"title": "x", "tags": ["-x"]}, "invalid-input"),
        ({"title": "x", "tags": [f"t{i}" for i in range(51)]}, "invalid-input"),
        ({"title": "..."}, "invalid-input"),
        ({"title": "x", "folder": "../out"}, "invalid-input"),
        ({"title": "x", "content": "---\nkms_provenance: 1\n---\n"}, "invalid-input"),
        ({"title": "x", "vault": "nope"}, "not-found"),
    ],
)
def test_create_refusals(env: Env, kwargs: dict, kind: str) -> None:
    e = err(svc(env).create, **kwargs)
    assert e.kind == kind
    assert list(env.root.rglob("*")) == []
    assert last_row(env)["error"] == kind


def test_create_allowlist(env: Env) -> None:
    """``drafts/*`` is the notes directly in drafts/ (the example kms gives), ``inbox`` inbox/ and below."""
    s = svc(env, ["drafts/*", "inbox"])
    e = err(s.create, "x", folder="notes")
    assert e.kind == "folder-denied" and e.extra["allowed"] == ["drafts/*", "inbox"]
    assert "drafts/*" in e.message and not (env.root / "notes").exists()
    assert e.extra["wouldAllow"] == "notes/*"
    assert err(s.create, "x", folder="drafts/a").kind == "folder-denied"
    assert err(s.create, "x", folder="drafts/a/b").kind == "folder-denied"
    assert err(s.create, "x").kind == "folder-denied"  # the root is not listed
    assert s.create("x", folder="drafts")["path"] == "drafts/x.md"
    assert s.create("x", folder="inbox")["path"] == "inbox/x.md"
    assert s.create("y", folder="inbox/deep/er")["path"] == "inbox/deep/er/y.md"
    assert last_row(env)["status"] == "success"
    statuses = [r["status"] for r in list_invocations(env.conn)]
    assert statuses.count("folder-denied") == 4


# ----- append -----------------------------------------------------------------------------------


NOTE = "---\ntitle: N\n---\n# N\n\nintro\n\n## Tasks\n- a\n- b\n\n### Sub\n- s\n\n## Done\n- z\n"


def test_append_at_end_keeps_trailing_newline(env: Env) -> None:
    nid = env.note("n.md", NOTE)
    out = svc(env).append(nid, "tail line\n")
    assert env.read("n.md") == NOTE + "\ntail line\n"
    assert out["linesAdded"] == 2 and out["bytesAfter"] - out["bytesBefore"] == len("\n\ntail line")
    row = last_row(env)
    assert row["inserted_text"] == "\n\ntail line" and row["insert_offset"] == len(NOTE) - 1


def test_index_after_a_write_is_what_reading_the_file_gives(env: Env) -> None:
    """The write path indexes the bytes it wrote (parsed while they were fsynced) instead of reading
    the file back: the row must be exactly what a fresh read of the file yields, so the watcher's
    echo of the write finds nothing to do."""
    from server.index.incremental import reindex_file
    from server.index.records import read_record

    nid = env.note("log.md", "---\ntags: [log]\n---\n# Log\n\n- first #day1 see [[Other]]\n")
    svc(env).append(nid, "## Later\n\n- second #day2 and [[Third|3]]\n\n```\n#not-a-tag [[not-a-link]]\n```")
    st = (env.root / "log.md").stat()
    fresh = read_record(str(env.root), "log.md", st.st_mtime_ns, st.st_size)
    assert fresh.values is not None
    cols = [c for c in fresh.values if c not in ("updated_at", "created", "born", "fm_id")]  # not columns
    row = env.conn.execute(f"SELECT {', '.join(cols)}, rid, indexed_at FROM notes WHERE id = ?", (nid,)).fetchall()[0]
    assert dict(zip(cols, row[:-2], strict=True)) == {c: fresh.values[c] for c in cols}
    assert (fresh.values["mtime_ns"], fresh.values["size_bytes"]) == (st.st_mtime_ns, st.st_size)
    rid, indexed_at = row[-2:]
    assert tags_of(env, nid) == sorted(fresh.tags) == ["day1", "day2", "log"]
    links = env.conn.execute(
        "SELECT ord, target, target_key, heading, block, alias, embed, in_frontmatter, line, "
        "alt_key, target_vault "
        "FROM links WHERE src_rid = ? ORDER BY ord",
        (rid,),
    ).fetchall()
    assert [tuple(r) for r in links] == [tuple(x) for x in fresh.links]
    heads = env.conn.execute(
        "SELECT ord, level, text, line FROM headings WHERE rid = ? ORDER BY ord", (rid,)
    ).fetchall()
    assert [tuple(r) for r in heads] == [tuple(x) for x in fresh.headings]
    assert reindex_file(env.conn, env.vault, "log.md") == nid  # the watcher's echo: a no-op
    assert env.conn.execute("SELECT indexed_at FROM notes WHERE id = ?", (nid,)).fetchall()[0][0] == indexed_at


def test_append_without_trailing_newline(env: Env) -> None:
    nid = env.note("n.md", "one\ntwo")
    svc(env).append(nid, "three", separator="\n")
    assert env.read("n.md") == "one\ntwo\nthree"


def test_append_under_heading_section(env: Env) -> None:
    nid = env.note("n.md", NOTE)
    svc(env).append(nid, "- c", heading="Tasks", separator="\n")
    assert env.read("n.md") == NOTE.replace("- s\n\n## Done", "- s\n- c\n\n## Done")
    svc(env).append(nid, "- y", heading="## Done", separator="\n")
    assert env.read("n.md").endswith("## Done\n- z\n- y\n")


def test_append_heading_errors(env: Env) -> None:
    text = "# A\n## Same\nx\n```\n## Fake\n```\n## Same\ny\n"
    nid = env.note("n.md", text)
    e = err(svc(env).append, nid, "c", heading="Same")
    assert e.kind == "invalid-input" and len(e.extra["candidates"]) == 2 and "line 2" in e.message
    e = err(svc(env).append, nid, "c", heading="Fake")  # inside fenced code: not a heading
    assert e.kind == "invalid-input" and "## Same (line 7)" in e.extra["candidates"]
    assert env.read("n.md") == text


def test_append_empty_and_frontmatter_only_notes(env: Env) -> None:
    a = env.note("a.md", "")
    svc(env).append(a, "hello")
    assert env.read("a.md") == "hello\n"
    b = env.note("b.md", "---\nx: 1\n---\n")
    svc(env).append(b, "hello")
    assert env.read("b.md") == "---\nx: 1\n---\nhello\n"


def test_append_preserves_crlf_and_bom(env: Env) -> None:
    raw = codecs.BOM_UTF8 + b"---\r\nk: v\r\n---\r\n# T\r\n\r\nline\r\n"
    nid = env.note("c.md", raw)
    svc(env).append(nid, "new\nlines\n")
    data = (env.root / "c.md").read_bytes()
    assert data == raw[:-2] + b"\r\n\r\nnew\r\nlines\r\n"
    assert data.startswith(codecs.BOM_UTF8) and b"\n" not in data.replace(b"\r\n", b"")
    row = last_row(env)
    text = data[3:].decode()
    assert row["inserted_text"] == "\r\n\r\nnew\r\nlines"
    assert text[row["insert_offset"] :].startswith(row["inserted_text"])


def test_append_limits_and_missing(env: Env) -> None:
    nid = env.note("n.md", "x\n")
    assert err(svc(env).append, nid, "a" * (50 * 1024 + 1)).kind == "invalid-input"
    assert err(svc(env).append, nid, "   \n").kind == "invalid-input"
    assert err(svc(env).append, "nope", "x").kind == "not-found"
    env.conn.execute("UPDATE notes SET hidden_at = 1 WHERE id = ?", (nid,))
    assert err(svc(env).append, nid, "x").kind == "not-found"
    assert env.read("n.md") == "x\n"


def test_append_file_gone(env: Env) -> None:
    nid = env.note("n.md", "x\n")
    (env.root / "n.md").unlink()
    assert err(svc(env).append, nid, "x").kind == "not-found"
    assert not (env.root / "n.md").exists()


def test_non_utf8_note_refused_unchanged(env: Env) -> None:
    raw = "caf\xe9\n".encode("latin-1")
    nid = env.note("l.md", raw)
    assert err(svc(env).append, nid, "x").kind == "invalid-input"
    assert (env.root / "l.md").read_bytes() == raw


def test_allowlist_for_note_writes(env: Env) -> None:
    nid = env.note("private/n.md", "---\na: 1\n---\nx\n")
    s = svc(env, ["drafts/*"])
    assert err(s.append, nid, "y").kind == "folder-denied"
    assert err(s.insert_at, nid, "y", {"atLine": 4}).kind == "folder-denied"
    assert err(s.update_properties, nid, {"b": 2}).kind == "folder-denied"  # frontmatter too: no exemption
    assert env.read("private/n.md") == "---\na: 1\n---\nx\n"


# ----- versions and concurrency -----------------------------------------------------------------


def test_version_token(env: Env) -> None:
    nid = env.note("n.md", "x\n")
    v0 = sha256_hex(b"x\n")
    assert value(env.conn, "SELECT content_hash FROM notes WHERE id = ?", (nid,)) == v0
    out = svc(env).append(nid, "y", version=v0)
    e = err(svc(env).append, nid, "z", version=v0)
    assert e.kind == "conflict" and e.extra["currentVersion"] == out["version"]
    assert last_row(env)["status"] == "conflict"
    assert err(svc(env).append, nid, "z", version="abc").kind == "invalid-input"
    assert env.read("n.md") == "x\n\ny\n"


def test_person_edit_during_write_is_retried_then_conflicts(env: Env) -> None:
    nid = env.note("n.md", "start\n")
    note, vault = load_note(env.conn, nid)
    path = env.root / "n.md"
    calls = []

    def person_once(text: str, fmt: TextFormat) -> Edit:
        calls.append(text)
        if len(calls) == 1:
            path.write_text("person rewrote\n")  # a person's editor saves while kms computes
        return Edit(text + "agent\n")

    cas.write_note(WriteContext.for_person(env.conn), vault, note, person_once)
    assert calls == ["start\n", "person rewrote\n"] and env.read("n.md") == "person rewrote\nagent\n"

    def person_always(text: str, fmt: TextFormat) -> Edit:
        path.write_text(f"person {len(text)}\n")
        return Edit(text + "agent\n")

    e = err(cas.write_note, WriteContext.for_person(env.conn), vault, note, person_always)
    assert e.kind == "conflict" and e.extra["currentVersion"] == sha256_hex(path.read_bytes())
    assert "agent" not in env.read("n.md")


# ----- insert_at --------------------------------------------------------------------------------


DOC = "---\na: 1\n---\n# T\n\nfirst para\nstill first\n\n## H2\nbody\n\n```\nfirst in code\n```\n"


@pytest.mark.parametrize(
    ("position", "expected"),
    [
        ({"afterHeading": "T"}, DOC + "\nNEW\n"),  # a level-1 section runs to the end (its H2 included)
        ({"beforeHeading": "## H2"}, DOC.replace("## H2\n", "NEW\n## H2\n")),
        ({"afterBlockContaining": "still"}, DOC.replace("still first\n\n", "still first\n\nNEW\n\n")),
        ({"afterBlockContaining": "in code"}, DOC + "\nNEW\n"),
        ({"atLine": 4}, DOC.replace("# T\n", "NEW\n# T\n")),
        ({"atLine": 15}, DOC + "NEW\n"),
    ],
)
def test_insert_at_positions(env: Env, position: dict, expected: str) -> None:
    nid = env.note("d.md", DOC)
    out = svc(env).insert_at(nid, "NEW", position)
    assert env.read("d.md") == expected
    row = last_row(env)
    assert expected[row["insert_offset"] :].startswith(row["inserted_text"])
    assert out["linesAdded"] == expected.count("\n") - DOC.count("\n")


SECTIONS = "# Log\n\nfirst entry\n\n### Detail\ndeep\n\n## Next\n\nnext body\n\n# Other\ntail\n"


def test_insert_after_heading_goes_after_the_section_content(env: Env) -> None:
    """The contract: after the named heading's content (up to the next heading of the same or a higher
    level), with kms_append's separator rules; two successive inserts stay separate paragraphs."""
    nid = env.note("s.md", SECTIONS)
    ws = svc(env)
    ws.insert_at(nid, "one", {"afterHeading": "## Next"})
    ws.insert_at(nid, "two", {"afterHeading": "Next"})
    assert env.read("s.md") == SECTIONS.replace("next body\n", "next body\n\none\n\ntwo\n")
    ws.insert_at(nid, "three", {"afterHeading": "Detail"})
    assert "### Detail\ndeep\n\nthree\n\n## Next" in env.read("s.md")
    # exactly where kms_append with the same heading puts it
    other = env.note("t.md", SECTIONS)
    ws.append(other, "one", heading="## Next")
    ws.append(other, "two", heading="Next")
    assert env.read("t.md") == env.read("s.md").replace("\n\nthree", "")
    rows = list_invocations(env.conn, limit=5)
    assert all(r["change_kind"] == "text-inserted" for r in rows)


def test_insert_after_an_empty_heading_and_crlf(env: Env) -> None:
    nid = env.note("c.md", "# A\r\n# B\r\nb\r\n")
    svc(env).insert_at(nid, "x\ny", {"afterHeading": "A"})
    assert env.read("c.md") == "# A\r\n\r\nx\r\ny\r\n# B\r\nb\r\n"


@pytest.mark.parametrize(
    "position",
    [
        {"afterBlockContaining": "first"},  # paragraph and code block
        {"afterBlockContaining": "absent"},
        {"afterHeading": "Nope"},
        {"atLine": 2},  # inside the frontmatter
        {"atLine": 16},
        {"atLine": 0},
        {"atLine": True},
        {"afterHeading": "T", "atLine": 4},
        {"somewhere": "x"},
        "afterHeading",
    ],
)
def test_insert_at_refusals(env: Env, position) -> None:
    nid = env.note("d.md", DOC)
    e = err(svc(env).insert_at, nid, "NEW", position)
    assert e.kind == "invalid-input"
    assert env.read("d.md") == DOC


def test_insert_at_names_candidates(env: Env) -> None:
    nid = env.note("d.md", DOC)
    e = err(svc(env).insert_at, nid, "NEW", {"afterBlockContaining": "first"})
    assert e.extra["candidates"] == ["line 6: first para", "line 12: ```"]


def test_insert_at_end_without_trailing_newline(env: Env) -> None:
    nid = env.note("e.md", "a\nb")
    svc(env).insert_at(nid, "c", {"atLine": 3})
    assert env.read("e.md") == "a\nb\nc"
    svc(env).insert_at(nid, "p", {"afterBlockContaining": "c"})
    assert env.read("e.md") == "a\nb\nc\n\np"


def test_insert_keeps_summary_block_first(env: Env) -> None:
    text = "---\na: 1\n---\n<!-- kms:summary hash=abc -->\nSum.\n<!-- /kms:summary -->\n# T\n"
    nid = env.note("s.md", text)
    assert err(svc(env).insert_at, nid, "x", {"atLine": 4}).kind == "invalid-input"
    svc(env).insert_at(nid, "x", {"atLine": 7})
    assert env.read("s.md") == text.replace("# T\n", "x\n# T\n")


# ----- update_properties ------------------------------------------------------------------------


FM = (
    "---\n"
    'title: "Quoted"   # a comment\n'
    "created: 2024-01-02\n"
    "tags:\n  - a\n  - b\n"
    "flow: [x, 'y']\n"
    "nested:\n    k: 1\n"
    "# closing comment\n"
    "---\n"
    "Body  with  spaces\n#a inline tag\n"
)


def test_update_properties_touches_only_changed_keys(env: Env) -> None:
    nid = env.note("p.md", FM)
    out = svc(env).update_properties(nid, {"status": "yes", "flow": ["z"], "count": 3}, ["created"])
    text = env.read("p.md")
    assert text == FM.replace("created: 2024-01-02\n", "").replace("flow: [x, 'y']", "flow: [z]").replace(
        "# closing comment\n", "# closing comment\nstatus: 'yes'\ncount: 3\n"
    )
    assert text.endswith("---\nBody  with  spaces\n#a inline tag\n")
    fm = yaml.safe_load(text.split("---\n")[1])
    assert fm["status"] == "yes" and fm["count"] == 3 and "created" not in fm and fm["nested"] == {"k": 1}
    row = last_row(env)
    assert json.loads(json.dumps(row["props_before"])) == {
        "created": {"__yaml__": "v: 2024-01-02\n"},
        "status": {"__absent__": True},
        "flow": ["x", "y"],
        "count": {"__absent__": True},
    }
    assert row["props_after"] == {"created": {"__absent__": True}, "status": "yes", "flow": ["z"], "count": 3}
    assert out["linesAdded"] == 1


def test_update_properties_idempotent(env: Env) -> None:
    nid = env.note("p.md", FM)
    svc(env).update_properties(nid, {"status": "done", "tags": ["a", "b"]})
    first = (env.root / "p.md").read_bytes()
    again = svc(env).update_properties(nid, {"status": "done", "tags": ["a", "b"]}, ["missing"])
    assert again["changed"] is False and again["bytesBefore"] == again["bytesAfter"] == len(first)
    assert (env.root / "p.md").read_bytes() == first


def test_update_properties_creates_frontmatter_body_untouched(env: Env) -> None:
    body = "# Title\n\n---\nnot frontmatter\n"
    nid = env.note("b.md", body)
    svc(env).update_properties(nid, {"tags": ["x"], "n": 1.5})
    assert env.read("b.md") == "---\ntags:\n  - x\nn: 1.5\n---\n" + body
    assert last_row(env)["inserted_text"] == "---\ntags:\n  - x\nn: 1.5\n---\n"


def test_update_properties_crlf_bom(env: Env) -> None:
    raw = codecs.BOM_UTF8 + b"---\r\na: 1\r\n---\r\nbody\r\n"
    nid = env.note("c.md", raw)
    svc(env).update_properties(nid, {"b": [1, True, "s"]})
    expected = b"---\r\na: 1\r\nb:\r\n  - 1\r\n  - true\r\n  - s\r\n---\r\nbody\r\n"
    assert (env.root / "c.md").read_bytes() == codecs.BOM_UTF8 + expected


def test_tags_reconciled_in_index(env: Env) -> None:
    nid = env.note("t.md", "---\ntags: [keep, drop]\n---\ntext #inline\n")
    assert tags_of(env, nid) == ["drop", "inline", "keep"]
    svc(env).update_properties(nid, {"tags": ["keep"]})
    assert tags_of(env, nid) == ["inline", "keep"]
    svc(env).update_properties(nid, {}, ["tags"])
    assert tags_of(env, nid) == ["inline"]


@pytest.mark.parametrize(
    "text",
    [
        "---\na: [unclosed\n---\nbody\n",
        "---\na: 1\na: 2\n---\nbody\n",
        "---\n- a list\n---\nbody\n",
        "---\na: 1\nbody without end\n",
        "---\n\ta: tab\n---\n",
    ],
)
def test_bad_frontmatter_refused_unchanged(env: Env, text: str) -> None:
    nid = env.note("bad.md", text)
    e = err(svc(env).update_properties, nid, {"x": 1})
    assert e.kind == "invalid-input"
    assert env.read("bad.md") == text


@pytest.mark.parametrize(
    ("set_", "remove"),
    [
        ({"kms_provenance": "x"}, None),
        ({}, ["kms_provenance"]),
        ({"a": None}, None),
        ({"a": {"nested": 1}}, None),
        ({"a": [[1]]}, None),
        ({"a": float("nan")}, None),
        ({"bad key:": 1}, None),
        ({"a": 1}, ["a"]),
        ({}, None),
        ({"tags": ["no spaces allowed"]}, None),
        ({"a": "ctrl\x07"}, None),
    ],
)
def test_update_properties_input_refusals(env: Env, set_: dict, remove: list | None) -> None:
    nid = env.note("p.md", FM)
    assert err(svc(env).update_properties, nid, set_, remove).kind == "invalid-input"
    assert env.read("p.md") == FM


def test_quoting_survives_yaml11_and_yaml12_readers(env: Env) -> None:
    nid = env.note("q.md", "x\n")
    values = {
        "a": "yes",
        "b": "1:20",
        "c": "0777",
        "d": "2024-01-01",
        "e": "null",
        "f": "multi\nline",
        "g": "",
        "h": "1e3",
        "i": "0o17",
        "j": "on",
    }
    svc(env).update_properties(nid, values)
    text = env.read("q.md")
    assert yaml.safe_load(text.split("---\n")[1]) == values
    from ruamel.yaml import YAML

    assert dict(YAML(typ="safe").load(text.split("---\n")[1])) == values
    indexed = value(env.conn, "SELECT frontmatter FROM notes WHERE id = ?", (nid,))
    assert json.loads(indexed) == values  # and the index (YAML 1.2) reads them as the same text


def test_list_style_follows_note(env: Env) -> None:
    nid = env.note("l.md", "---\naliases:\n- one\n---\n")
    svc(env).update_properties(nid, {"tags": ["a", "b"]})
    assert env.read("l.md") == "---\naliases:\n- one\ntags:\n- a\n- b\n---\n"


def test_feature_disabled_is_recorded(env: Env) -> None:
    from server.activity.ratelimit import RateLimiter

    ws = Writer(env.db_path, "s", RateLimiter(), enabled=False)
    assert err(ws.create, "x").kind == "feature-disabled"
    assert list(env.root.iterdir()) == []
    row = last_row(env)
    assert row["error"] == "feature-disabled" and row["tool"] == "kms_create"
    assert ws.counters()["total"] == 0


def test_note_emptied_by_a_person_can_be_appended(env: Env) -> None:
    """An empty file the index still knows as non-empty is a save in progress only while it is fresh."""
    nid = env.note("n.md", "old content\n")
    path = env.root / "n.md"
    path.write_text("")
    os.utime(path, (time.time() - 5, time.time() - 5))
    svc(env).append(nid, "new")
    assert env.read("n.md") == "new\n"


# ----- the atomic write primitives --------------------------------------------------------------


def test_pending_write_replaces_only_on_commit_and_leaves_no_temp_file(tmp_path: Path) -> None:
    from server.vault.files import PendingWrite

    target = tmp_path / "n.md"
    target.write_bytes(b"old\n")
    os.chmod(target, 0o640)
    with PendingWrite(target, b"discarded\n"):
        assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.md"]  # the temp file is gone
    with PendingWrite(target, b"new\n" * 50_000) as pending:  # bigger than one write() may take
        pending.commit()
        pending.wait_durable()
    assert target.read_bytes() == b"new\n" * 50_000
    assert oct(target.stat().st_mode & 0o777) == oct(0o640)  # the note keeps its permissions
    assert sorted(p.name for p in tmp_path.iterdir()) == ["n.md"]
    assert pending.stamp == f"{target.stat().st_ino} {target.stat().st_mtime_ns} {target.stat().st_size}"


def test_lock_stamp_is_rewritten_in_place(tmp_path: Path) -> None:
    """The stamp is a fixed-width record: a shorter stamp after a longer one reads back exactly,
    and so does a stamp an older kms wrote by truncating the file."""
    from server.store.locks import file_lock
    from server.vault.saves import read_stamp, write_stamp

    with file_lock(tmp_path / "n.md", tmp_path / "locks") as fd:
        assert read_stamp(fd) == ""
        write_stamp(fd, "123456789012 1732931234123456789 123456789")
        write_stamp(fd, "1 2 3")
        assert read_stamp(fd) == "1 2 3"
        os.ftruncate(fd, 0)
        os.pwrite(fd, b"7 8 9", 0)  # the old format: just the stamp
        assert read_stamp(fd) == "7 8 9"


def test_limits_are_defined_once(env: Env) -> None:
    """The input models, the operations and the tool descriptions state the same numbers."""
    from server.mcp.tools.write_tools import AppendInput, CreateInput, InsertAtInput
    from server.writes.limits import MAX_CREATE_BYTES, MAX_INSERT_BYTES, MAX_SEPARATOR_CHARS, kb

    nid = env.note("n.md", "start\n")
    ws = svc(env)
    at_limit = "é" * (MAX_INSERT_BYTES // 2)  # two bytes each: exactly the limit
    ws.append(nid, at_limit)
    assert err(ws.append, nid, at_limit + "x").kind == "invalid-input"  # the model
    note, vault = load_note(env.conn, nid)
    ctx = WriteContext.for_person(env.conn)
    assert err(operations.append, ctx, vault, note, content=at_limit + "x").kind == "invalid-input"
    e = err(operations.append, ctx, vault, note, content="x", separator="-" * (MAX_SEPARATOR_CHARS + 1))
    assert e.kind == "invalid-input" and str(MAX_SEPARATOR_CHARS) in e.message
    assert err(ws.append, nid, "x", separator="-" * (MAX_SEPARATOR_CHARS + 1)).kind == "invalid-input"
    big = "y" * (MAX_CREATE_BYTES + 1)
    assert err(ws.create, "Big", big).kind == "invalid-input"
    assert err(operations.create, ctx, env.vault, title="Big", content=big).kind == "invalid-input"
    ws.create("Exactly", "y" * MAX_CREATE_BYTES)
    assert kb(MAX_CREATE_BYTES) in (CreateInput.model_fields["content"].description or "")
    for model in (AppendInput, InsertAtInput):
        assert kb(MAX_INSERT_BYTES) in (model.model_fields["content"].description or "")
    assert len(list_invocations(env.conn, limit=100)) == 5  # every guarded call recorded, none twice


def test_a_vault_folder_that_is_gone_is_not_found_and_nothing_is_written(env: Env) -> None:
    """The vault was moved or unmounted under a running session: a typed answer, never a traceback, and no
    folder made in its old place."""
    nid = env.note("n.md", "# N\n")
    moved = env.root.with_name("moved-away")
    env.root.rename(moved)
    ws = svc(env)
    assert err(ws.append, nid, "more").kind == "not-found"
    made = err(ws.create, "New", "text")
    assert made.kind == "not-found", made.message
    assert not env.root.exists() and (moved / "n.md").read_text() == "# N\n"
