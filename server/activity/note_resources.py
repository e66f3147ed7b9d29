"""Notes as MCP resources, for the person's ``@`` mentions: listing, completing and reading them.

A note's address is ``kms://<vault>/<path>`` (each part percent-encoded, ``/`` kept in the path); the
template hosts fill in is ``kms://{vault}/{+path}``. Nothing here is new policy: the list and the
completions show visible notes in the session's vault scope only, and a read is ``kms_read``'s (the one
name resolver, hidden notes and other vaults as if absent, the summary block never in the text, the
payload cap) and is recorded as the session's read. Hosts list on every connect, so the list is the
most recent notes only, a bounded few pages: never the whole vault.
"""

from __future__ import annotations

import bisect
import json
import re
import threading
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import apsw

from server.activity.agent_session import AgentSession
from server.errors import KmsError
from server.index.listing import HIDDEN_RIDS, decode_cursor, encode_cursor
from server.index.note_data import CLOSE, OPEN, fence
from server.index.notes import VISIBLE, find_note, get_note
from server.store.db import rows
from server.vault.scope import Vaults, VaultScope

SCHEME = "kms://"
MIME = "text/markdown"
TEMPLATE = "kms://{vault}/{+path}"
PAGE = 50  # resources per resources/list page
LISTED = 100  # the most recent notes listed in all (hosts list on every connect)
MAX_COMPLETIONS = 100  # the protocol's ceiling per completion answer
FUZZY_CUTOFF = 75  # rapidfuzz partial_ratio below which a path or title is no match
FUZZY_BELOW = 10  # fewer notes than this hold the typed words: look for near matches too


def note_uri(vault: str, path: str) -> str:
    return f"{SCHEME}{quote(vault, safe='')}/{quote(path, safe='/')}"


def parse_uri(uri: str) -> tuple[str, str]:
    """(vault, path) of a note's address; ``invalid-input`` for anything else."""
    if not uri.startswith(SCHEME) or "/" not in uri[len(SCHEME) :]:
        raise KmsError("invalid-input", f"{uri!r} is not a kms note address: kms://<vault>/<path>")
    vault, _, path = uri[len(SCHEME) :].partition("/")
    vault, path = unquote(vault), unquote(path)
    if not vault or not path.strip("/"):
        raise KmsError("invalid-input", f"{uri!r} is not a kms note address: kms://<vault>/<path>")
    return vault, path


def _scope(vault_id: Vaults) -> tuple[str, tuple[Any, ...]]:
    return VaultScope.of(vault_id).sql()


@dataclass(frozen=True)
class NoteResource:
    """One listed note: its address, path, title, text size and when it changed (epoch seconds)."""

    uri: str
    path: str
    title: str
    vault: str
    size: int
    updated_at: float


def list_notes(
    conn: apsw.Connection, vault_id: Vaults, cursor: str | None = None
) -> tuple[list[NoteResource], str | None]:
    """A page of the most recent visible notes in scope (``notes_recent`` order) and the next page's cursor;
    ``LISTED`` in all, whatever the vault holds."""
    offset = 0
    if cursor:
        data = decode_cursor(cursor)
        if data.get("t") != "resources" or not isinstance(data.get("o"), int) or not 0 <= data["o"] < LISTED:
            raise KmsError("invalid-input", "cursor is not one this server issued; omit it to start over")
        offset = data["o"]
    where, params = _scope(vault_id)
    count = min(PAGE, LISTED - offset)
    found = rows(
        conn,
        f"""SELECT n.path, n.title, v.name AS vault, length(CAST(n.body AS BLOB)) AS size, n.updated_at
                           FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE {VISIBLE} {where}
                           ORDER BY n.updated_at DESC, n.path ASC, n.id ASC LIMIT ? OFFSET ?""",
        (*params, count + 1, offset),
    )
    page = [
        NoteResource(note_uri(r["vault"], r["path"]), r["path"], r["title"], r["vault"], r["size"], r["updated_at"])
        for r in found[:count]
    ]
    more = len(found) > count and offset + count < LISTED
    return page, encode_cursor({"t": "resources", "o": offset + count}) if more else None


@dataclass(frozen=True)
class NoteText:
    """A note read as a resource: its Markdown body (cut at the cap, saying how to read on) and identity."""

    uri: str
    text: str
    note_id: str
    title: str
    version: str
    truncated: bool


def _in_scope_vault(conn: apsw.Connection, name: str, vault_id: Vaults) -> int:
    found = conn.execute("SELECT id FROM vaults WHERE name = ?", (name,)).fetchall()
    if not found or not VaultScope.of(vault_id).sees(int(found[0][0])):  # type: ignore[arg-type]  # another vault: as if absent
        raise KmsError("not-found", f"no note at kms://{quote(name, safe='')}/… in this session's notes")
    return int(found[0][0])  # type: ignore[arg-type]  # vaults.id: INTEGER PRIMARY KEY


