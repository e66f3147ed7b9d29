"""The session note: one Markdown note per agent session, built deterministically from kms's own records.

``gather`` reads what kms recorded of a session (its row, provenance, reads, staged writes, searches,
captured items, files changed outside kms, what the host's hooks reported) into ``SessionFacts``;
``render`` turns those into the note's text, a pure function: the same records give the same bytes, so
writing the note again after a later event updates it in place and writing it twice changes nothing.

Privacy: a note hidden from agents (``notes.hidden_at``, or a path a privacy rule hides when the note is no
longer indexed) is never named: it is counted ("1 hidden note"). Text the host reported (the compaction
summary, the last message, the prompts when ``capture.prompts`` is on) is quoted as it was given, clipped.
The note's own writes (``kms_capture``, the capture actor) are not listed as changes of the session.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from typing import Any

import apsw

from server.activity import session_material
from server.activity.changes import FILE_CREATED, FILES_CHANGED, PROPERTIES_CHANGED, TEXT_INSERTED, TEXT_REMOVED
from server.activity.tool_names import (
    KMS_CAPTURE,
    KMS_EDIT,
    KMS_LINK,
    KMS_MOVE,
    KMS_MOVE_FOLDER,
    KMS_RENAME,
    KMS_RENAME_FOLDER,
    KMS_TRASH,
)
from server.humanize import utc_iso
from server.index.privacy import vault_rules
from server.index.recall_memory import DECISIONS_HEADING, NEXT_STEPS_HEADING, SESSION_TYPE
from server.store.db import rows
from server.vault.paths import strip_note_suffix
from server.vault.registry import list_vaults

NOTE_TYPE = SESSION_TYPE  # kms_recall finds these notes by it (server.index.recall_memory)
CAPTURE_TOOL = KMS_CAPTURE  # the agent's own capture call: it writes the session note, listed as captures
NOTE_TOOL = "session-note"  # kms's own capture (actor ``capture``): the note's own versions, never listed
LIST_CAP = 100  # items per list section; the rest are counted
SECTION_TITLES = {"decision": DECISIONS_HEADING, "finding": "Findings", "next": NEXT_STEPS_HEADING, "link": "Links"}
_VERBS = {
    FILE_CREATED: "created",
    TEXT_INSERTED: "added to",
    TEXT_REMOVED: "removed text from",
    PROPERTIES_CHANGED: "set properties of",
}
_TOOL_VERBS = {
    KMS_EDIT: "edited",
    KMS_RENAME: "renamed",
    KMS_MOVE: "moved",
    KMS_TRASH: "trashed",
    KMS_MOVE_FOLDER: "moved a folder with",
    KMS_RENAME_FOLDER: "renamed a folder with",
    KMS_LINK: "linked",
}


@dataclass
class SessionFacts:
    """What the note says, in the order it says it (lists already deduplicated and privacy-filtered)."""

    session_id: str
    project: str | None = None
    started_at: float | None = None
    ended_at: float | None = None
    end_reason: str | None = None
    host_session: str | None = None
    reads: list[dict[str, Any]] = field(default_factory=list)  # title, path, vault, count
    changes: list[dict[str, Any]] = field(default_factory=list)  # verb, title, path, vault, id, revertedBy
    staged: list[dict[str, Any]] = field(default_factory=list)  # id, tool, status, outcome, path
    refused: int = 0  # agent write calls that failed or were refused
    searches: list[dict[str, Any]] = field(default_factory=list)  # tool, query
    outside: list[dict[str, Any]] = field(default_factory=list)  # tool, file, vault, path
    captures: dict[str, list[str]] = field(default_factory=dict)
    compact_summary: str | None = None
    last_message: str | None = None
    prompts: list[str] = field(default_factory=list)
    hidden: int = 0  # hidden notes this session read, changed or touched (never named)
    vaults: int = 1  # how many vaults are named (a path is written vault:path when several are)

    @property
    def empty(self) -> bool:
        """A session that read, searched and wrote nothing (no note is written for it)."""
        return not (
            self.reads
            or self.searches
            or self.changes
            or self.staged
            or self.refused
            or self.outside
            or self.captures
            or self.hidden
        )


class _Privacy:
    """Which named notes agents cannot see: by note id when indexed, else by the vault's path rules."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn
        self._rules: dict[str, Any] = {}

    def hidden(self, vault: str | None, path: str | None, note_id: str | None = None) -> bool:
        if note_id:
            found = rows(self.conn, "SELECT hidden_at FROM notes WHERE id = ?", (note_id,))
            if found:
                return found[0]["hidden_at"] is not None
        if not vault or not path:
            return False
        found = rows(
            self.conn,
            "SELECT n.hidden_at FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE v.name = ? AND n.path = ?",
            (vault, path),
        )
        if found:
            return found[0]["hidden_at"] is not None
        rules = self._rules_of(vault)
        return rules is not None and rules.path_reason(path) is not None

    def _rules_of(self, vault: str) -> Any:
        if vault not in self._rules:
            v = next((v for v in list_vaults(self.conn) if v.name == vault), None)
            self._rules[vault] = vault_rules(self.conn, v.id, v.root) if v is not None else None
        return self._rules[vault]


