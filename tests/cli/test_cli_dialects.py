"""The person's side of dialects and names across vaults (issue 13): detection on `kms vault add`,
`--dialect`, `kms vault set NAME dialect=...`, the dialect and ambiguous links in `kms vault list` and
`kms status`, and `vault:path` names in `kms show` / `kms hide`."""

from __future__ import annotations

import json
from pathlib import Path

from support.cli import kms, ok, refused, said
from support.dialect_vaults import checkout
from support.vaults import write


def test_vault_add_detects_the_dialect_and_list_and_status_show_it(tmp_path: Path) -> None:
    out = said(ok(kms("vault", "add", str(checkout("dendron", tmp_path / "dendron")))).stdout)
    assert "Added vault dendron" in out and "(dendron)" in out
    ok(kms("vault", "add", str(checkout("obsidian", tmp_path / "plain")), "--name", "plain"))
    ok(kms("vault", "add", str(checkout("logseq", tmp_path / "pages")), "--dialect", "Logseq", "--no-index"))
    listed = {v["name"]: v["dialect"] for v in json.loads(ok(kms("vault", "list", "--json")).stdout)}
    assert listed == {"dendron": "dendron", "plain": "obsidian", "pages": "logseq"}
    assert "logseq" in said(ok(kms("vault", "list")).stdout)
    shown = said(ok(kms("show", "dendron:dendron.topic.lookup.md")).stdout)
    assert shown.startswith("Lookup dendron:dendron.topic.lookup.md") and "parent: Topic (dendron.topic.md)" in shown
    data = json.loads(ok(kms("status", "--json")).stdout)
    assert {v["name"]: v["dialect"] for v in data["vaults"]} == listed
    assert data["attachmentLinks"] == 3 and data["unresolvedLinks"] == 3  # dendron's cross-vault link too
    assert data["ambiguousLinks"] == 2 and data["ambiguous"][0]["candidates"] == [
        "Archive/2023/Meeting.md",
        "Projects/Meeting.md",
    ]
    text = said(ok(kms("status")).stdout)
    assert "vault dendron (dendron)" in text and "2 ambiguous" in text
    assert "ambiguous plain: [[meeting]] (2 links) could be Archive/2023/Meeting.md, Projects/Meeting.md" in text


def test_an_unknown_dialect_is_refused_and_nothing_registered(tmp_path: Path) -> None:
    result = refused(kms("vault", "add", str(tmp_path), "--dialect", "roam"))
    assert "unknown dialect 'roam'" in said(result.stderr + result.stdout)
    assert json.loads(ok(kms("vault", "list", "--json")).stdout) == []


def test_vault_set_dialect_reads_the_notes_again(tmp_path: Path) -> None:
    ok(kms("vault", "add", str(checkout("dendron", tmp_path / "d")), "--name", "d", "--dialect", "obsidian"))
    assert {t["tag"] for t in json.loads(ok(kms("tags", "--json")).stdout)} == {"role"}
    out = said(ok(kms("vault", "set", "d", "dialect=dendron")).stdout)
    assert "now dendron" in out
    assert {t["tag"] for t in json.loads(ok(kms("tags", "--json")).stdout)} == {"role.bugcatcher", "role.docs"}
    assert "dendron already" in said(ok(kms("vault", "set", "d", "dialect=dendron")).stdout)
    for bad in ("dialect=roam", "colour=red", "dendron"):
        refused(kms("vault", "set", "d", bad))
    refused(kms("vault", "set", "nope", "dialect=foam"))


def test_hide_refuses_a_name_two_vaults_share_and_takes_vault_path(tmp_path: Path) -> None:
    for name in ("a", "b"):
        write(tmp_path / name / "Shared.md", f"# Shared in {name}\n\nthe word lighthouse\n")
        ok(kms("vault", "add", str(tmp_path / name)))
    result = refused(kms("hide", "Shared"))
    assert "several vaults" in said(result.stderr + result.stdout) and "a:Shared.md, b:Shared.md" in said(
        result.stderr + result.stdout
    )
    assert json.loads(ok(kms("hidden", "--json")).stdout) == []
    ok(kms("hide", "b:Shared.md"))
    [hidden] = json.loads(ok(kms("hidden", "--json")).stdout)
    assert (hidden["vault"], hidden["path"]) == ("b", "Shared.md")
    shown = json.loads(ok(kms("show", "a:Shared", "--json")).stdout)
    assert (shown["vault"], shown["path"]) == ("a", "Shared.md")
