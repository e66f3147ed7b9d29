"""The resources, template and prompts reference (docs/resources.md), generated from what the server serves;
a test keeps the file current (``python -m server.mcp.surfaces_docs`` writes it)."""

from __future__ import annotations

from server.activity import note_resources as notes
from server.activity import prompts
from server.mcp.surfaces import TEMPLATE
from server.mcp.tools.base import PAYLOAD_CAP_BYTES


def resources_markdown() -> str:
    lines = [
        "# kms MCP resources and prompts",
        "",
        "Generated from `server/activity/note_resources.py`, `server/activity/prompts.py` and `server/mcp/surfaces.py`",
        "by `python -m server.mcp.surfaces_docs`; do not edit. The tools are in [tools.md](tools.md);",
        "approving a staged write inside the host is in [approvals.md](approvals.md).",
        "",
        "## Notes as resources",
        "",
        f"A note is the resource `kms://<vault>/<path>` (`{notes.MIME}`): the vault's name and the note's",
        "vault-relative path, each percent-encoded (`/` kept in the path), e.g. `kms://work/projects/Q3%20plan.md`.",
        "",
        f"- `resources/list`: the {notes.LISTED} most recently changed visible notes of the session's vaults, newest",
        f"  first, in pages of {notes.PAGE} (`nextCursor`); never the whole vault (hosts list on every connect).",
        "  Results are marked private to the session (`cacheScope: private`, `ttlMs: 0`).",
        f"- `resources/templates/list`: the template `{TEMPLATE.uri_template}`, for a host's `@` picker.",
        "- `completion/complete` on the template: `vault` completes the vault names in the session's scope; `path`",
        "  completes note paths, fuzzy over every visible note's path and title in scope (narrowed to the `vault`",
        f"  already chosen), best first, at most {notes.MAX_COMPLETIONS}; nothing typed gives the most recent notes.",
        "  On the `recall` prompt, `topic` completes note titles the same way.",
        "- `resources/read`: the note's Markdown body as `kms_read` serves it: the same name resolver inside the",
        "  vault, hidden notes and notes of vaults outside the session's scope as if absent, the AI summary block",
        f"  left out, at most {PAYLOAD_CAP_BYTES // 1000} KB (a longer body ends with the `kms_read` call that reads",
        "  on). `_meta` carries `noteId`, `title` and `version`. The read is recorded as the session's read.",
        "  A refused read is a JSON-RPC `invalid params` error (-32602) whose `data` is kms's typed error,",
        '  `{"error": "not-found" | "invalid-input", "message": ...}`.',
        "",
        "## Prompts",
        "",
        "Run in the host as slash commands (`/mcp__kms__<name> args`); the prompt's text becomes the person's",
        "message, with the vault's data fetched when it runs. A prompt is listed only when the session's tiers",
        "allow the tools it leads to.",
        "",
        "| prompt | title | tier | arguments | what it does |",
        "| --- | --- | --- | --- | --- |",
    ]
    for p in prompts.PROMPTS:
        args = ", ".join(f"`{a.name}`{' (required)' if a.required else ''}: {a.description}" for a in p.arguments)
        lines.append(f"| `{p.name}` | {p.title} | {p.tier} | {args or '—'} | {p.description} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    from pathlib import Path

    target = Path(__file__).resolve().parents[2] / "docs" / "resources.md"
    target.write_text(resources_markdown(), encoding="utf-8")
    print(f"wrote {target}")
