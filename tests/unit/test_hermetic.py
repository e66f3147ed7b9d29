"""The test command builds its own environment: a caller's ``XDG_*`` variables and HOME never reach a
test (a newcomer's shell often sets ``XDG_CONFIG_HOME``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_no_test_sees_the_callers_xdg_or_home(tmp_path_factory: pytest.TempPathFactory) -> None:
    assert [v for v in os.environ if v.startswith("XDG_")] == []
    home = Path(os.environ["HOME"])
    assert home.name == "home" and home.parent.parent == tmp_path_factory.getbasetemp()
    own = {"KMS_DB_PATH", "KMS_CONFIG", "KMS_SERVICE_PORT", "KMS_EMBED_DOWNLOAD", "KMS_SERVICE_USE"}
    assert {v for v in os.environ if v.startswith("KMS_")} == own  # no other KMS_* of the caller's
    assert int(os.environ["KMS_SERVICE_PORT"]) != 8765  # never the person's running service


def test_host_config_paths_pass_with_the_xdg_variables_set(tmp_path: Path) -> None:
    """The tests whose paths follow ``XDG_CONFIG_HOME`` (host config files), run as a caller would."""
    xdg = {f"XDG_{name}_HOME": str(tmp_path / "caller" / name.lower()) for name in ("CONFIG", "DATA", "STATE", "CACHE")}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/cli/test_hosts.py",
            "-k",
            "document_on_stdout",
        ],
        cwd=ROOT,
        env={**os.environ, **xdg},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert not (tmp_path / "caller").exists()  # nothing was written where the caller's XDG points
