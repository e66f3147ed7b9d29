"""Write docs/cli.md from the CLI itself (``--check``: fail if stale).

Usage: python scripts/gen_cli_doc.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from kmscli.cli_doc import cli_markdown  # noqa: E402

DOC = ROOT / "docs" / "cli.md"


def main(argv: list[str]) -> int:
    text = cli_markdown()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is out of date; run: python scripts/gen_cli_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