def gather(conn: apsw.Connection, session_id: str, *, note_path: tuple[str, str] | None = None) -> SessionFacts:
    """Everything kms recorded of ``session_id`` that the note shows. ``note_path`` (vault, path): the
    session note itself, left out of the lists."""
    facts = SessionFacts(session_id)
    privacy = _Privacy(conn)
    found = rows(conn, "SELECT started_at, project, cwd FROM sessions WHERE id = ?", (session_id,))
    if found:
        facts.started_at, facts.project = found[0]["started_at"], found[0]["project"] or found[0]["cwd"]
    record = session_material.get(conn, session_id)
    if record is not None:
        facts.ended_at, facts.end_reason, facts.host_session = record.ended_at, record.end_reason, record.host_session
        facts.compact_summary, facts.last_message, facts.prompts = (
            record.compact_summary,
            record.last_message,
            record.prompts,
        )
        if note_path is None and record.note_vault and record.note_path:
            note_path = (record.note_vault, record.note_path)
    vault_names: set[str] = set()

    for r in rows(
        conn,
        "SELECT n.id, n.title, n.path, n.hidden_at, v.name AS vault, r.count FROM note_reads r "
        "JOIN notes n ON n.id = r.note_id JOIN vaults v ON v.id = n.vault_id "
        "WHERE r.session_id = ? ORDER BY r.first_at, n.path",
        (session_id,),
    ):
        if r["hidden_at"] is not None:
            facts.hidden += 1
        elif (r["vault"], r["path"]) != note_path:
            facts.reads.append({"title": r["title"], "path": r["path"], "vault": r["vault"], "count": r["count"]})
            vault_names.add(r["vault"])

    for r in rows(
        conn,
        "SELECT t.id, t.tool, t.status, t.change_kind, t.note_id, t.vault, t.path, t.title, "
        "(SELECT min(r.id) FROM tool_invocations r WHERE r.reverts_id = t.id AND r.status = 'success') AS reverted_by "
        "FROM tool_invocations t WHERE t.session_id = ? AND t.actor = 'agent' AND t.reverts_id IS NULL ORDER BY t.id",
        (session_id,),
    ):
        if r["tool"] == CAPTURE_TOOL:
            continue
        if r["status"] != "success":
            facts.refused += 1
            continue
        if r["change_kind"] is None:
            continue  # a call that changed nothing (a duplicate, an idempotent retry)
        if privacy.hidden(r["vault"], r["path"], r["note_id"]):
            facts.hidden += 1
            continue
        verb = _TOOL_VERBS.get(r["tool"]) if r["change_kind"] == FILES_CHANGED else _VERBS.get(r["change_kind"])
        facts.changes.append(
            {
                "verb": verb or "changed",
                "tool": r["tool"],
                "title": r["title"],
                "path": r["path"],
                "vault": r["vault"],
                "id": r["id"],
                "revertedBy": r["reverted_by"],
            }
        )
        if r["vault"]:
            vault_names.add(r["vault"])

    for r in rows(
        conn,
        "SELECT id, tool, status, outcome, files_json FROM pending_writes WHERE session_id = ? ORDER BY id",
        (session_id,),
    ):
        if r["tool"] in (CAPTURE_TOOL, NOTE_TOOL):
            continue
        files = [f for f in json.loads(r["files_json"] or "[]") if isinstance(f, dict)]
        shown = [f for f in files if not f.get("hidden") and not privacy.hidden(f.get("vault"), f.get("path"))]
        facts.hidden += len(files) - len(shown)
        first = shown[0] if shown else {}
        facts.staged.append(
            {
                "id": r["id"],
                "tool": r["tool"],
                "status": r["status"],
                "outcome": r["outcome"],
                "path": first.get("path"),
                "vault": first.get("vault"),
                "files": len(shown),
            }
        )

    facts.searches = _dedup(
        [{"tool": s["tool"], "query": s["query"]} for s in session_material.searches(conn, session_id)]
    )
    vault_by_id = {r["id"]: r["name"] for r in rows(conn, "SELECT id, name FROM vaults")}
    for f in session_material.files_for_session(conn, session_id):
        vault = vault_by_id.get(f.vault_id) if f.vault_id is not None else None
        if vault is not None and privacy.hidden(vault, f.path):
            facts.hidden += 1
            continue
        facts.outside.append({"tool": f.tool, "file": f.file, "vault": vault, "path": f.path})
    facts.outside = _dedup(facts.outside)

    for c in session_material.captures(conn, session_id):
        facts.captures.setdefault(c["kind"], []).append(c["text"])
    facts.vaults = max(1, len(vault_names))
    return facts


