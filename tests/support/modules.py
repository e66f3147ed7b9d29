"""The project's modules read as source (``ast``, nothing imported): their names and the project
imports each one runs.

For the tests of how modules depend on each other: no module reaches into another's private names
(tests/unit/test_private_names.py), no runtime import cycle (tests/unit/test_import_cycles.py).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TypeGuard

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("server", "kmscli", "tui")


@dataclass(frozen=True)
class Import:
    """One project import a module runs: ``import target`` or ``from target import name``."""

    target: str  # the project module imported (the submodule for ``from package import submodule``)
    name: str | None  # the name taken from ``target``; None when the module itself is taken
    bound: str  # the local name the import binds
    means: str  # the dotted name that local name stands for (``import a.b`` binds ``a``, meaning ``a``)
    line: int
    lazy: bool  # inside a function: runs when the function first does


def project_modules(root: Path = REPO) -> dict[str, Path]:
    """Every module of server/, kmscli/ and tui/ by dotted name (a package by its own name)."""
    out: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


@cache
def parse(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"), filename=str(path))


def _type_checking_only(node: ast.AST) -> TypeGuard[ast.If]:
    """``if TYPE_CHECKING:``: imports for the type checker, never run."""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    package = package[: len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def imports(module: str, modules: dict[str, Path]) -> list[Import]:
    """The project imports ``module`` runs, at import time or lazily, in source order."""
    path = modules[module]
    out: list[Import] = []

    def visit(node: ast.AST, lazy: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if _type_checking_only(child):
                for other in child.orelse:
                    visit_one(other, lazy)
                continue
            visit_one(child, lazy)

    def visit_one(node: ast.AST, lazy: bool) -> None:
        if isinstance(node, ast.ImportFrom):
            base = _absolute(module, path, node)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                bound = alias.asname or alias.name
                if sub in modules:
                    out.append(Import(sub, None, bound, sub, node.lineno, lazy))
                elif base in modules:
                    out.append(Import(base, alias.name, bound, sub, node.lineno, lazy))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules:
                    bound = alias.asname or alias.name.split(".")[0]
                    means = alias.name if alias.asname else bound
                    out.append(Import(alias.name, None, bound, means, node.lineno, lazy))
        visit(node, lazy or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))

    visit(parse(path), False)
    return out
