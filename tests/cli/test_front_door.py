"""The first minutes of a new user: ``kms doctor``'s report, and CLI conventions (``--version``, refused
options, exit codes, broken pipes, settings comments, clear messages). In process where a runner can show
it; a subprocess only for signals and pipes."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import apsw
import pytest
from support.cli import interruptible, kms, ok, said
from support.sql import value

from server.activity.provenance import record
from server.config import settings as st

ROOT = Path(__file__).resolve().parents[2]


def test_doctor_reports_agent_writes_allowlist_coverage_and_the_filesystem_warning(
    indexed: apsw.Connection, tmp_path: Path
) -> None:
    cfg = Path(os.environ["KMS_CONFIG"])
    st.set_value("agent.write", "on", path=cfg, env={}, has_vault=True)
    st.set_value("write.allowlist", "drafts", path=cfg, env={}, has_vault=True)
    record(indexed, tool="kms_append", session_id="s1", status="success")
    record(indexed, tool="kms_create", session_id="s1", status="folder-denied", error="folder-denied")
    report = json.loads(kms("doctor", "--json").stdout)
    agent = report["agent"]
    assert agent["write"] is True and agent["allowlist"] == ["drafts"] and agent["perMinute"] == 10
    assert agent["writes"]["calls"] == 2 and agent["writes"]["succeeded"] == 1 and agent["writes"]["sessions"] == 1
    assert report["embeddings"]["notes"] > 0 and report["embeddings"]["pendingNotes"] == report["embeddings"]["notes"]
    assert report["model"]["download"] is False and report["warnings"] == []
    text = said(kms("doctor").stdout)
    assert "allowlist drafts" in text and "2 calls (1 succeeded, 1 refused)" in text
    assert "embed.download): off" in text and "pending: kms embed" in text

    st.set_value("servers.filesystem.enabled", "on", path=cfg, env={}, has_vault=True)
    report = json.loads(kms("doctor", "--json").stdout)
    assert len(report["warnings"]) == 1 and "around hidden notes" in report["warnings"][0]
    assert "servers.filesystem is on" in said(kms("doctor").stdout)


def test_version() -> None:
    assert re.fullmatch(r"kms \d+\.\d+\.\d+\S*\n", ok(kms("--version")).stdout)


def test_help_shows_no_bool_metavar_after_flags() -> None:
    for args in ([], ["search"], ["claude"], ["mcp-config"], ["doctor"]):
        out = ok(kms(*args, "--help")).stdout
        assert "<bool>" not in out and "--" in out, args


def test_kms_mcp_refuses_an_unknown_argument(db_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "kmscli", "mcp", "--bogus"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
        cwd=ROOT,
    )
    assert proc.returncode == 2 and "unknown argument '--bogus'" in proc.stderr and proc.stdout == ""


CLOSED_PIPE_COMMANDS = (
    ["--help"],
    ["doctor", "--json"],
    ["status", "--json"],
    ["search", "auth", "--json"],
    ["config", "list"],
    ["log", "--json"],
    ["vault", "list"],
)


@pytest.mark.parametrize("read_first", [0, 1], ids=["closed-at-once", "closed-after-one-byte"])
def test_a_closed_pipe_exits_zero_quietly(indexed: apsw.Connection, read_first: int) -> None:
    """Without ``PYTHONUNBUFFERED`` (users do not set it) the output sits in a buffer until exit."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    verdict = {
        tuple(args): subprocess.run(
            [sys.executable, "-m", "kmscli", *args], stdout=subprocess.DEVNULL, cwd=ROOT, env=env, timeout=60
        ).returncode
        for args in CLOSED_PIPE_COMMANDS
    }  # doctor finds no `claude` here: 1
    for _ in range(3):
        for args in CLOSED_PIPE_COMMANDS:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kmscli", *args],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=ROOT,
                env=env,
            )
            assert proc.stdout is not None and proc.stderr is not None
            proc.stdout.read(read_first)
            proc.stdout.close()  # like `| head -c1` that has read all it wanted, or `| true`
            err = proc.stderr.read()
            # 0 once the reader left; the command's own verdict when it had written everything before
            assert proc.wait(timeout=60) in (0, verdict[tuple(args)]) and err == b"", (args, err)


