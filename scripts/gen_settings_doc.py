"""Write docs/settings.md from the settings schema (``--check``: fail if stale).

Usage: python scripts/gen_settings_doc.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from server.config.docs import settings_markdown  # noqa: E402

DOC = ROOT / "docs" / "settings.md"


def main(argv: list[str]) -> int:
    text = settings_markdown()
    if "--check" in argv:
        if not DOC.exists() or DOC.read_text() != text:
            stale = DOC.relative_to(ROOT)
            print(f"{stale} is out of date; run: python scripts/gen_settings_doc.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
