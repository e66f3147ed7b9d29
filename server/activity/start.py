"""``kms_start``: everything an agent needs to orient in one answer of at most ``START_BUDGET_TOKENS``.

What the session may do, the vaults in scope with their top folders, a compact map (hubs, recent
notes, tags), index health, what changed since this identity's previous session left, and the
person's and the project's memory. Every list is capped, and when the whole would still exceed the
budget (long titles, many vaults) the least useful lists give up whole items, in ``SHRINK_ORDER``,
until it fits; ``omitted`` says how many of each were left out and which tool lists them all.
The size is the existing token estimate (``tokenEstimate``: UTF-8 bytes / 4) of the JSON a host
receives.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import apsw

from server.activity.ratelimit import RateLimiter
from server.activity.tool_names import (
    KMS_GET_BACKLINKS,
    KMS_LIST_FOLDER,
    KMS_LIST_RECENT,
    KMS_LIST_TAGS,
    KMS_READ,
    KMS_SEARCH,
    KMS_START,
    KMS_STATUS,
)
from server.activity.visits import changes_since, previous_visit
from server.config.session_contract import SessionConfig
from server.config.tiers import TIERS, tier_enabled
from server.index import memory, orientation
from server.index.listing import list_recent
from server.index.recall_memory import open_steps
from server.index.records import estimate_tokens
from server.vault.scope import Vaults, VaultScope

START_BUDGET_TOKENS = 2_500
CAPS = {
    "folders": 12,
    "mostLinked": 8,
    "recent": 8,
    "tags": 25,
    "flagged": 5,
    "unresolved": 5,
    "changes": 15,
    "memory": 15,
    "vaults": 10,
    "allowlist": 20,
    "sessions": 3,
    "nextSteps": 5,
}
# (section path, the tool that lists it all), least useful first: what gives way when over budget
SHRINK_ORDER: list[tuple[tuple[str, ...], str]] = [
    (("map", "tags"), KMS_LIST_TAGS),
    (("lastSessions",), KMS_SEARCH),
    (("health", "unresolvedLinks", "top"), KMS_STATUS),
    (("health", "flagged", "notes"), KMS_STATUS),
    (("map", "mostLinked"), KMS_GET_BACKLINKS),
    (("map", "recent"), KMS_LIST_RECENT),
    (("session", "allowlist"), KMS_START),
    (("vaults", "*", "folders"), KMS_LIST_FOLDER),
    (("memory", "project", "facts"), KMS_READ),
    (("memory", "person", "facts"), KMS_READ),
    (("sinceLastVisit", "notes"), KMS_LIST_RECENT),
    (("vaults",), KMS_LIST_FOLDER),
]


def session_summary(
    conn: apsw.Connection, config: SessionConfig, project: str | None, semantic: dict[str, Any]
) -> dict[str, Any]:
    """What the session may do: its tiers, scope, allowed folders and writes left (``kms_start``'s first part)."""

    c = config
    out: dict[str, Any] = {
        "id": c.session_id,
        "project": project,
        "tiers": {t: tier_enabled(c, t) for t in TIERS},
        "vaultScope": c.vault or (list(c.token_vaults) or None),  # one vault's name, several, or None: all
    }
    if tier_enabled(c, "write"):
        counters = RateLimiter(c.per_minute, c.per_session).counters(conn, c.session_id)
        out["allowlist"] = list(c.allowlist)  # empty: every folder
        out["memoryFolder"] = c.memory_folder
        out["writes"] = {
            "perMinute": c.per_minute,
            "leftThisMinute": max(0, c.per_minute - counters["windowCount"]),
            "perSession": c.per_session,
            "leftThisSession": max(0, c.per_session - counters["total"]),
        }
    out["semanticSearch"] = semantic
    return out


def answer_tokens(answer: dict[str, Any]) -> int:
    """The token estimate of the answer as the MCP adapter sends it."""
    return estimate_tokens(len(json.dumps(answer, ensure_ascii=False, default=str).encode()))


def _compact(cards: list[dict[str, Any]], keys: tuple[str, ...], many_vaults: bool) -> list[dict[str, Any]]:
    return [{k: c[k] for k in keys if k in c and (k != "vault" or many_vaults)} for c in cards]


def start_answer(
    conn: apsw.Connection,
    *,
    session: dict[str, Any],
    vault_id: Vaults,
    project: str | None,
    session_id: str,
    memory_folder: str | None,
    watcher: bool | None,
    now: float | None = None,
    budget: int = START_BUDGET_TOKENS,
) -> dict[str, Any]:
    """The whole orientation; ``session`` (tiers, allowlist, budget, semantic state) comes from the caller."""
    at = time.time() if now is None else now
    vaults = orientation.vaults(conn, vault_id)
    many = len(vaults) > 1
    out_vaults = []
    for v in vaults[: CAPS["vaults"]]:
        folders, more = orientation.subfolders(conn, "", v["id"], limit=CAPS["folders"])
        root_notes = v["notes"] - sum(f["notes"] for f in folders)  # at the root, or in folders beyond the cap
        out_vaults.append(
            {
                "name": v["name"],
                "dialect": v["dialect"],
                "notes": v["notes"],
                "lastIndexedAt": v["lastIndexedAt"],
                "folders": [{"path": f["path"], "notes": f["notes"]} for f in folders],
                **({"moreFolders": more} if more else {}),
                **({"notesElsewhere": root_notes} if root_notes > 0 else {}),
            }
        )
    tags, tag_total = orientation.tags(conn, vault_id, CAPS["tags"])
    flagged, flagged_total = orientation.flagged(conn, vault_id, CAPS["flagged"])
    unresolved, unresolved_total = orientation.unresolved(conn, vault_id, CAPS["unresolved"])
    answer: dict[str, Any] = {
        "session": session,
        "vaults": out_vaults,
        "map": {
            "mostLinked": _compact(
                orientation.most_linked(conn, vault_id, CAPS["mostLinked"]),
                ("noteId", "title", "path", "vault", "backlinks"),
                many,
            ),
            "recent": _compact(
                list_recent(conn, CAPS["recent"], vault_id), ("noteId", "title", "path", "vault", "updatedAt"), many
            ),
            "tags": [{"tag": t["tag"], "count": t["count"]} for t in tags],
            "tagsInAll": tag_total,
        },
        "health": {
            "lastIndexedAt": max((v["lastIndexedAt"] or 0 for v in vaults), default=None) or None,
            "watcherRunning": watcher,
            "flagged": {
                "count": flagged_total,
                "notes": _compact(flagged, ("noteId", "path", "vault", "reason"), many),
            },
            "unresolvedLinks": {
                "count": unresolved_total,
                "top": [{"target": u["target"], "links": u["links"]} for u in unresolved],
            },
        },
        "sinceLastVisit": _since(conn, project, session_id, vault_id, at, many),
        "memory": memory.read_memory(conn, memory_folder, project, vault_id, CAPS["memory"]),
        "lastSessions": last_sessions(conn, project, session_id, vault_id),
        "next": "Browse with kms_list_folder, find with kms_search or kms_semantic_search, open a noteId with "
        "kms_read; kms_status for index health.",
    }
    if len(vaults) > CAPS["vaults"]:
        answer["moreVaults"] = len(vaults) - CAPS["vaults"]
    return fit(answer, budget)


def last_sessions(
    conn: apsw.Connection, project: str | None, session_id: str, vault_id: Vaults
) -> list[dict[str, Any]]:
    """The project's last sessions that left a session note (visible, in scope): where the note is, when
    the session started, and its open next steps as the note says them now (``type: session`` notes: a step
    the person ticked off is done)."""
    if not project:
        return []
    scope, scope_params = VaultScope.of(vault_id).sql()
    found = conn.execute(
        "SELECT n.id, n.path, s.started_at, n.body FROM session_records r "
        "JOIN sessions s ON s.id = r.session_id JOIN notes n ON n.id = r.note_id "
        f"WHERE s.project = ? AND r.session_id != ? AND n.hidden_at IS NULL{scope} "
        "ORDER BY s.started_at DESC LIMIT ?",
        (project, session_id, *scope_params, CAPS["sessions"]),
    ).fetchall()
    return [
        {
            "noteId": note_id,
            "path": path,
            "startedAt": started,
            "nextSteps": open_steps(str(body))[-CAPS["nextSteps"] :],
        }
        for note_id, path, started, body in found
    ]


def _since(
    conn: apsw.Connection, project: str | None, session_id: str, vault_id: Vaults, now: float, many: bool
) -> dict[str, Any]:
    if not project:
        return {
            "since": None,
            "reason": "this session has no project identity; pass project to kms_start (your "
            "working folder or repository) to see what changed since your last visit",
        }
    prev = previous_visit(conn, project, session_id, now)
    if prev is None:
        return {"since": None, "firstVisit": True, "project": project}
    changed = changes_since(conn, prev["leftAt"], vault_id, CAPS["changes"])
    for n in changed["notes"]:
        if not many:
            n.pop("vault", None)
    return {"since": prev["leftAt"], "previousSession": prev["id"], "project": project, **changed}


def _lists(answer: dict[str, Any], path: tuple[str, ...]) -> list[tuple[dict[str, Any], str]]:
    """(the dict holding the list, its key) for every list ``path`` names ('*' = each item of a list)."""
    holders: list[Any] = [answer]
    for part in path[:-1]:
        nxt: list[Any] = []
        for h in holders:
            value = h.get(part) if isinstance(h, dict) else None
            if part == "*" and isinstance(h, list):
                nxt += [x for x in h if isinstance(x, dict)]
            elif value is not None:
                nxt.append(value)
        holders = nxt
    if path[-1] == "*":
        return []
    return [(h, path[-1]) for h in holders if isinstance(h, dict) and isinstance(h.get(path[-1]), list)]


def fit(
    answer: dict[str, Any], budget: int, measure: Callable[[dict[str, Any]], int] = answer_tokens
) -> dict[str, Any]:
    """Drop whole items from the least useful lists until the answer is within ``budget`` tokens."""
    omitted: dict[str, Any] = {}
    answer["tokenEstimate"] = measure(answer)
    for path, tool in SHRINK_ORDER:
        for holder, key in _lists(answer, path):
            items = holder[key]
            while items and answer["tokenEstimate"] > budget:
                keep = len(items) // 2
                name = ".".join(p for p in path if p != "*")
                entry = omitted.setdefault(name, {"items": 0, "see": tool})
                entry["items"] += len(items) - keep
                del items[keep:]
                answer["omitted"] = omitted
                answer["tokenEstimate"] = measure(answer)
        if answer["tokenEstimate"] <= budget:
            break
    answer["tokenEstimate"] = measure(answer)
    return answer
