"""The first minutes of a new user: ``kms doctor``'s report, and CLI conventions (``--version``, refused
options, exit codes, broken pipes, settings comments, clear messages). In process where a runner can show
it; a subprocess only for signals and pipes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import apsw
from support.cli import kms, said

from server.activity.provenance import record
from server.config import settings as st

ROOT = Path(__file__).resolve().parents[2]


def test_doctor_reports_agent_writes_allowlist_coverage_and_the_filesystem_warning(indexed: apsw.Connection,
                                                                                 tmp_path: Path) -> None:
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
