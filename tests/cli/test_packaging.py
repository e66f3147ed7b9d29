"""The built wheel, installed into a fresh virtualenv, works from an unrelated folder: ``kms --version``
and ``kms demo --headless`` (the packaged sample vault, a real ``kms mcp`` server).

Offline: the wheel is built without build isolation, and the fresh venv finds the dependencies through a
``.pth`` line naming this environment's site-packages (a path on ``sys.path``, so neither this checkout
nor its editable install is visible: kms itself can only come from the wheel)."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from email.parser import Parser
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(*cmd: str, **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(cmd), capture_output=True, text=True, timeout=120, **kw)


@pytest.mark.timeout(240)
def test_the_wheel_installs_and_runs_from_an_unrelated_folder(tmp_path: Path) -> None:
    built = run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "--no-build-isolation",
        "-q",
        "-w",
        str(tmp_path / "dist"),
        str(ROOT),
    )
    assert built.returncode == 0, built.stderr
    [wheel] = (tmp_path / "dist").glob("kms_notes-*.whl")
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        meta = Parser().parsestr(z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
    assert meta["Name"] == "kms-notes" and meta["License-Expression"] == "MIT"
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert meta["Author"] == "The kms maintainers" and len(meta.get_all("Classifier") or []) > 5
    assert any(n.startswith("kmscli/sample_vault/") and n.endswith(".md") for n in names)
    assert not any(n.startswith("tests/") for n in names)

    venv = tmp_path / "venv"
    assert run(sys.executable, "-m", "venv", "--without-pip", str(venv)).returncode == 0
    python = venv / "bin" / "python"
    installed = run(
        sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index", str(wheel)
    )
    assert installed.returncode == 0, installed.stderr
    site = run(str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])").stdout.strip()
    Path(site, "deps-from-test-env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KMS_", "PYTHON", "VIRTUAL_ENV"))}
    (tmp_path / "tmp").mkdir()
    env.update(
        HOME=str(tmp_path / "home"),
        TMPDIR=str(tmp_path / "tmp"),
        KMS_EMBED_DOWNLOAD="0",
        PATH=f"{venv / 'bin'}:{env['PATH']}",
    )
    kms = str(venv / "bin" / "kms")
    where = run(str(python), "-c", "import kmscli; print(kmscli.__file__)", cwd=elsewhere, env=env)
    assert where.stdout.startswith(site), where.stdout + where.stderr
    version = run(kms, "--version", cwd=elsewhere, env=env)
    assert version.returncode == 0 and version.stdout.strip() == "kms 0.1.0", version.stderr
    demo = run(kms, "demo", "--headless", cwd=elsewhere, env=env)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "rate" in demo.stdout.lower() and "Traceback" not in demo.stderr
    assert not list(elsewhere.iterdir()), "the demo works in its own temporary folder"
    assert not list((tmp_path / "tmp").glob("kms-demo-*")), "and removes it on exit"