ANSWER_ROOM = 1_000  # bytes of the answer besides the text: its address, _meta, the read-on line


def _json_bytes(text: str) -> int:
    return len(json.dumps(text, ensure_ascii=False).encode())


def _fitting(body: str, budget: int) -> str:
    """The longest start of ``body`` (shortened by quarters) whose JSON encoding fits ``budget`` bytes."""
    end = min(len(body), budget)
    while end > 0 and _json_bytes(body[:end]) > budget:
        end = end * 3 // 4
    return body[:end]


def read_note(conn: apsw.Connection, session: AgentSession, uri: str, vault_id: Vaults, cap_bytes: int) -> NoteText:
    """The note ``uri`` names, as ``kms_read`` would serve it, recorded as this session's read."""
    vault, path = parse_uri(uri)
    in_vault = _in_scope_vault(conn, vault, vault_id)
    exact = conn.execute(
        f"SELECT n.id FROM notes n WHERE n.vault_id = ? AND n.path = ? AND {VISIBLE}", (in_vault, path)
    ).fetchall()  # the address as listed; else kms_read's resolver
    note_id = str(exact[0][0]) if exact else str(find_note(conn, path, vault_id=in_vault)["id"])
    note = get_note(conn, note_id, vault_id=in_vault)
    body: str = note["body"]  # stored without the summary block
    text, truncated = fence(body), False  # note text is data (``note_data``): fenced, what kms adds outside
    if _json_bytes(text) > cap_bytes - ANSWER_ROOM:  # the cap is on the answer, as the host receives it
        cut = _fitting(body, cap_bytes - ANSWER_ROOM - _json_bytes(OPEN + CLOSE))
        cursor = encode_cursor({"n": note["id"], "o": len(cut), "v": note["content_hash"]})  # kms_read's
        text, truncated = (
            (
                f"{fence(cut)}\n\n[kms: the note goes on ({len(body) - len(cut)} more characters): "
                f"kms_read noteId={note['id']} cursor={cursor}]"
            ),
            True,
        )
    session.reads.record([note["id"]])
    return NoteText(
        note_uri(note["vault"], note["path"]), text, note["id"], note["title"], note["content_hash"], truncated
    )


# completion ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Completion:
    values: list[str]
    total: int
    has_more: bool


@dataclass
class _Choices:
    """The visible notes of one scope as lower-cased ``path title`` strings, for fuzzy matching; valid while
    the connection that read them sees no commit (``PRAGMA data_version``) and made none itself."""

    conn: weakref.ref[apsw.Connection]  # the reading thread's: a stamp means nothing on another connection
    stamp: tuple[int, int]
    rids: list[int]
    texts: list[str]
    joined: str = ""  # every text, one a line: one C-speed search finds the notes holding a word
    starts: list[int] = field(default_factory=list)  # where each text begins in ``joined``

    def __post_init__(self) -> None:
        self.joined = "\n".join(self.texts) + "\n"
        at = 0
        for text in self.texts:
            self.starts.append(at)
            at += len(text) + 1

    def holding(self, words: list[str], enough: int) -> list[int]:
        """The texts holding every word (in index order, so by path), at most ``enough``."""
        rarest = max(words, key=len)
        found: list[int] = []
        last = -1
        for m in re.finditer(re.escape(rarest), self.joined):
            i = bisect.bisect_right(self.starts, m.start()) - 1
            if i != last and all(w in self.texts[i] for w in words):
                found.append(i)
                if len(found) >= enough:
                    break
            last = i
        return found


_CHOICES: dict[tuple[Path, VaultScope], _Choices] = {}
_CHOICES_LOCK = threading.Lock()


def _stamp(conn: apsw.Connection) -> tuple[int, int]:
    return int(conn.execute("PRAGMA data_version").fetchall()[0][0]), conn.total_changes()  # type: ignore[arg-type]


def _choices(conn: apsw.Connection, db_path: Path, vault_id: Vaults) -> _Choices:
    """From the covering indexes only (paths from the (vault, path) index, titles from ``note_keys``)."""
    stamp, vault_id = _stamp(conn), VaultScope.of(vault_id)
    with _CHOICES_LOCK:
        cached = _CHOICES.get((db_path, vault_id))
    if cached is not None and cached.conn() is conn and cached.stamp == stamp:
        return cached
    where, params = _scope(vault_id)
    paths = conn.execute(
        f"SELECT n.rid, n.path FROM notes n WHERE n.rid NOT IN {HIDDEN_RIDS} {where}", params
    ).fetchall()
    keys_where, params = vault_id.sql("vault_id")
    titles: dict[Any, list[str]] = {}  # a note's title and its file's stem
    for rid, key in conn.execute(f"SELECT rid, key FROM note_keys WHERE kind = 2 {keys_where}", params):
        titles.setdefault(rid, []).append(str(key))
    rids, texts = [], []
    for rid, path in paths:
        text = str(path).lower()
        for title in titles.get(rid, ()):
            if title not in text:
                text = f"{text} {title}"
        texts.append(text)
        rids.append(int(rid))  # type: ignore[arg-type]
    made = _Choices(weakref.ref(conn), stamp, rids, texts)
    with _CHOICES_LOCK:
        _CHOICES[(db_path, vault_id)] = made
    return made


