"""Every native extension that reads note content survives the servers' thread pattern, and bad input.

``kms mcp`` imports modules and loads the model on short-lived threads (``kms-warm-writes``,
``kms-semantic-start``) and uses them later on other threads (the tool calls' workers). yaml-rs 0.1.6 died
there with SIGSEGV (issue 37); docs/dependencies.md lists the extensions. Each check runs in a fresh
interpreter, so a crash is a signal death of that process (a failed test), not of the test run."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# The pattern: import (and set up) on thread A, join A (it exits), then use on thread B and on the main thread.
HARNESS = """
import sys, threading
state = {{}}
def setup():
{setup}
def use():
{use}
a = threading.Thread(target=setup); a.start(); a.join()
for _ in range(3):
    b = threading.Thread(target=use); b.start(); b.join()
use()
print("survived")
"""

CASES = {
    # PyYAML's C parser (libyaml) and kms's YAML 1.2 resolution: every note's frontmatter
    "frontmatter": (
        "from server.vault.frontmatter_read import parse_frontmatter\nstate['read'] = parse_frontmatter",
        "assert state['read']('tags:\\n  - a\\n') == ({'tags': ['a']}, None)\n"
        "assert state['read']('a: {x: [1, 2]}\\nb: &x 3\\nc: *x') == ({'a': {'x': [1, 2]}, 'b': 3, 'c': 3}, None)\n"
        "assert state['read']('a: [1, 2')[1].startswith('invalid YAML')",
    ),
    # pyromark (Rust): every note's Markdown
    "markdown": (
        "from server.vault.parser import parse_note\nstate['parse'] = parse_note",
        "note = state['parse']('---\\ntags: [a]\\n---\\n# H\\n[[Link]] #tag **b** [x](y.md)\\n', 'T')\n"
        "assert note.tags and note.headings",
    ),
    # zstandard (C): note history, compressed against a neighbour version
    "history": (
        "from server.store import version_blobs\nstate['h'] = version_blobs\n"
        "state['frame'] = version_blobs.compress(b'a note' * 50)",
        "h = state['h']\nbase = b'the neighbour version ' * 40\n"
        "assert h.decompress(h.compress(b'the next version ' * 40, base), base, 680) == b'the next version ' * 40\n"
        "assert h.decompress(state['frame'], None, 300) == b'a note' * 50",
    ),
    # ruamel.yaml: frontmatter edits (round trip)
    "frontmatter edits": (
        "from server.vault import frontmatter\nstate['fm'] = frontmatter",
        "out = state['fm'].apply_props('---\\ntitle: x\\n---\\nbody\\n', {'status': 'done'}, [])\n"
        "assert 'status: done' in out.new_text",
    ),
    # rapidfuzz (C++): "did you mean" over note names
    "names": (
        "import rapidfuzz.process, rapidfuzz.fuzz\nstate['p'] = rapidfuzz.process",
        "from rapidfuzz import fuzz\n"
        "assert state['p'].extractOne('shakshuka', ['Shakshuka', 'Soup'], scorer=fuzz.WRatio)",
    ),
    # pydantic-core (Rust): the tools' inputs, note text included
    "tool inputs": (
        "from server.mcp.tools.write_tools import AppendInput\nstate['m'] = AppendInput",
        "m = state['m'].model_validate({'noteId': 'n1', 'content': 'text ' * 1000})\nassert m.content",
    ),
}


def _run(script: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONFAULTHANDLER": "1", "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, cwd=REPO, timeout=timeout
    )


def _harness(setup: str, use: str) -> str:
    return HARNESS.format(setup=textwrap.indent(setup, "    "), use=textwrap.indent(use, "    "))


@pytest.mark.parametrize("name", sorted(CASES))
def test_imported_on_a_thread_that_exits_then_used_on_others(name: str) -> None:
    done = _run(_harness(*CASES[name]))
    assert done.returncode == 0, f"exit {done.returncode} (negative: killed by that signal)\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "survived"


def test_the_frontmatter_reader_issue_37_pattern() -> None:
    """The issue's own reproduction, through kms's reader: imported on a thread that exits, read on another."""
    script = (
        "import threading\n"
        "def a():\n    import server.vault.frontmatter_read\n"
        "t = threading.Thread(target=a); t.start(); t.join()\n"
        "from server.vault.frontmatter_read import parse_frontmatter\n"
        "out = []\n"
        "def b():\n    out.append(parse_frontmatter('tags:\\n  - a\\n'))\n"
        "t = threading.Thread(target=b); t.start(); t.join()\n"
        "print(out)\n"
    )
    done = _run(script)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "[({'tags': ['a']}, None)]"


def test_the_embedding_model_loaded_on_a_thread_that_exits_embeds_on_others(embed_model_dir: Path) -> None:
    """tokenizers (Rust) and onnxruntime (C++): ``kms-semantic-start`` loads the model, searches embed later."""
    setup = (
        "from server.index.embed import Embedder\n"
        f"e = Embedder({str(embed_model_dir)!r}, threads=1)\nassert e.load(), e.reason\nstate['e'] = e"
    )
    use = "v = state['e'].embed(['a note about bread', '# H\\n' + 'word ' * 2000])\nassert v.shape[0] == 2"
    done = _run(_harness(setup, use), timeout=240)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "survived"


# Markdown and frontmatter no tool would write, as a hostile or broken note might hold them.
HOSTILE = [
    "'[' * 200_000",
    "'>' * 100_000 + ' x'",
    "''.join(' ' * (2 * i) + '- item\\n' for i in range(3000))",
    "'`' * 100_000",
    "'*' * 100_000 + 'a' + '_' * 100_000",
    "'| a |\\n|---|\\n' + '| x |\\n' * 100_000",
    "'[[' * 50_000 + ']]' * 50_000",
    "'<div>' * 50_000",
    "'\\x00\\x01\\x02 \\ud7ff \\ue000 \\U0010ffff\\n' * 1000",
    "'---\\n' + 'a: ' + '[' * 5000 + '\\n---\\nbody'",
    "'---\\n' + 'k: &a [x]\\n' + ''.join(f'k{i}: &a [*a, *a]\\n' for i in range(40)) + '---\\n'",
    "'---\\n' + 'a: \"' + '\\\\\\\\' * 100_000 + '\"\\n---\\n'",
    "'#' * 10 + ' ' + 'x' * 1_000_000",
]


def test_hostile_notes_parse_without_a_signal_death() -> None:
    """The indexer's parse of a note (pyromark and the frontmatter reader) on malformed and huge inputs:
    each finishes, in a fresh interpreter, and gives a ParsedNote."""
    script = (
        "from server.vault.parser import parse_note\n"
        f"for text in [{', '.join(HOSTILE)}]:\n"
        "    note = parse_note(text, 'T')\n"
        "    assert note is not None\n"
        "print('survived')\n"
    )
    done = _run(script, timeout=240)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    assert done.stdout.strip() == "survived"
