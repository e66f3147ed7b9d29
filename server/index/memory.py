"""Memory notes: where the facts ``kms_remember`` records live, and how they read back.

One note for the person and one per project, in the ``memory.folder`` of a vault. A memory note
is known by its frontmatter (``memory: person``, or ``memory: project`` with ``project: <identity>``),
not by its file name, so the person may rename it. Each fact is a list item under its category
heading: ``- 2026-12-01: The build uses uv, not pip.`` Written by ``server.writes.memory``; read
here for ``kms_start`` and for the duplicate check, from the index (visible notes only).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Literal

import apsw

from server.store.db import rows
from server.vault.scope import Vaults, VaultScope

About = Literal["person", "project"]
DEFAULT_CATEGORY = "General"
MEMORY_TAG = "kms-memory"
_HEADING = re.compile(r"^(#{2,6})\s+(.+?)\s*#*\s*$")
_ITEM = re.compile(r"^\s{0,3}[-*+]\s+(?:(\d{4}-\d{2}-\d{2}):\s*)?(.+?)\s*$")
_FENCE = re.compile(r"^\s{0,3}(`{3,}|~{3,})")


@dataclass(frozen=True)
class Fact:
    category: str
    text: str
    date: str | None
    line: str  # the list item exactly as written

    def to_json(self) -> dict[str, Any]:
        return {"category": self.category, "text": self.text, **({"date": self.date} if self.date else {})}


def normalized(text: str) -> str:
    """What makes two facts "the same text": case, spacing, Unicode forms and final punctuation aside."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(re.sub(r"[\s.!;,:]+$", "", " ".join(folded.split())).split())


def parse_facts(body: str) -> list[Fact]:
    """Every list item under a heading of level 2 or more (not inside code), in file order."""
    facts: list[Fact] = []
    category: str | None = None
    fence: str | None = None
    for raw in body.splitlines():
        m = _FENCE.match(raw)
        if m:
            fence = None if fence and m.group(1)[0] == fence[0] else (fence or m.group(1))
            continue
        if fence:
            continue
        h = _HEADING.match(raw)
        if h:
            category = h.group(2)
            continue
        item = _ITEM.match(raw)
        if item and category is not None:
            facts.append(Fact(category, item.group(2), item.group(1), raw.strip()))
    return facts


def find_memory_note(
    conn: apsw.Connection, folder: str, about: About, project: str | None, vault_id: Vaults = None
) -> dict[str, Any] | None:
    """The visible memory note of ``about`` (the person, or ``project``) in ``folder``, in scope; the
    oldest when several vaults have one."""
    scope, scope_params = VaultScope.of(vault_id).sql()
    match = "json_extract(n.frontmatter, '$.project') = ?" if about == "project" else "1"
    found = rows(
        conn,
        f"""SELECT n.id AS noteId, n.title, n.path, n.folder, n.size_bytes, n.vault_id, v.name AS vault, n.body
            FROM notes n
            JOIN vaults v ON v.id = n.vault_id
            WHERE n.folder = ? AND n.hidden_at IS NULL AND json_valid(n.frontmatter)
              AND json_extract(n.frontmatter, '$.memory') = ? AND {match} {scope}
            ORDER BY n.created_at, n.id LIMIT 1""",
        (folder, about, *((project,) if about == "project" else ()), *scope_params),
    )
    return found[0] if found else None


def read_memory(
    conn: apsw.Connection, folder: str | None, project: str | None, vault_id: Vaults = None, limit: int = 20
) -> dict[str, Any]:
    """The person's and the project's facts, newest first (the last written is the most current), at
    most ``limit`` each, with where to read the rest."""
    out: dict[str, Any] = {}
    if not folder:
        return out
    abouts: tuple[About, ...] = ("person", "project")
    for about in abouts:
        if about == "project" and not project:
            continue
        note = find_memory_note(conn, folder, about, project, vault_id)
        if note is None:
            continue
        facts = list(reversed(parse_facts(note["body"])))
        out[about] = {
            "noteId": note["noteId"],
            "path": note["path"],
            "facts": [f.to_json() for f in facts[:limit]],
            "more": max(0, len(facts) - limit),
        }
    return out
