"""A test waits for the state it needs (``tests/support/waiting.py``: poll with a deadline), never a bare sleep
standing for "it is waiting now" (issue 43). A sleep inside a loop is a poll's pace; a sleep outside one must
be the thing under test (idling past a timer, a lease running out) and say so: ``# the wait is the test``."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
MARK = "the wait is the test"


def bare_sleeps(path: Path) -> list[int]:
    """Lines of ``path`` that call ``sleep`` outside any loop of their function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) == "sleep"):
            continue
        at: ast.AST = node
        while at in parents:
            at = parents[at]
            if isinstance(at, ast.While | ast.For | ast.AsyncFor | ast.FunctionDef | ast.AsyncFunctionDef):
                break
        if not isinstance(at, ast.While | ast.For | ast.AsyncFor):
            found.append(node.lineno)
    return found


def test_every_sleep_outside_a_loop_is_the_thing_under_test() -> None:
    unmarked = []
    for path in sorted(TESTS.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for line in bare_sleeps(path):
            if MARK not in lines[line - 1] and MARK not in lines[line - 2]:
                unmarked.append(f"{path.relative_to(TESTS)}:{line}: {lines[line - 1].strip()}")
    assert unmarked == [], "wait for the state instead (support/waiting.py), or say why the wait is the test"
