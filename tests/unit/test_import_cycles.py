"""No runtime import cycle between the modules of server/, kmscli/ and tui/.

Two modules that import each other (one of them inside a function, so Python does not fail at
start) have no order a reader can follow and break as soon as the lazy import moves up. Every
import that runs counts, at module level or inside a function; ``if TYPE_CHECKING:`` imports
never run and do not. Read from the source (``ast``), nothing imported.
"""

from __future__ import annotations

from pathlib import Path

from support.modules import REPO, imports, project_modules


def import_cycles(root: Path = REPO) -> list[list[str]]:
    """Each group of modules that import one another (directly or round a loop), with its edges."""
    modules = project_modules(root)
    graph = {m: {imp.target: imp for imp in imports(m, modules) if imp.target != m} for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group: list[str] = []
            while not group or group[-1] != v:
                group.append(stack.pop())
                on_stack.discard(group[-1])
            if len(group) > 1:
                members = set(group)
                cycles.append(
                    sorted(
                        f"{a}:{imp.line} imports {b}{' (in a function)' if imp.lazy else ''}"
                        for a in group
                        for b, imp in graph[a].items()
                        if b in members
                    )
                )

    for module in modules:
        if module not in index:
            visit(module)
    return cycles


def test_no_runtime_import_cycle() -> None:
    cycles = import_cycles()
    assert not cycles, "modules that import each other; move the shared piece so imports go one way:\n" + "\n".join(
        "  " + "; ".join(c) for c in cycles
    )


def test_the_check_sees_a_lazy_cycle_and_skips_type_checking(tmp_path: Path) -> None:
    """The shape ``store/db.py`` and ``store/health.py`` had: a module-level import one way and one
    inside a function back; an import only for the type checker is no cycle."""
    for package in ("server/store", "kmscli", "tui"):
        (tmp_path / package).mkdir(parents=True)
    for init in ("server", "server/store", "kmscli", "tui"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "server/store/db.py").write_text("from server.store.health import UNUSABLE\n")
    (tmp_path / "server/store/health.py").write_text(
        "UNUSABLE = ()\n\ndef check():\n    from server.store.db import connect\n"
    )
    (tmp_path / "server/store/locks.py").write_text(
        "from typing import TYPE_CHECKING\nfrom . import db\nif TYPE_CHECKING:\n    from . import locks2\n"
    )
    (tmp_path / "server/store/locks2.py").write_text("from server.store import locks\n")
    assert import_cycles(tmp_path) == [
        [
            "server.store.db:1 imports server.store.health",
            "server.store.health:4 imports server.store.db (in a function)",
        ]
    ]
