"""Tool reference generated from the registry (docs/tools.md); a test keeps the file current."""

from __future__ import annotations

from server.mcp.tools import REGISTRY
from server.mcp.tools.base import ToolSpec


def _fields(spec: ToolSpec) -> list[str]:
    schema = spec.input_model.model_json_schema()
    required = set(schema.get("required", []))
    out = []
    for name, prop in schema.get("properties", {}).items():
        kind = prop.get("type") or " | ".join(p.get("type", "object") for p in prop.get("anyOf", [])) or "object"
        bounds = ", ".join(f"{k} {prop[k]}" for k in ("minimum", "maximum", "maxLength", "maxItems") if k in prop)
        default = f", default `{prop['default']!r}`" if "default" in prop and prop["default"] not in (None, [], {}) \
            else ""
        desc = prop.get("description", "")
        out.append(f"| `{name}` | {kind} | {'yes' if name in required else 'no'} | "
                   f"{bounds}{default} | {desc} |")
    return out


def tools_markdown() -> str:
    lines = [
        "# kms MCP tools",
        "",
        "Generated from the tool registry (`server/mcp/tools/`) by `python -m server.mcp.tools.docs`; do not edit.",
        "",
        "Read tools are listed whenever the server runs (a disabled tier answers `feature-disabled`); write tools",
        "are listed only when all three flags (`KMS_ENABLED`, `KMS_AGENT_TOOLS_ENABLED`,",
        "`KMS_AGENT_WRITE_TOOLS_ENABLED`) are on, edit tools when `KMS_AGENT_EDIT_TOOLS_ENABLED` is on too, and",
        "organize tools when `KMS_AGENT_ORGANIZE_TOOLS_ENABLED` is on as well. A call to a tool of a tier that is",
        "off answers `feature-disabled`. Every result is at most 100 KB of JSON; larger results answer",
        '`{"truncated": true, "cursor": ...}`. Errors answer `{"error": kind, "message": ...}`.',
        "",
        "| tool | tier | read-only | destructive | idempotent |",
        "| --- | --- | --- | --- | --- |",
    ]
    for s in REGISTRY:
        a = s.annotations
        lines.append(f"| `{s.name}` | {s.tier} | {a.read_only_hint} | {a.destructive_hint} | {a.idempotent_hint} |")
    for s in REGISTRY:
        lines += ["", f"## `{s.name}`", "", s.description, "", "| field | type | required | limits | about |",
                  "| --- | --- | --- | --- | --- |", *_fields(s)]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).resolve().parents[3] / "docs" / "tools.md"
    target.write_text(tools_markdown(), encoding="utf-8")
    print(f"wrote {target}")
