"""Count the product's deferred imports: an ``import`` inside a function (or a class body) rather than at a
module's top, in ``server/``, ``kmscli/`` and ``tui/``.

A deferred import hides a module's real dependencies and is paid for on a call instead of at start-up; the
house keeps at most ``CEILING`` per 1,000 lines, each at a named seam: the line says ``# deferred: <reason>``
(on it, or the comment line right above it). ``tests/unit/test_deferred_imports.py`` enforces both.

    python scripts/count_deferred_imports.py            # the figure, by package
    python scripts/count_deferred_imports.py --list     # every deferred import, and whether it is named
"""

from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("server", "kmscli", "tui")
CEILING = 3.0  # deferred imports per 1,000 lines, product-wide
MARK = "# deferred:"


@dataclass(frozen=True)
class Deferred:
    path: str
    line: int
    named: bool  # carries a "# deferred: reason" comment


def deferred_in(path: Path) -> list[Deferred]:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    found: list[Deferred] = []

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom) and nested:
                here = lines[child.lineno - 1]
                above = lines[child.lineno - 2].strip() if child.lineno >= 2 else ""
                named = MARK in here or above.startswith(MARK)
                found.append(Deferred(path.relative_to(REPO).as_posix(), child.lineno, named))
            inner = nested or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda)
            visit(child, inner)

    visit(ast.parse(text), False)
    return found


def product_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (REPO / pkg).rglob("*.py"))


def lines_of(paths: list[Path]) -> int:
    return sum(len(p.read_text(encoding="utf-8").splitlines()) for p in paths)


def count() -> tuple[list[Deferred], int]:
    files = product_files()
    return [d for p in files for d in deferred_in(p)], lines_of(files)


def main(argv: list[str]) -> int:
    found, total = count()
    for pkg in PACKAGES:
        mine = [d for d in found if d.path.startswith(pkg + "/")]
        pkg_lines = lines_of(sorted((REPO / pkg).rglob("*.py")))
        print(f"{pkg:8} {len(mine):4} deferred in {pkg_lines:6} lines  ({1000 * len(mine) / pkg_lines:.2f} per 1k)")
    print(f"{'all':8} {len(found):4} deferred in {total:6} lines  ({1000 * len(found) / total:.2f} per 1k)")
    if "--list" in argv:
        for d in found:
            print(f"{d.path}:{d.line}{'' if d.named else '  (no # deferred: reason)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
