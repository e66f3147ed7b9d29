"""The example vault every tool's ``example`` and ``denied`` call is written against
(``server.mcp.tools.base``), and what the tests that go through every tool need to call them.

The notes sit directly in ``drafts/`` (which ``EXAMPLE_ALLOWLIST``'s ``drafts/*`` allows) and in ``drafts/sub/``
(one folder too deep: where the denied calls aim); ``inbox/a`` and ``inbox/x`` are folders to move and rename;
``Home.md`` is a note no example touches.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from server.mcp.tools import REGISTRY
from server.mcp.tools.base import EXAMPLE_ALLOWLIST, Denied, ToolSpec, WriteSpec

ALLOW = EXAMPLE_ALLOWLIST
NOTES = ("append", "insert", "edit", "rename", "trash")
UNTOUCHED = "Home.md"  # no example writes it: a note that is still there after any one of them


def write_example_vault(root: Path) -> Path:
    for folder in ("drafts", "drafts/sub"):
        (root / folder).mkdir(parents=True, exist_ok=True)
        for name in NOTES:
            (root / folder / f"{name}.md").write_text(f"# {name}\n\nbody of {folder}/{name}\n")
    (root / "drafts" / "move.md").write_text("# move\n")
    (root / "drafts" / "move2.md").write_text("# move2\n")
    (root / "inbox" / "a").mkdir(parents=True)
    (root / "inbox" / "a" / "n.md").write_text("# in a\n")
    (root / "inbox" / "x").mkdir(parents=True)
    (root / "inbox" / "x" / "n.md").write_text("# in x\n")
    (root / UNTOUCHED).write_text("# Home\n\nThe start page.\n")
    return root


def example(spec: ToolSpec) -> dict[str, Any]:
    """A fresh copy of ``spec``'s example arguments (a caller may change it)."""
    return _copy(spec.example)


def denied(spec: WriteSpec) -> Denied | None:
    """``spec``'s denied call (a copy), or None for a tool that writes only in a folder of its own."""
    return None if isinstance(spec.denied, str) else Denied(_copy(spec.denied.args), spec.denied.path)


def specs(*tiers: str) -> list[ToolSpec]:
    """The registry's tools of these tiers, in listing order."""
    return [s for s in REGISTRY if s.tier in tiers]


def writers() -> list[WriteSpec]:
    return [s for s in REGISTRY if isinstance(s, WriteSpec)]


def string_fields(spec: ToolSpec) -> list[str]:
    """The arguments of ``spec`` that take a string (alone or or null): where a name or a word can go."""
    found = []
    for name, prop in spec.input_model.model_json_schema()["properties"].items():
        types = {prop.get("type")} | {p.get("type") for p in prop.get("anyOf", [])}
        if "string" in types and "enum" not in prop and name != "idempotencyKey":
            found.append(name)
    return found


def aimed(spec: ToolSpec, names: list[str]) -> list[dict[str, Any]]:
    """``spec``'s example as is, then with each of its string arguments set to each of ``names``:
    every way a read tool can be pointed at a note, a folder, a tag or a word without knowing the tool."""
    calls = [example(spec)]
    for field in string_fields(spec):
        calls += [{**example(spec), field: name} for name in names]
    return calls


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_copy(v) for v in value]
    return value
