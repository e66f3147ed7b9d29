"""Why kms keeps PyYAML beside ruamel.yaml (issue 32: one library per job unless a measured reason says
otherwise). An edited frontmatter is parsed a second time as a YAML 1.1 tool reads it: PyYAML's C loader
against ruamel.yaml's pure-Python loader in YAML 1.1 mode, on a typical frontmatter, and where the two
disagree on what the values are.

Usage: python bench/bench_yaml.py [--rounds N]
"""

from __future__ import annotations

import argparse
import time

import yaml as pyyaml
from ruamel.yaml import YAML

DOC = (
    "title: Plan\ntags: [a, b, c]\nstatus: yes\nwhen: 12:30\nnum: 010\nbig: 1_000\nd: 2024-01-01\n"
    "nothing: ~\nx: .inf\nflag: on\noct: 0o17\nanswer: n\nlist:\n  - one\n  - two\n"
)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2000)
    rounds = parser.parse_args().rounds
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


if __name__ == "__main__":
    main()
