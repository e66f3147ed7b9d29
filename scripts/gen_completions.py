"""Write completions/kms.{bash,zsh,fish} from the Typer app (``--check``: fail if stale).

The scripts are Typer's own completion sources: each TAB runs ``kms`` with
``_KMS_COMPLETE=complete_<shell>``, so command, option and value candidates (setting
keys, server names) always come from the installed CLI. What can go stale here is the
script itself (program name, completion variable, Typer's template), which the test
``tests/cli/test_launcher.py::test_completions_current`` checks.

Usage: python scripts/gen_completions.py [--check]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

PROG = "kms"
COMPLETE_VAR = "_KMS_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


def completion_script(shell: str) -> str:
    """Typer's completion source for ``shell``, bound to the real ``kms`` app."""
    import typer
    from typer._click.shell_completion import get_completion_class
    from typer._completion_classes import completion_init

    from kmscli.main import app

    completion_init()
    cls = get_completion_class(shell)
    if cls is None:
        raise SystemExit(f"Typer has no completion class for {shell}")
    source = cls(typer.main.get_command(app), {}, PROG, COMPLETE_VAR).source()
    return source.strip() + "\n"  # as Typer's own --show-completion: #compdef must be line 1


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for shell in SHELLS:
        path = ROOT / "completions" / f"{PROG}.{shell}"
        text = completion_script(shell)
        current = path.read_text() if path.exists() else None
        if current == text:
            continue
        if check:
            stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
    if stale:
        print(f"out of date: {', '.join(stale)}; run: python scripts/gen_completions.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
