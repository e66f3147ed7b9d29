"""Issue 37: each hook event of a ``kms claude`` session runs once. In a project where ``kms hooks install``
put kms's hooks, a launcher session (through a stand-in claude that runs every hook its settings name) used to
run both sets: two start briefs, the host's edit recorded under two sessions, two session notes. The session's
own set runs (it carries the session's contract and token); the installed one stands aside, and both
``kms claude`` and ``kms doctor`` say which set is active."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from support.launcher import hook_claude, kms, launcher_env, on_the_service, record

from server.store.db import connect


@pytest.fixture(params=["stdio", "service"])
def env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[dict[str, str]]:
    e = launcher_env(tmp_path)
    hook_claude(e)
    e["FAKE_CLAUDE_EDIT"] = str(tmp_path / "vault" / "a.md")
    if request.param == "service":  # the session's hooks are then HTTP hooks to the service, SessionStart aside
        with on_the_service(e):
            yield e
    else:
        yield e


def test_a_session_in_a_project_with_kms_hooks_installed_runs_each_hook_once(
    env: dict[str, str], tmp_path: Path
) -> None:
    project = tmp_path / "project"
    project.mkdir()
    installed = project / ".claude" / "settings.json"
    assert kms(env, "hooks", "install", "--file", str(installed), cwd=project).returncode == 0
    doctor = kms({**env, "COLUMNS": "1000"}, "doctor", cwd=project)
    assert f"kms's hooks in {installed} run in plain claude and stand aside" in " ".join(doctor.stdout.split())

    run = kms(env, "claude", "--", "-p", "hello", cwd=project)
    assert run.returncode == 0, run.stderr
    assert f"this session runs its own hooks; kms's hooks in {installed} stand aside" in " ".join(run.stderr.split())
    rec = record(env)
    ran = rec["hooks"]
    [own] = [a.removeprefix("--settings=") for a in rec["argv"] if a.startswith("--settings=")]
    assert {h["file"] for h in ran} == {str(installed), own}, "both sets were offered every event"
    assert all(h["status"] in (0, 200) for h in ran), ran
    briefs = [h for h in ran if h["event"] == "SessionStart" and "additionalContext" in h["answer"]]
    assert len(briefs) == 1, "one start brief"
    assert all(h["answer"] == "" for h in ran if h["file"] == str(installed)), "the installed hooks stood aside"

    conn = connect(env["KMS_DB_PATH"])
    try:
        [(launcher,)] = conn.execute("SELECT id FROM sessions WHERE kind = 'launcher'").fetchall()
        edits = conn.execute("SELECT session_id, path FROM session_files").fetchall()
        assert edits == [(launcher, "a.md")], "the host's edit is recorded once, under the launcher's session"
        notes = conn.execute("SELECT session_id FROM session_records WHERE note_id IS NOT NULL").fetchall()
        assert notes == [(launcher,)], "one session note"
        assert conn.execute("SELECT count(*) FROM sessions").fetchall() == [(1,)], "no second session"
    finally:
        conn.close()
    written = [p for p in (tmp_path / "vault").rglob("*.md") if p.name != "a.md"]
    assert len(written) == 1, [str(p) for p in written]
    assert rec["env"]["KMS_SESSION_HOOKS"] == launcher  # the mark the installed hooks stood aside for
