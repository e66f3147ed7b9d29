"""No module reaches into another project module's private names.

A leading underscore says a name is its module's own business; a piece two modules share gets a
public name in its home, with a docstring saying who shares it, so changing a private helper never
breaks a caller elsewhere. Checked from the source (``ast``) of server/, kmscli/ and tui/:
``from module import _name``; ``alias._name`` where ``alias`` is an imported project module;
``obj._name`` (or ``getattr(obj, "_name")``) on any other object but ``self``/``cls`` when
``_name`` is defined by another project module and not by this one (an instance's private method,
``embedder._require()``). Dunder names are public.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

from support.modules import REPO, imports, parse, project_modules

# (importing module, "home module.private name") left to work under way elsewhere: each entry must
# still be found, so it is removed here once that work lands


@dataclass(frozen=True)
class Use:
    module: str  # the module that uses the name
    name: str  # "home module.private name"
    where: str  # file:line and the source form, for the failure message


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _defined(tree: ast.Module) -> set[str]:
    """The private names a module defines: functions, classes, variables, attributes it assigns."""
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            name = node.name
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            name = node.id
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            name = node.attr
        elif isinstance(node, ast.arg):
            name = node.arg
        elif isinstance(node, ast.alias):
            name = node.asname or node.name.split(".")[0]
        else:
            continue
        if _private(name):
            out.add(name)
    return out


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"], else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


@dataclass
class _Project:
    root: Path
    modules: dict[str, Path]
    defined: dict[str, set[str]]  # module -> the private names it defines
    homes: dict[str, set[str]]  # private name -> the modules defining it

    @classmethod
    def read(cls, root: Path) -> _Project:
        modules = project_modules(root)
        defined = {m: _defined(parse(p)) for m, p in modules.items()}
        homes: dict[str, set[str]] = {}
        for module, names in defined.items():
            for name in names:
                homes.setdefault(name, set()).add(module)
        return cls(root, modules, defined, homes)

    def uses(self, module: str) -> list[Use]:
        """The other modules' private names ``module`` uses."""
        path = self.modules[module]
        rel = path.relative_to(self.root)
        found = imports(module, self.modules)
        out = [
            Use(module, f"{imp.target}.{imp.name}", f"{rel}:{imp.line}: from {imp.target} import {imp.name}")
            for imp in found
            if imp.name is not None and _private(imp.name) and imp.target != module
        ]
        means = {imp.bound: imp.means for imp in found}
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Attribute) and _private(node.attr):
                obj, attr = node.value, node.attr
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "hasattr", "setattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _private(node.args[1].value)
            ):
                obj, attr = node.args[0], node.args[1].value
            else:
                continue
            where = f"{rel}:{node.lineno}: {ast.unparse(node)}"
            out += [Use(module, f"{home}.{attr}", where) for home in self._homes(module, means, obj, attr)]
        return out

    def _homes(self, module: str, means: dict[str, str], obj: ast.expr, attr: str) -> list[str]:
        """The other modules whose private ``attr`` ``obj.attr`` reaches."""
        chain = _dotted(obj)
        if chain is not None and chain[0] in means:
            target = ".".join([means[chain[0]], *chain[1:]])
            if target in self.modules:  # an imported module's own name
                return [target] if target != module else []
        if chain in (["self"], ["cls"]) or attr in self.defined[module]:
            return []
        return sorted(self.homes.get(attr, set()) - {module})  # an object's: by who defines the name


def private_uses(root: Path = REPO) -> list[Use]:
    """Every use of another project module's private name under ``root``."""
    project = _Project.read(root)
    return [use for module in project.modules for use in project.uses(module)]


def test_no_module_uses_another_modules_private_names() -> None:
    unexpected = [u.where for u in private_uses()]
    assert not unexpected, (
        "private names used from another module; give the shared piece a public name "
        "in its home:\n" + "\n".join(unexpected)
    )


def test_the_check_sees_every_form(tmp_path: Path) -> None:
    """A small project with each kind of reach-in: the check names every one, and nothing legitimate."""
    (tmp_path / "server" / "vault").mkdir(parents=True)
    (tmp_path / "kmscli").mkdir()
    (tmp_path / "tui").mkdir()
    for init in ("server", "server/vault", "kmscli", "tui"):
        (tmp_path / init / "__init__.py").write_text("")
    (tmp_path / "server" / "vault" / "parser.py").write_text(
        "import re\n_WIKILINK = re.compile('x')\n\ndef _inside(): ...\n\n"
        "class Embedder:\n    def _require(self): ...\n    def load(self):\n        self._require()\n"
        "    def __len__(self): return 0\n"
    )
    (tmp_path / "server" / "vault" / "links.py").write_text(
        "from server.vault.parser import _WIKILINK, Embedder\n"
        "from . import parser\n"
        "import server.vault.parser as p\n"
        "import server.vault.parser\n\n"
        "def f(e: Embedder):\n"
        "    e._require()\n"
        "    getattr(e, '_require')\n"
        "    p._inside()\n"
        "    server.vault.parser._inside()\n"
        "    return parser._WIKILINK, len(e), e.__len__(), Embedder.__name__\n"
    )
    (tmp_path / "tui" / "own.py").write_text(
        "import os\n\nclass A:\n    def _own(self): ...\n\ndef g(a: A):\n    a._own()\n    os._exit(0)\n"
    )
    uses = {(u.module, u.name, u.where.split(": ", 1)[1]) for u in private_uses(tmp_path)}
    home = "server.vault.parser"
    assert uses == {
        ("server.vault.links", f"{home}._WIKILINK", f"from {home} import _WIKILINK"),
        ("server.vault.links", f"{home}._require", "e._require"),
        ("server.vault.links", f"{home}._require", "getattr(e, '_require')"),
        ("server.vault.links", f"{home}._inside", "p._inside"),
        ("server.vault.links", f"{home}._inside", "server.vault.parser._inside"),
        ("server.vault.links", f"{home}._WIKILINK", "parser._WIKILINK"),
    }
