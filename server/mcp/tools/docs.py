"""Tool reference generated from the registry (docs/tools.md); a test keeps the file current."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from server.config.tiers import tiers_prose
from server.errors import HOST_INJECTED_ARGS
from server.mcp.tools import REGISTRY
from server.mcp.tools.base import ToolSpec


def _fields(spec: ToolSpec) -> list[str]:
    schema = spec.input_model.model_json_schema()
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        kind = " or ".join(_kind(p) for p in prop.get("anyOf", [prop]))
        limits = [f"{k} {prop[k]}" for k in ("minimum", "maximum", "maxLength", "maxItems") if k in prop]
        if "default" in prop and prop["default"] not in (None, [], {}):
            limits.append(f"default `{json.dumps(prop['default'])}`")
        desc = prop.get("description", "")
        out.append(f"| `{name}` | {kind} | {'yes' if name in required else 'no'} | {', '.join(limits)} | {desc} |")
    return out


def _kind(prop: dict[str, Any]) -> str:
    """A schema's type for a table cell: ``string or null``, enum values spelled out (no bare ``|``)."""
    if "enum" in prop:
        return "one of " + ", ".join(f"`{v}`" for v in prop["enum"])
    if "const" in prop:
        return f"`{prop['const']}`"
    kind = prop.get("type", "object")
    if kind == "array" and isinstance(prop.get("items"), dict):
        return f"array of {_kind(prop['items'])}"
    return str(kind)


def tools_markdown(registry: Sequence[ToolSpec] = REGISTRY) -> str:
    lines = [
        "# kms MCP tools",
        "",
        "Generated from the tool registry (`server/mcp/tools/`) by `python -m server.mcp.tools.docs`; do not edit.",
        "",
        "Each tool belongs to a tier; a tier is on for a session when every setting of its chain is on (each",
        "tier needs every one before it):",
        "",
        *tiers_prose(),
        "",
        "Read tools are listed whenever the server runs (a disabled tier answers `feature-disabled`); the tools",
        "of the other tiers are listed only when their tier is on. A call to a tool of a tier that is off answers",
        "`feature-disabled`, naming the settings that are off, or, over the service, the token's `tier:` scope",
        "when that is what stops it (the settings are on). Every result is at most 100 KB of JSON; larger",
        'results answer `{"truncated": true, "cursor": ...}`. Errors answer `{"error": kind, "message": ...}`;',
        "each tool's description ends with the kinds it can answer.",
        "",
        "Inputs are strict: an unknown argument is refused (`invalid-input`, naming the valid fields), except the",
        "names agent hosts add to every call on their own, which are accepted and ignored: "
        + ", ".join(f"`{n}`" for n in sorted(HOST_INJECTED_ARGS))
        + " (Gemini CLI).",
        "",
        "| tool | tier | read-only | destructive | idempotent |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in registry:
        a = s.annotations
        lines.append(f"| `{s.name}` | {s.tier} | {a.read_only_hint} | {a.destructive_hint} | {a.idempotent_hint} |")
    for s in registry:
        lines += [
            "",
            f"## `{s.name}`",
            "",
            s.description,
            "",
            "| field | type | required | limits | about |",
            "| --- | --- | --- | --- | --- |",
            *_fields(s),
        ]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).resolve().parents[3] / "docs" / "tools.md"
    target.write_text(tools_markdown(), encoding="utf-8")
    print(f"wrote {target}")