def test_ctrl_c_on_kms_embed_exits_130(indexed: apsw.Connection, vault_dir: Path, embed_model_dir: Path) -> None:
    from server.index.indexer import index_all

    for i in range(200):  # several batches of 32 notes: a wide window between the first commit and the last
        (vault_dir / f"extra {i}.md").write_text(f"# Extra {i}\n\nsome words about topic {i}\n")
    index_all(indexed)
    cfg = Path(os.environ["KMS_CONFIG"])
    st.set_value("embed.model_dir", str(embed_model_dir), path=cfg, env={}, has_vault=True)
    proc = subprocess.Popen(
        [sys.executable, "-m", "kmscli", "embed"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=interruptible,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # interrupt once embedding is under way (a committed batch)
        if value(indexed, "SELECT count(*) FROM note_embed_state"):
            break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err
    assert "run `kms embed` again to resume" in said(err) and "Traceback" not in err
    assert "kept the" in err and "notes embedded so far" in said(err)


def test_config_set_keeps_the_persons_comments(tmp_path: Path) -> None:
    cfg = Path(os.environ["KMS_CONFIG"])
    cfg.write_text("# my kms settings\n[agent]\nwrite = false  # not yet\n\n# limits\n[write]\nper_minute = 5\n")
    ok(kms("config", "set", "agent.write", "on"))
    ok(kms("config", "set", "write.allowlist", "drafts"))
    text = cfg.read_text()
    assert "# my kms settings" in text and "# not yet" in text and "# limits" in text
    assert "write = true" in text and "per_minute = 5" in text and 'allowlist = ["drafts"]' in text
    ok(kms("config", "unset", "write.per_minute"))
    assert "# my kms settings" in cfg.read_text() and "per_minute" not in cfg.read_text()


def test_config_set_of_a_missing_model_dir_warns(tmp_path: Path) -> None:
    result = ok(kms("config", "set", "embed.model_dir", str(tmp_path / "nonexistent")))
    assert "is not a folder" in said(result.stderr + result.stdout)
    assert "not a folder" not in said(
        (r := ok(kms("config", "set", "embed.model_dir", str(tmp_path)))).stderr + r.stdout
    )


def test_config_edit_reports_a_failing_editor(tmp_path: Path) -> None:
    result = kms("config", "edit", EDITOR="false", VISUAL="")
    assert result.exit_code == 1 and "exited with 1" in said(result.stderr) and "not checked" in said(result.stderr)
    missing = kms("config", "edit", EDITOR=str(tmp_path / "no-such-editor"), VISUAL="")
    assert missing.exit_code == 1 and "could not start the editor" in said(missing.stderr)


def test_log_for_an_unknown_session_says_so(indexed: apsw.Connection) -> None:
    record(indexed, tool="kms_append", session_id="s1", status="success")
    out = said(ok(kms("log", "--session", "nosuch")).stdout)
    assert "No agent writes recorded for session 'nosuch'" in out and "yet" not in out
    assert "s1" in ok(kms("log")).stdout


def test_hide_and_unhide_say_when_nothing_changed(indexed: apsw.Connection) -> None:
    assert "Already visible" in ok(kms("unhide", "Home")).stdout
    assert ok(kms("hide", "Home")).stdout.startswith("Hidden:")
    stamp = value(indexed, "SELECT hidden_at FROM notes WHERE title = 'Home'")
    assert ok(kms("hide", "Home")).stdout.startswith("Already hidden")
    assert value(indexed, "SELECT hidden_at FROM notes WHERE title = 'Home'") == stamp
    assert ok(kms("unhide", "Home")).stdout.startswith("Visible again")


def test_index_full_reports_nothing_changed_when_nothing_changed(indexed: apsw.Connection) -> None:
    out = said(ok(kms("index", "--full")).stdout)
    assert "+0 new, ~0 changed" in out and "-0 removed" in out


def test_show_json_is_camel_case(indexed: apsw.Connection) -> None:
    data = json.loads(ok(kms("show", "Home", "--json")).stdout)
    assert "noteId" in data and "hiddenAt" in data and not [k for k in data if "_" in k]


def test_search_keeps_each_part_of_a_joined_result_in_score_order(tmp_path: Path, conn: apsw.Connection) -> None:
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    root = tmp_path / "scores"
    root.mkdir()
    (root / "both.md").write_text("# Both\n\n" + "filler words here. " * 60 + "zephyr and quokka once.\n")
    for i in range(3):
        (root / f"only{i}.md").write_text(f"# Zephyr {i}\n\nzephyr zephyr zephyr{' zephyr' * i}\n")
    for i in range(30):  # notes without either word, so both stay rare words
        (root / f"other{i}.md").write_text(f"# Other {i}\n\nnothing to see in note {i}\n")
    index_vault(conn, add_vault(conn, root, "scores"))
    data = json.loads(ok(kms("search", "zephyr quokka", "--json")).stdout)
    assert data["relaxed"] and data["allWords"] == 1 and data["hits"][0]["path"] == "both.md"
    assert max(h["score"] for h in data["hits"][1:]) > data["hits"][0]["score"], "the case the issue saw"
    lines = ok(kms("search", "zephyr quokka")).stdout.splitlines()
    divider = next(i for i, line in enumerate(lines) if "only some of the words" in line)
    scores = [float(m.group(1)) for line in lines if (m := re.search(r"· (\d+\.\d+)", line))]
    assert [ln for ln in lines[:divider] if "both.md" in ln] and len(scores) == 4
    assert scores[1:] == sorted(scores[1:], reverse=True)


def test_log_shows_every_refusal_in_one_voice_with_its_kind(indexed: apsw.Connection, db_path: Path) -> None:
    """A tier refusal read `✗ error` beside a folder refusal's `⊘ denied`: both are the person's settings
    saying no, now `⊘ refused (KIND)`, through the real tool runner."""
    from support.vaults import note_id

    from server.config.session_contract import SessionConfig
    from server.mcp.tools.dispatch import ToolRunner

    nid = note_id(indexed, "Home")
    for write_enabled, allowlist in ((False, ()), (True, ("drafts",))):
        config = SessionConfig.from_env(
            {"KMS_DB_PATH": str(db_path)}, write_enabled=write_enabled, allowlist=allowlist, session_id="s-voice"
        )
        runner = ToolRunner(config)
        try:
            _, is_error = runner.call("kms_append", {"noteId": nid, "content": "- more"})
        finally:
            runner.close()
        assert is_error
    out = said(ok(kms("log")).stdout)
    assert "⊘ refused (folder-denied)" in out and "⊘ refused (feature-disabled)" in out and "✗" not in out, out


def test_search_with_a_vault_lists_only_that_vaults_write_records(indexed: apsw.Connection, tmp_path: Path) -> None:
    """`kms search hello --vault big20k` listed the write records of every vault."""
    from server.vault.registry import add_vault

    other = tmp_path / "other"
    other.mkdir()
    add_vault(indexed, other, "other")
    for vault in ("sample", "other"):
        record(indexed, tool="kms_append", session_id="s1", status="success", vault=vault, input_summary="lighthouse")
    only = json.loads(ok(kms("search", "lighthouse", "--vault", "other", "--provenance", "--json")).stdout)
    assert [p["vault"] for p in only["provenance"]] == ["other"]
    both = json.loads(ok(kms("search", "lighthouse", "--provenance", "--json")).stdout)
    assert sorted(p["vault"] for p in both["provenance"]) == ["other", "sample"]


def test_help_groups_the_commands_vaults_first_each_summary_one_sentence_unbroken() -> None:
    """`kms --help` was one list of 36 commands with `vault`, a newcomer's first need, 31st, and docstring line
    breaks showing mid-sentence."""
    out = ok(kms("--help", COLUMNS="200")).stdout
    panels = [p for p in ("Vaults", "Agents", "Review", "Service", "Settings") if f"─ {p} " in out]
    assert panels == ["Vaults", "Agents", "Review", "Service", "Settings"]
    assert [out.index(f"─ {p} ") for p in panels] == sorted(out.index(f"─ {p} ") for p in panels)
    vaults = out[out.index("─ Vaults ") : out.index("─ Agents ")]
    assert "│ vault " in vaults and "│ search " in vaults
    status = next(line for line in out.splitlines() if "│ status " in line)
    assert "hidden notes' names only with --include-hidden" in status  # its whole first paragraph, one line
