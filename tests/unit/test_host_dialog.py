"""What the host's approval dialog shows and how its answer reads (issue 27): pure functions, no server."""

from __future__ import annotations

import mcp_types as types

from server.mcp.host_approval import HostAnswer, answer_of, asks, form_capable
from server.writes.staging import describe, staged_file


def test_the_dialog_names_each_visible_note_counts_a_hidden_one_and_cuts_the_diff() -> None:
    long_before = "".join(f"line {i}\n" for i in range(40)).encode()
    long_after = "".join(f"LINE {i}\n" for i in range(40)).encode()
    files = [
        staged_file("work", "Plan.md", long_before, long_after),
        staged_file("work", "Old.md", b"x\n", b"x\n", new_path="New.md"),
        staged_file("work", "Diary/secret.md", b"dear diary\n", b"dear diary\nmore\n", hidden=True),
        staged_file("work", "Fresh.md", None, b"# Fresh\n"),
    ]
    text = describe("kms_rename", files, diff_lines=5)
    assert text.startswith("kms: kms_rename wants to change 4 notes (+42 -40)")
    assert "  work:Plan.md (+40 -40)" in text and "  work:Old.md -> New.md (+0 -0)" in text
    assert "  new work:Fresh.md (+1 -0)" in text
    assert "a note you keep hidden from agents (+1 -0)" in text
    assert "secret" not in text and "dear diary" not in text and "+more" not in text  # never named or shown
    body = text.split("\n\n", 1)[1].splitlines()
    assert len(body) == 6 and body[-1].startswith("… ") and "more diff lines" in body[-1]


def test_the_answer_is_a_decision_only_when_it_says_one() -> None:
    form = types.ElicitResult
    assert answer_of(form(action="accept", content={"decision": "apply"})) == HostAnswer("apply")
    assert answer_of(form(action="accept", content={"decision": "reject", "reason": " no "})) == HostAnswer(
        "reject", "no"
    )
    assert answer_of(form(action="decline")) == HostAnswer("reject", "declined in the host")
    assert answer_of(form(action="cancel")) == HostAnswer("cancel")
    assert answer_of(form(action="accept", content={})) == HostAnswer("cancel")  # never taken as consent
    assert answer_of(form(action="accept", content={"decision": "yes please"})) == HostAnswer("cancel")
    assert answer_of(form(action="accept", content={"decision": "reject", "reason": "x" * 900})).reason == "x" * 500


def test_the_host_is_asked_only_when_it_declared_form_elicitation_and_the_channel_allows() -> None:
    caps = types.ClientCapabilities
    form = caps(elicitation=types.ElicitationCapability(form=types.FormElicitationCapability()))
    empty = caps(elicitation=types.ElicitationCapability())  # before the modes were named: form
    url_only = caps(elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability()))
    assert form_capable(form) and form_capable(empty)
    assert not form_capable(url_only) and not form_capable(caps()) and not form_capable(None)
    assert asks("both", form) and asks("host", form) and not asks("dashboard", form)
