"""False positives of the planted-instructions detector (``server.vault.planted``) on real vaults.

A person's own notes should almost never be flagged: every flag on a write stages it for the person's
approval, and every flag on a note is a line in ``kms doctor``. This reads every note of the folders given
(by default the two shared real vaults, and the 10k-note bench vault when it exists), runs the detector on
each whole note (as ``kms doctor`` does) and on each paragraph (as a write of that paragraph would be),
and prints the counts, the rate and a sample of what was flagged, with the time per MB.

Usage: python bench/bench_planted.py [FOLDER ...] [--sample N]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from server.vault.planted import looks_like_instructions  # noqa: E402

SHARED = Path(os.environ.get("KMS_SHARED_VAULTS", "/work/shared/vaults"))
BENCH_VAULT = Path(__file__).resolve().parent / "out" / "vault-10000"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("folders", nargs="*", type=Path)
    parser.add_argument("--sample", type=int, default=10)
    args = parser.parse_args()
    folders = args.folders or [p for p in sorted(SHARED.iterdir()) if p.is_dir()] if SHARED.is_dir() else []
    if not args.folders and BENCH_VAULT.is_dir():
        folders.append(BENCH_VAULT)
    for folder in folders:
        notes = paragraphs = flagged_notes = flagged_paragraphs = size = 0
        sample: list[str] = []
        spent = 0.0
        for path in sorted(folder.rglob("*.md")):
            text = path.read_text(encoding="utf-8", errors="replace")
            notes += 1
            size += len(text.encode())
            started = time.perf_counter()
            reasons = looks_like_instructions(text)
            spent += time.perf_counter() - started
            if reasons:
                flagged_notes += 1
                if len(sample) < args.sample:
                    sample.append(f"  {path.relative_to(folder)}: {'; '.join(reasons)}")
            for para in (p for p in text.split("\n\n") if p.strip()):
                paragraphs += 1
                flagged_paragraphs += bool(looks_like_instructions(para))
        mb = size / 1e6
        print(
            f"{folder.name}: {flagged_notes}/{notes} notes flagged ({100 * flagged_notes / max(notes, 1):.2f} %), "
            f"{flagged_paragraphs}/{paragraphs} paragraphs ({100 * flagged_paragraphs / max(paragraphs, 1):.3f} %); "
            f"{mb:.1f} MB, {1000 * spent / max(mb, 1e-9):.1f} ms/MB"
        )
        print("\n".join(sample) or "  (none)")


if __name__ == "__main__":
    main()