def complete_vault(conn: apsw.Connection, value: str, vault_id: Vaults) -> Completion:
    where, params = VaultScope.of(vault_id).sql("id")
    names = [str(r[0]) for r in conn.execute(f"SELECT name FROM vaults WHERE 1{where} ORDER BY name", params)]
    values = [n for n in names if n.lower().startswith(value.strip().lower())]
    return Completion(values[:MAX_COMPLETIONS], len(values), len(values) > MAX_COMPLETIONS)


def complete_path(conn: apsw.Connection, db_path: Path, value: str, vault_id: Vaults) -> Completion:
    """Note paths for a partial path or title, best first: the most recent notes for nothing typed; else the
    notes whose path or title holds every typed word (one that starts with what was typed first, then the
    shorter), and when those are few, the near matches by rapidfuzz's ``partial_ratio`` (a typo still finds
    the note)."""
    where, params = _scope(vault_id)
    query = value.strip().lower()
    if not query:
        found = rows(
            conn,
            f"SELECT n.path FROM notes n WHERE {VISIBLE} {where} ORDER BY n.updated_at DESC, n.path, n.id LIMIT ?",
            (*params, MAX_COMPLETIONS + 1),
        )
        values = [r["path"] for r in found]
        return Completion(values[:MAX_COMPLETIONS], len(values), len(values) > MAX_COMPLETIONS)
    choices = _choices(conn, db_path, vault_id)
    held = choices.holding(query.split(), MAX_COMPLETIONS * 3)
    ranked = sorted(held, key=lambda i: (not choices.texts[i].startswith(query), len(choices.texts[i]), i))
    total = len(held)
    if len(held) < FUZZY_BELOW:  # few notes hold the words as typed: a typo, or words out of order
        # deferred: rapidfuzz only for such a completion, not at the server's start
        from rapidfuzz import fuzz, process

        hits = process.extract(
            query,
            choices.texts,
            scorer=fuzz.partial_ratio,
            processor=None,
            limit=MAX_COMPLETIONS,
            score_cutoff=FUZZY_CUTOFF,
        )
        seen = set(held)
        fuzzy = [h for h in hits if h[2] not in seen]
        ranked += [h[2] for h in sorted(fuzzy, key=lambda h: (-round(h[1]), len(choices.texts[h[2]]), h[2]))]
        total += len(fuzzy)
    rids = [choices.rids[i] for i in ranked[:MAX_COMPLETIONS]]
    if not rids:
        return Completion([], 0, False)
    current = {
        r["rid"]: r["path"]
        for r in rows(  # still visible and in scope now
            conn,
            f"SELECT n.rid, n.path FROM notes n WHERE n.rid IN ({','.join('?' * len(rids))}) AND {VISIBLE} {where}",
            (*rids, *params),
        )
    }
    values = [current[rid] for rid in rids if rid in current]
    return Completion(values, total, total > len(values))


def complete_uri_path(conn: apsw.Connection, db_path: Path, value: str, vault_id: Vaults) -> Completion:
    """``complete_path`` for the template's ``path``: each value percent-encoded as ``note_uri`` writes it. A
    host puts the value into the URI as it is (Claude Code's ``@`` mention), where a raw space ends the URI
    before the note's name does; a template expander keeps the encoded triplets (``{+path}``)."""
    found = complete_path(conn, db_path, unquote(value), vault_id)
    return Completion([quote(v, safe="/") for v in found.values], found.total, found.has_more)


def complete_title(conn: apsw.Connection, db_path: Path, value: str, vault_id: Vaults) -> Completion:
    """Note titles for a partial topic (the ``recall`` prompt's argument), by the same fuzzy match."""
    paths = complete_path(conn, db_path, value, vault_id)
    if not paths.values:
        return paths
    where, params = _scope(vault_id)
    titles = {
        r["path"]: r["title"]
        for r in rows(
            conn,
            f"SELECT n.path, n.title FROM notes n WHERE n.path IN ({','.join('?' * len(paths.values))}) "
            f"AND {VISIBLE} {where}",
            (*paths.values, *params),
        )
    }
    values = list(dict.fromkeys(titles[p] for p in paths.values if p in titles))
    return Completion(values, paths.total, paths.has_more)
