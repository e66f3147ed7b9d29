"""kms_recall's memory (server.index.recall_memory): decisions from session notes and ``type: decision`` notes
first, then session notes, then the other notes as without them; the note's text as it stands now, hidden notes
never, the session's project first, and session notes never crowding out the other notes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import apsw
from support.recall_vault import build
from support.vaults import write

from server.activity.session_note import SessionFacts, render
from server.index.indexer import index_vault
from server.index.recall import MEMORY_SHARE, recall
from server.index.recall_memory import decision_lines, open_steps
from server.vault.registry import get_vault

TOPIC = "login token refresh failing"
T0 = time.mktime((2026, 11, 20, 9, 30, 0, 0, 0, 0)) - time.timezone


def _session_note(root: Path, sid: str, *, project: str, started: float, decisions: list[str], folder: str) -> None:
    """A session note as kms renders it (no kms record of the session: its frontmatter says whose it is)."""
    facts = SessionFacts(sid, project=project, started_at=started, captures={"decision": decisions})
    facts.searches = [{"tool": "kms_search", "query": "token refresh"}]
    write(root / folder / f"Session {sid}.md", render(facts))


def _kinds(data: dict) -> list[str]:
    return [i["kind"] for i in data["items"]]


def test_decision_lines_are_the_list_items_of_the_section() -> None:
    text = "- Retry twice\n  then fail loudly\n* [x] Keep 30-day tokens\n\nplain text\n+ Ship Friday"
    assert decision_lines(text) == ["Retry twice then fail loudly", "Keep 30-day tokens plain text", "Ship Friday"]
    assert decision_lines("no list here") == []


def test_open_steps_are_the_unchecked_items_of_the_next_steps_section() -> None:
    body = (
        "# S\n\n## Decisions\n\n- [ ] not a step\n\n## Next steps\n\n- [ ] Write the test\n- [x] Ship it\n"
        "- plain item\n### Sub\n- [ ] A sub step\n\n## Findings\n\n- [ ] not a step either\n"
    )
    assert open_steps(body) == ["Write the test", "A sub step"]
    assert open_steps("# S\n\nno steps\n") == []


def test_decisions_then_notes_then_sessions_this_project_first(conn: apsw.Connection, tmp_path: Path) -> None:
    build(conn, tmp_path)
    root = tmp_path / "v"
    _session_note(
        root,
        "s-other",
        project="/code/other",
        started=T0 + 3600,
        decisions=["Token refresh keeps 30-day refresh tokens", "Beans go in the raised bed"],
        folder="kms-sessions",
    )
    _session_note(
        root,
        "s-app",
        project="/code/app",
        started=T0,
        decisions=["Login token refresh retries twice, then fails loudly"],
        folder="kms-sessions",
    )
    write(
        root / "adr" / "ADR 7.md",
        "---\ntype: decision\ndate: 2026-10-01\n---\n# ADR 7\n\n## Decision\n\nToken refresh happens on the "
        "server, never in the login page.\n",
    )
    write(root / ".kmsignore", "hidden-sessions/\n")
    _session_note(
        root,
        "s-hidden",
        project="/code/app",
        started=T0 + 7200,
        decisions=["Zqxhidden login token refresh decision"],
        folder="hidden-sessions",
    )
    index_vault(conn, get_vault(conn, "v"))
    v = get_vault(conn, "v").id  # the other vault shares the words

    data = recall(conn, TOPIC, 4000, v, project="/code/app")
    kinds = _kinds(data)
    assert kinds[: kinds.count("decision")] == ["decision"] * 3
    # then the notes on the topic, then the sessions that only touched it (they ranked above the real note)
    between = kinds[3 : len(kinds) - kinds.count("session")]
    assert between and set(between) <= {"match", "section", "linked"} and kinds[-2:] == ["session", "session"]
    first, second, third = data["items"][:3]
    assert first["text"] == "Login token refresh retries twice, then fails loudly"
    assert (first["session"], first["project"], first["thisProject"]) == ("s-app", "/code/app", True)
    assert first["date"] == "2026-11-20T09:30:00Z" and first["readMore"]["section"] == "Decisions"
    assert {second["text"], third["text"]} == {
        "Token refresh keeps 30-day refresh tokens",
        "Token refresh happens on the server, never in the login page.",
    }
    assert second["thisProject"] is third["thisProject"] is False
    adr = next(i for i in data["items"] if i["title"] == "ADR 7")
    assert adr["date"] == "2026-10-01" and adr["session"] is None and "type: decision" in adr["why"]
    assert "Beans" not in json.dumps(data)  # a decision of that session, not about the topic
    sessions = [i for i in data["items"] if i["kind"] == "session"]
    assert [s["session"] for s in sessions] == ["s-app", "s-other"]  # this project's first
    assert all(s["heading"] != "Decisions" for s in sessions)
    notes = [i for i in data["items"] if i["kind"] in ("match", "section", "linked")]
    remembered = [i for i in data["items"] if i["kind"] in ("decision", "session")]
    assert notes and not {i["path"] for i in notes} & {i["path"] for i in remembered}
    assert "zqx" not in json.dumps(data).lower()  # the hidden session note, the private note, the other vault
    decided = sum(i["tokenEstimate"] for i in data["items"][:3])
    assert decided <= 4000 * MEMORY_SHARE and data["usedTokens"] <= 4000

    only = recall(conn, TOPIC, 4000, v, project="/code/app", kind="decision")
    assert _kinds(only) == ["decision"] * 3 and only["items"][0]["session"] == "s-app"
    assert _kinds(recall(conn, TOPIC, 4000, v, kind="session")) == ["session", "session"]
    plain = recall(conn, TOPIC, 4000, v, kind="note")
    assert plain["items"] == notes  # the other notes, the same with or without the others before them
    broken = recall(conn, 'login "token refresh', 4000, v, kind="decision")  # FTS5 syntax that does not parse
    assert [i["text"] for i in broken["items"]] == [i["text"] for i in only["items"]]
    theirs = recall(conn, TOPIC, 4000, v, project="/code/other", kind="decision")["items"]
    assert theirs[0]["session"] == "s-other" and theirs[0]["thisProject"] is True  # before a better match
    # no project: no session is this project's; the most recent first among equals
    anyone = recall(conn, TOPIC, 4000, v, kind="decision")
    assert all(i["thisProject"] is False for i in anyone["items"])

    # the person's edit is what recall sees; a session note moved into a hidden folder never surfaces
    path = root / "kms-sessions" / "Session s-app.md"
    path.write_text(path.read_text().replace("retries twice", "retries three times"))
    index_vault(conn, get_vault(conn, "v"))
    assert recall(conn, TOPIC, 4000, v, kind="decision")["items"][0]["text"].endswith("three times, then fails loudly")
    path.rename(root / "hidden-sessions" / "Session s-app.md")
    index_vault(conn, get_vault(conn, "v"))
    gone = json.dumps(recall(conn, TOPIC, 4000, v, project="/code/app"))
    assert "s-app" not in gone and "retries" not in gone


def test_many_session_notes_do_not_crowd_out_the_other_notes(conn: apsw.Connection, tmp_path: Path) -> None:
    build(conn, tmp_path)
    before = recall(conn, TOPIC, 4000)
    root = tmp_path / "v"
    for n in range(60):  # sessions that searched the topic, each saying it many times
        facts = SessionFacts(f"s{n}", project="/code/app", started_at=T0 + n)
        facts.searches = [{"tool": "kms_search", "query": f"login token refresh failing {k}"} for k in range(8)]
        facts.captures = {"finding": ["login token refresh failing again"] * 3}
        write(root / "kms-sessions" / f"Session s{n}.md", render(facts))
    index_vault(conn, get_vault(conn, "v"))
    after = recall(conn, TOPIC, 4000, kind="note")
    assert [(i["noteId"], i["heading"], i["kind"]) for i in after["items"]] == [
        (i["noteId"], i["heading"], i["kind"]) for i in before["items"]
    ]
    mixed = recall(conn, TOPIC, 4000)
    assert _kinds(mixed).count("session") == 4 and "decision" not in _kinds(mixed)
    assert mixed["usedTokens"] <= 4000


def test_a_decision_said_in_other_words_is_found_by_meaning(conn: apsw.Connection, tmp_path: Path, embedder) -> None:
    from server.index.embed import embed_pending
    from server.index.semantic import SemanticIndex

    build(conn, tmp_path)
    root = tmp_path / "v"
    _session_note(
        root,
        "s-app",
        project="/code/app",
        started=T0,
        decisions=[
            "Session expiry follows the server clock; devices with a skewed clock are resynced before a token renewal",
            "Invoices are emailed on the first Monday",
        ],
        folder="kms-sessions",
    )
    index_vault(conn, get_vault(conn, "v"))
    embed_pending(conn, embedder)
    v = get_vault(conn, "v").id
    topic = "why do users get logged out when the computer time is off"  # no word of the decision
    data = recall(conn, topic, 4000, v, SemanticIndex(embedder), project="/code/app")
    assert data["mode"] == "hybrid"
    first = data["items"][0]
    assert first["kind"] == "decision" and first["text"].startswith("Session expiry follows the server clock")
    assert "Invoices" not in json.dumps(data)  # the same section, another subject
    keyword = recall(conn, topic, 4000, v, project="/code/app")
    assert "decision" not in _kinds(keyword)  # without the model, no word in common: not found
