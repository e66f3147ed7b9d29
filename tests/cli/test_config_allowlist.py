"""``kms config list`` says what each allowlist entry allows, and what upgrading an older file changed
(issue 29)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from support.cli import kms, ok, said


def test_config_list_says_what_each_entry_allows() -> None:
    ok(kms("config", "set", "write.allowlist", "drafts/*", "inbox"))
    out = said(ok(kms("config", "list")).stdout)
    assert "write.allowlist allows: drafts/*: the notes directly in drafts/" in out
    assert "inbox: inbox/ and every folder below it" in out
    settings = {s["key"]: s for s in json.loads(ok(kms("config", "list", "--json")).stdout)["settings"]}
    assert settings["write.allowlist"]["means"] == [
        "drafts/*: the notes directly in drafts/",
        "inbox: inbox/ and every folder below it",
    ]


def test_an_older_file_is_upgraded_and_config_list_says_how() -> None:
    cfg = Path(os.environ["KMS_CONFIG"])
    cfg.write_text('[write]\nallowlist = ["drafts/*"]\n')
    out = said(ok(kms("config", "list")).stdout)
    assert "upgraded: write.allowlist drafts/* -> drafts/*/*" in out
    assert "drafts/*/*: the notes directly in drafts/*/ (each * one folder name)" in out
    assert ok(kms("config", "get", "write.allowlist")).stdout.split() == ["drafts/*/*"]
    assert "upgraded: " not in ok(kms("config", "list")).stdout  # once


def test_an_allowlist_glob_with_an_unclosed_set_is_refused_and_nothing_is_saved() -> None:
    """`kms config set write.allowlist '[drafts'` was saved: fnmatch reads the lone '[' as a literal, so the
    entry allowed a folder named "[drafts" that nobody has, and every write was refused without a word."""
    from support.cli import refused

    out = said(refused(kms("config", "set", "write.allowlist", "[drafts"), 2).stderr)
    assert out.startswith("error (invalid-input):") and "no ']' closes" in out
    cfg = Path(os.environ["KMS_CONFIG"])
    assert not cfg.exists() or "write.allowlist" not in cfg.read_text()
