"""``kms vault add`` on a Dendron workspace (issue 29): it says what it found (the workspace, its vaults,
the kms vault each one's ``dendron://`` links resolve into), added by its root or by its vault folders, and a
``dendron.yml`` it cannot read still lets the vault add, with a line saying why."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import kms, ok, said
from support.dialect_vaults import checkout
from support.vaults import write


def backlinks(note: str) -> list[str]:
    return sorted(f"{b['vault']}:{b['path']}" for b in json.loads(ok(kms("backlinks", note, "--json")).stdout))


def test_vault_add_by_the_workspace_root_says_it_holds_every_vault(tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    out = said(ok(kms("vault", "add", str(ws), "--name", "acme-notes")).stdout)
    assert f"Added vault acme-notes at {ws} (dendron)" in out
    assert f"Dendron workspace {ws} (added by its root), 2 vault(s):" in out
    assert "dendron://acme.handbook/ (main) -> this vault, folder main/" in out
    assert "dendron://acme.team/ (team/shared) -> this vault, folder team/shared/" in out
    assert "note:" not in out
    assert backlinks("acme-notes:team/shared/glossary.md") == [
        "acme-notes:main/root.md",
        "acme-notes:team/shared/glossary.terms.md",
    ]
    status = json.loads(ok(kms("status", "--json")).stdout)
    assert status["unresolvedLinks"] == 1  # dendron://acme.archive/: a vault the workspace does not have
    assert {t["tag"] for t in json.loads(ok(kms("tags", "--json")).stdout)} == {
        "role.bugcatcher",
        "role.docs",
        "team.lead",
    }


def test_vault_add_by_vault_folders_names_the_kms_vault_of_each(tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    first = said(ok(kms("vault", "add", str(ws / "main"), "--name", "hb")).stdout)
    assert f"Added vault hb at {ws / 'main'} (dendron)" in first
    assert f"Dendron workspace {ws} (added by a vault folder), 2 vault(s):" in first
    assert "dendron://acme.handbook/ (main) -> this vault" in first
    assert (
        f"dendron://acme.team/ (team/shared) -> no kms vault holds it yet (kms vault add {ws / 'team' / 'shared'})"
        in first
    )
    second = said(ok(kms("vault", "add", str(ws / "team" / "shared"), "--name", "shared-stuff")).stdout)
    assert "(dendron)" in second
    assert "dendron://acme.handbook/ (main) -> vault hb" in second
    assert "dendron://acme.team/ (team/shared) -> this vault" in second
    assert backlinks("hb:community.roles.md") == ["hb:root.md", "shared-stuff:glossary.md"]
    assert backlinks("shared-stuff:community.roles.md") == ["hb:community.roles.md", "shared-stuff:glossary.terms.md"]
    assert {t["tag"] for t in json.loads(ok(kms("tags", "--json")).stdout)} == {
        "role.bugcatcher",
        "role.docs",
        "team.lead",
    }


def test_a_dendron_yml_kms_cannot_read_still_adds_the_vault_with_a_clear_line(tmp_path: Path) -> None:
    ws = checkout("dendron-workspace", tmp_path / "ws")
    write(ws / "dendron.yml", "workspace:\n  vaults: [ {fsPath: main\n")
    result = ok(kms("vault", "add", str(ws / "main"), "--name", "hb"))
    out = said(result.stdout)
    assert "Traceback" not in result.stdout + result.stderr
    assert "Added vault hb" in out and "(obsidian)" in out
    assert f"note: {ws / 'dendron.yml'}: is not valid YAML" in out
    assert "dendron:// links it does not name resolve by kms vault name" in out
    ok(kms("vault", "remove", "hb"))
    write(ws / "dendron.yml", "version: 5\nworkspace:\n  dendronVersion: 0.1\n")
    out = said(ok(kms("vault", "add", str(ws), "--name", "whole")).stdout)
    assert f"Added vault whole at {ws} (dendron)" in out and "Dendron workspace" not in out
    assert f"note: {ws / 'dendron.yml'}: lists no vaults (workspace.vaults)" in out
    assert {t["tag"] for t in json.loads(ok(kms("tags", "--json")).stdout)} >= {"role.bugcatcher", "team.lead"}
