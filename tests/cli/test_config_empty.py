"""``kms config set KEY ''``: '' turns a text/path setting off where docs/settings.md says it does, and is a
one-line refusal where it does not (it raised a tomlkit traceback)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.cli import kms, ok, refused, said


@pytest.mark.parametrize("key", ["memory.folder", "privacy.frontmatter_key", "embed.model_dir"])
def test_empty_turns_the_setting_off_as_the_docs_say(key: str) -> None:
    assert f"{key} = " in ok(kms("config", "set", key, "")).stdout
    got = json.loads(ok(kms("config", "get", key, "--json")).stdout)
    assert got["value"] is None and got["source"] == "file"
    assert '= ""' in Path(os.environ["KMS_CONFIG"]).read_text()


def test_an_empty_capture_folder_is_refused_saying_how_to_turn_capture_off() -> None:
    result = refused(kms("config", "set", "capture.folder", ""), 2)
    assert "kms config set capture.enabled off" in said(result.stderr)
    assert not Path(os.environ["KMS_CONFIG"]).exists() or "capture" not in Path(os.environ["KMS_CONFIG"]).read_text()
