"""A note's frontmatter is untrusted input for the property editor too (ruamel.yaml 0.19, PyYAML): an alias
bomb is refused at once, not walked for hours (docs/dependencies.md, issue 37's audit)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
)


def test_an_alias_bomb_in_a_note_is_refused_by_the_property_editor(tmp_path: Path) -> None:
    """Run in a child with a deadline: before the bound, the edit's checks expanded 9^9 values (hours)."""
    note = tmp_path / "bomb.md"
    text = f"---\n{BOMB}\n---\nbody\n"
    note.write_text(text, encoding="utf-8")
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from server.errors import KmsError\n"
        "from server.vault.frontmatter import apply_props\n"
        "try:\n"
        "    apply_props(Path(sys.argv[1]).read_text(encoding='utf-8'), {'status': 'done'}, [])\n"
        "except KmsError as e:\n"
        "    print(e.kind, e.message)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(note)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "PYTHONFAULTHANDLER": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("invalid-input the note's frontmatter: aliases expand to more than"), done.stdout
    assert note.read_text(encoding="utf-8") == text


def test_ordinary_aliases_are_still_edited() -> None:
    from server.vault.frontmatter import apply_props

    edit = apply_props("---\na: &x [1, 2]\nb: *x\n---\nbody\n", {"status": "done"}, [])
    assert edit.new_text == "---\na: &x [1, 2]\nb: *x\nstatus: done\n---\nbody\n"