def _dedup(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = json.dumps(item, sort_keys=True)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


# ----------------------------------------------------------------------------- rendering


def note_title(facts: SessionFacts) -> str:
    """The session note's title (and, sanitised, its file name): when it started and its id."""
    when = time.strftime("%Y-%m-%d %H%M", time.gmtime(facts.started_at or 0))
    return f"Session {when} {facts.session_id}"


def _code(text: str) -> str:
    """Inline code that no backtick in ``text`` can end early."""
    flat = " ".join(text.split())
    longest = 0
    run = 0
    for ch in flat:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    ticks = "`" * (longest + 1)
    pad = " " if flat.startswith("`") or flat.endswith("`") else ""
    return f"{ticks}{pad}{flat}{pad}{ticks}"


def _quote(text: str) -> list[str]:
    """Host-reported text as a fenced block, longer than any backtick run in it: read as it was said, and
    nothing in it becomes a heading, a ``[[link]]`` or a ``#tag`` of the session note (a quoted message's
    wikilinks made the session note a backlink of every note the agent named)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return [f"{fence}text", *text.splitlines(), fence]


def _titled(item: dict[str, Any]) -> str:
    """`` (title)`` when the title says more than the file name does."""

    title, path = item.get("title"), item.get("path") or ""
    same = isinstance(title, str) and title.casefold() == strip_note_suffix(path.rsplit("/", 1)[-1]).casefold()
    return f" ({title})" if title and not same else ""


def _where(item: dict[str, Any], many_vaults: bool) -> str:
    path = item.get("path") or "?"
    return _code(f"{item['vault']}:{path}" if many_vaults and item.get("vault") else path)


def _yaml_text(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a valid YAML scalar


def _capped(lines: list[str], total: int) -> list[str]:
    if total > LIST_CAP:
        return [*lines[:LIST_CAP], f"- … and {total - LIST_CAP} more"]
    return lines


def render(facts: SessionFacts) -> str:
    """The note's whole text (frontmatter, title, sections), deterministic in ``facts``."""
    many = facts.vaults > 1
    front = ["---", f"type: {NOTE_TYPE}", f"session: {facts.session_id}"]
    if facts.project:
        front.append(f"project: {_yaml_text(facts.project)}")
    if facts.host_session:
        front.append(f"host_session: {_yaml_text(facts.host_session)}")
    if facts.started_at is not None:
        front.append(f"started: {utc_iso(facts.started_at)}")
    if facts.ended_at is not None:
        front.append(f"ended: {utc_iso(facts.ended_at)}")
    if facts.end_reason:
        front.append(f"reason: {_yaml_text(facts.end_reason)}")
    front += ["tags: [kms-session]", "---", ""]
    out = [*front, f"# {note_title(facts)}", ""]
    out.append("Written by kms from its own records of this session; `kms revert` takes a version back.")

    def section(title: str, lines: list[str]) -> None:
        if lines:
            out.extend(["", f"## {title}", "", *lines])

    for kind in ("decision", "finding", "next", "link"):
        items = facts.captures.get(kind, [])
        prefix = "- [ ] " if kind == "next" else "- "
        section(SECTION_TITLES[kind], [prefix + " ".join(t.split()) for t in items])
    section(
        "Notes changed",
        _capped(
            [
                f"- {c['verb']} {_where(c, many)}{_titled(c)}"
                + (
                    f" — reverted by #{c['revertedBy']}"
                    if c.get("revertedBy")
                    else f" — revert: `kms revert {c['id']}`"
                )
                for c in facts.changes
            ],
            len(facts.changes),
        ),
    )
    staged = [
        f"- #{s['id']} {s['tool']}: {s['status']}"
        + (f" ({s['outcome']})" if s.get("outcome") and s["outcome"] != s["status"] else "")
        + (f" on {_where(s, many)}" if s.get("path") else "")
        + (f" and {s['files'] - 1} more file(s)" if s.get("files", 0) > 1 else "")
        for s in facts.staged
    ]
    if facts.refused:
        staged.append(f"- {facts.refused} write call(s) refused or failed (see `kms log --session {facts.session_id}`)")
    section("Writes for approval and refused", staged)
    section(
        "Notes read",
        _capped(
            [
                f"- {_where(r, many)}{_titled(r)}" + (f" ×{r['count']}" if r.get("count", 1) > 1 else "")
                for r in facts.reads
            ],
            len(facts.reads),
        ),
    )
    section(
        "Searches",
        _capped([f"- {_code(s['query'])} ({s['tool']})" for s in facts.searches], len(facts.searches)),
    )
    section(
        "Files changed outside kms",
        _capped(
            [f"- {o['tool']}: " + (_where(o, many) if o.get("vault") else _code(o["file"])) for o in facts.outside],
            len(facts.outside),
        ),
    )
    if facts.hidden:
        section("Hidden notes", [f"- {facts.hidden} note(s) hidden from agents were touched (not named here)"])
    if facts.prompts:
        section("Prompts", [line for p in facts.prompts for line in (*_quote(p), "")][:-1])
    if facts.compact_summary:
        section("Summary at compaction", _quote(facts.compact_summary))
    if facts.last_message:
        section("Last message", _quote(facts.last_message))
    return "\n".join(out) + "\n"
