"""A small linked vault for kms_recall: sections that match a topic, notes that only link to them, a
hidden note and a second vault that share the topic's words (so a broken filter would surface them)."""

from __future__ import annotations

from pathlib import Path

import apsw

from support.vaults import write

NOTES = {
    "Auth service.md": (
        "# Auth service\n\nThe service every app signs in through; owned by the platform team.\n\n"
        "## Token refresh\n\nThe login token refresh fails when the client clock drifts; retry with backoff "
        "and resync the clock. Refresh tokens live 30 days.\n\n"
        "## Deploy\n\nDeploy with helm from the release branch; canary first.\n\n"
        "See [[Incident 42]] and [[Runbook]].\n"
    ),
    "Incident 42.md": (
        "# Incident 42\n\nLogin outage: token refresh failures for two hours after a clock drift on the "
        "proxies.\n\n## Timeline\n\n09:10 alerts; 11:10 clocks resynced.\n\nService: [[Auth service]].\n"
    ),
    "ops/Runbook.md": "# Runbook\n\nGeneral on-call steps: page the owner, open a channel, write it down.\n",
    "Team notes.md": "# Team notes\n\nWe own [[Auth service]] and the billing jobs.\n",
    "Gardening.md": "# Gardening\n\nBeans, peas and tomatoes in raised beds.\n",
    "private/Secret login.md": (
        "---\nprivate: true\n---\n# Zqxsecret login\n\nzqxcanary login token refresh clock drift notes. "
        "[[Auth service]]\n"
    ),
}
OTHER = {"Other login.md": "# Zqxother login\n\nzqxother token refresh clock drift runbook.\n"}


def build(conn: apsw.Connection, tmp_path: Path) -> None:
    """Vault ``v`` (with a hidden note) and vault ``other``, indexed."""
    from server.index.indexer import index_vault
    from server.vault.registry import add_vault

    for name, notes in (("v", NOTES), ("other", OTHER)):
        root = tmp_path / name
        for rel, text in notes.items():
            write(root / rel, text)
        index_vault(conn, add_vault(conn, root, name))
    assert conn.execute("SELECT count(*) FROM notes WHERE hidden_at IS NOT NULL").fetchall() == [(1,)]
