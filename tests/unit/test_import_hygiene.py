"""Layering at run time: the headless core never pulls in a front end (kmscli, tui) or its toolkits
(typer, rich, textual); only ``server.mcp`` loads the MCP SDK; the TUI never imports the CLI.
The import-linter contracts in pyproject.toml check the same statically, and the layers inside ``server/``.

Every module is imported in a fresh process. To keep this fast, one clean driver interpreter
pre-imports a few heavy third-party libraries (checked to be free of the forbidden modules) and
forks one child per module; each child imports just that module and reports ``sys.modules``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CORE_FORBIDDEN = ("typer", "textual", "rich", "kmscli", "tui")
SDK = ("mcp", "mcp_types")
TUI_FORBIDDEN = ("kmscli",)

DRIVER = r"""
import importlib, json, os, sys
job = json.loads(sys.argv[1])
mods = job["modules"]
watch = ("typer", "textual", "rich", "kmscli", "tui", "mcp", "mcp_types")
for lib in job["preload"]:
    try:
        importlib.import_module(lib)
    except ImportError:
        pass
preloaded = [w for w in watch if w not in job["allowed"] and any(m == w or m.startswith(w + ".") for m in sys.modules)]
preloaded_ok = set(job["allowed"])
results = {"__preloaded__": preloaded}
for mod in mods:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            importlib.import_module(mod)
            out = {"loaded": [x for x in watch if x in sys.modules and x not in preloaded_ok]}
        except BaseException as exc:
            out = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(w, json.dumps(out).encode())
        os._exit(0)
    os.close(w)
    data = b""
    while chunk := os.read(r, 65536):
        data += chunk
    os.close(r)
    os.waitpid(pid, 0)
    results[mod] = json.loads(data or b'{"error": "child died"}')
print(json.dumps(results))
"""


def modules_of(package: str) -> list[str]:
    """Module names under a package folder, found on disk (nothing imported here)."""
    root = REPO / package
    if not (root / "__init__.py").exists():
        return []
    out = []
    for py in sorted(root.rglob("*.py")):
        rel = py.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if any(not (REPO.joinpath(*parts[:i]) / "__init__.py").exists() for i in range(1, len(parts))):
            continue  # not inside a regular package (e.g. data folders)
        if parts[-1] == "__init__":
            parts.pop()
        out.append(".".join(parts))
    return out


SERVER_MODULES = modules_of("server")
SDK_MODULES = [m for m in SERVER_MODULES if m == "server.mcp" or m.startswith("server.mcp.")]
CORE_MODULES = [m for m in SERVER_MODULES if m not in SDK_MODULES]
TUI_MODULES = modules_of("tui")


# heavy third-party libraries the children may share (never a watched module unless allowed, checked by the driver)
SHARED = [
    "apsw",
    "yaml",
    "pyromark",
    "pydantic",
    "anyio",
    "rapidfuzz.process",
    "platformdirs",
    "watchfiles",
    "numpy",
    "ruamel.yaml",
    "tomllib",
]
SDK_SHARED = SHARED + ["mcp_types", "mcp.server.lowlevel", "mcp.server.stdio"]
TUI_SHARED = SDK_SHARED + ["rich.console", "rich.text", "textual.app", "textual.widgets", "textual.containers"]


@pytest.fixture(scope="module")
def imported() -> dict[str, dict]:
    jobs = [
        {"modules": CORE_MODULES, "preload": SHARED, "allowed": []},
        {"modules": SDK_MODULES, "preload": SDK_SHARED, "allowed": list(SDK)},
        {"modules": TUI_MODULES, "preload": TUI_SHARED, "allowed": ["textual", "rich", *SDK]},
    ]
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", DRIVER, json.dumps(job)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )
        for job in jobs
        if job["modules"]
    ]
    results: dict[str, dict] = {}
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        data = json.loads(out.strip().splitlines()[-1])
        assert data.pop("__preloaded__") == [], "the driver's pre-imports must not load a watched module"
        results.update(data)
    return results


def test_the_walk_finds_the_core() -> None:
    for mod in (
        "server",
        "server.store.db",
        "server.vault.parser",
        "server.index.indexer",
        "server.mcp.serve",
        "server.mcp.tools",
        "server.mcp.tools.read_tools",
    ):
        assert mod in SERVER_MODULES
    assert not any("sample_vault" in m for m in SERVER_MODULES)


@pytest.mark.parametrize("module", SERVER_MODULES)
def test_core_module_imports_no_front_end_toolkit(imported: dict[str, dict], module: str) -> None:
    result = imported[module]
    assert "error" not in result, f"{module} failed to import: {result.get('error')}"
    bad = [m for m in result["loaded"] if m in CORE_FORBIDDEN]
    assert bad == [], f"importing {module} loads {bad}"


@pytest.mark.parametrize("module", CORE_MODULES)
def test_only_the_mcp_package_loads_the_sdk(imported: dict[str, dict], module: str) -> None:
    assert [m for m in imported[module]["loaded"] if m in SDK] == [], f"{module} loads the MCP SDK"


@pytest.mark.parametrize("module", TUI_MODULES or ["<no tui package yet>"])
def test_tui_module_does_not_import_the_cli(imported: dict[str, dict], module: str) -> None:
    if not TUI_MODULES:
        assert not (REPO / "tui" / "__init__.py").exists()
        return
    result = imported[module]
    assert "error" not in result, f"{module} failed to import: {result.get('error')}"
    assert [m for m in result["loaded"] if m in TUI_FORBIDDEN] == [], f"{module} imports kmscli"
