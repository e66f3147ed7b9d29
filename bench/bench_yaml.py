"""Why kms keeps PyYAML beside ruamel.yaml (issue 32: one library per job unless a measured reason says
otherwise). An edited frontmatter is parsed a second time as a YAML 1.1 tool reads it: PyYAML's C loader
against ruamel.yaml's pure-Python loader in YAML 1.1 mode, on a typical frontmatter, and where the two
disagree on what the values are.

Then the frontmatter reader the indexer runs on every note (``parse_frontmatter``, issue 37: PyYAML's C
parser with YAML 1.2 meanings and a simple-frontmatter reader, where yaml-rs was): on the same frontmatter
and on every frontmatter of the repository's sample and test vaults. ``--against DIR`` times DIR's reader
too, in the same run, taking turns, with a Python that has DIR's dependencies (yaml-rs for the old reader):
``PYTHONPATH=. /work/main/.venv/bin/python bench/bench_yaml.py --against /work/main``.

Usage: python bench/bench_yaml.py [--rounds N] [--against DIR]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML

from server.vault.frontmatter_read import parse_frontmatter, split_frontmatter

REPO = Path(__file__).resolve().parents[1]
VAULTS = [REPO / "kmscli" / "sample_vault", REPO / "tests/data/vaults", REPO / "tests/data/semantic_vault"]

DOC = (
    "title: Plan\ntags: [a, b, c]\nstatus: yes\nwhen: 12:30\nnum: 010\nbig: 1_000\nd: 2024-01-01\n"
    "nothing: ~\nx: .inf\nflag: on\noct: 0o17\nanswer: n\nlist:\n  - one\n  - two\n"
)


def _reader_of(tree: Path) -> ModuleType:
    """``tree``'s frontmatter reader, loaded beside this one (its own imports resolve to this tree's modules)."""
    spec = importlib.util.spec_from_file_location("against_frontmatter_read", tree / "server/vault/frontmatter_read.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _best_us(works: dict[str, Callable[[], Any]], number: int, repeat: int = 41) -> dict[str, float]:
    """CPU µs per call of each work, the best of ``repeat`` runs taken in turn (A, B, A, B...): on a shared
    machine CPU time and the least disturbed run are what compare, and taking turns gives each the same moments."""
    best = dict.fromkeys(works, float("inf"))
    for _ in range(repeat):
        for name, work in works.items():
            spent = timeit.timeit(work, number=number, timer=time.process_time)
            best[name] = min(best[name], spent / number * 1e6)
    return best


def _same(a: tuple[Any, str | None], b: tuple[Any, str | None]) -> bool:
    """Same values (``repr``: 1, 1.0 and True differ) and, for an error, the same kind (the wording is the parser's)."""
    kind = [None if e is None else e.split(":")[0] for e in (a[1], b[1])]
    return repr(a[0]) == repr(b[0]) and kind[0] == kind[1]


def bench_reader(rounds: int, against: Path | None) -> None:
    raws = [split_frontmatter(p.read_text(encoding="utf-8"))[0] for v in VAULTS for p in sorted(v.rglob("*.md"))]
    vault = [r for r in raws if r is not None]
    readers: dict[str, Callable[[str | None], Any]] = {"this tree": parse_frontmatter}
    if against is not None:
        readers[str(against)] = _reader_of(against).parse_frontmatter
        mine, theirs = ([read(r) for r in [DOC, *vault]] for read in readers.values())
        same = sum(_same(a, b) for a, b in zip(mine, theirs, strict=True))
        print(f"same values (errors: same kind) on {same} of {len(mine)} frontmatters")

    def on_doc(read: Callable[[str | None], Any]) -> Callable[[], Any]:
        return lambda: read(DOC)

    def on_vault(read: Callable[[str | None], Any]) -> Callable[[], Any]:
        return lambda: [read(r) for r in vault]

    one = _best_us({name: on_doc(read) for name, read in readers.items()}, max(1, rounds // 10))
    many = _best_us({name: on_vault(read) for name, read in readers.items()}, 5)
    for name in readers:
        print(f"parse_frontmatter ({name}): {one[name]:.1f} µs on DOC; {many[name]:.0f} µs for {len(vault)} vault ones")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--against", type=Path, help="a checkout whose frontmatter reader to time as well")
    args = parser.parse_args()
    rounds = args.rounds
    loader = getattr(pyyaml, "CSafeLoader", pyyaml.SafeLoader)
    ruamel = YAML(typ="safe", pure=True)
    ruamel.version = (1, 1)
    py, ru = pyyaml.load(DOC, Loader=loader), ruamel.load(DOC)  # noqa: S506 - a safe loader
    differ = {k: (py.get(k), ru.get(k)) for k in py if py.get(k) != ru.get(k)}
    started = time.perf_counter()
    for _ in range(rounds):
        pyyaml.load(DOC, Loader=loader)  # noqa: S506 - a safe loader
    a = (time.perf_counter() - started) / rounds
    started = time.perf_counter()
    for _ in range(rounds // 10):
        ruamel.load(DOC)
    b = (time.perf_counter() - started) / (rounds // 10)
    print(f"PyYAML {loader.__name__}: {a * 1e6:.0f} µs; ruamel.yaml pure, YAML 1.1: {b * 1e6:.0f} µs ({b / a:.1f}x)")
    print(f"values read differently (PyYAML, ruamel): {differ}")
    bench_reader(rounds, args.against)


if __name__ == "__main__":
    main()
