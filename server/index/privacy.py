"""Privacy by rule: which notes agents never see, decided in one place at index time.

A note is hidden when the person stamped it (``kms hide``: ``notes.hidden_stamp``) or when a rule
hides it (``notes.hidden_rule``, set by the indexer from ``Rules.reason``). ``notes.hidden_at`` is
the one effective flag every agent-facing query filters on (``hidden_at IS NULL``), so no query
needs to know the rules. The rules:

- frontmatter ``<privacy.frontmatter_key>: true`` (default ``private``) or ``visibility: private``;
- ``privacy.hide_folders``: gitignore-style folder globs from the vault root (``journal/**``);
- ``privacy.hide_tags``: tag globs (``private``, ``personal/*``);
- a vault-root ``.kmsignore`` in gitignore syntax (parsed by ``pathspec``);
- a symlinked file is hidden when the note it points at is (by any rule or stamp).

The rules are read from the settings file and the ``.kmsignore`` (cached on their mtimes, so the
write path pays a few ``stat`` calls). They are stored per vault (as JSON): when they change, every
note of the vault is judged again (``refresh``), in the first process that notices (an index, the
watcher's periodic check, ``kms config set``); the flag lives in the shared database, so every
running server sees it at once. A newly hidden note's chunks and vectors are deleted. Rules that
cannot be read (a broken settings file) never unhide anything: the stored ones are kept.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

import apsw

from server.config.settings import default_config_path, load_settings
from server.store.db import rows, write_tx
from server.vault.scope import Vaults, VaultScope

KMSIGNORE = ".kmsignore"
SYMLINK = "symlink"
TRUE_TEXT = {"true", "yes", "on", "1"}


def _gitignore(lines: list[str]) -> Any:
    """The compiled patterns, or None; pathspec is imported only by a vault that has path rules
    (``kms mcp`` judges every vault's rules at start, and most vaults have none)."""
    if not lines:
        return None
    # deferred: pathspec only for a vault with path rules (kms mcp judges every vault at start)
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines(lines)


@dataclass(frozen=True)
class Rules:
    """The privacy rules of one vault (settings plus its ``.kmsignore``)."""

    frontmatter_key: str | None = "private"
    hide_folders: tuple[str, ...] = ()
    hide_tags: tuple[str, ...] = ()
    kmsignore: tuple[str, ...] = ()  # the file's lines
    unreadable: str | None = field(default=None, compare=False)  # why these are only the defaults
    _folders: Any = field(default=None, compare=False, repr=False)
    _ignore: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        anchored = [_folder_pattern(p) for p in self.hide_folders]
        object.__setattr__(self, "_folders", _gitignore(anchored))
        object.__setattr__(self, "_ignore", _gitignore(list(self.kmsignore)))

    @property
    def fingerprint(self) -> str:
        """The rules as JSON: stored per vault, to notice a change and to fall back on (``vault_rules``)."""
        return json.dumps(
            {
                "frontmatter_key": self.frontmatter_key,
                "hide_folders": list(self.hide_folders),
                "hide_tags": [t.lower() for t in self.hide_tags],
                "kmsignore": list(self.kmsignore),
            }
        )

    @classmethod
    def from_fingerprint(cls, text: str) -> Rules | None:
        try:
            doc = json.loads(text)
            return cls(
                doc["frontmatter_key"], tuple(doc["hide_folders"]), tuple(doc["hide_tags"]), tuple(doc["kmsignore"])
            )
        except (ValueError, KeyError, TypeError):
            return None

    @property
    def any_set(self) -> bool:
        """Rules beyond the always-on frontmatter one (for doctor's bypass warning)."""
        return bool(self.hide_folders or self.hide_tags or self._ignore is not None)

    def path_reason(self, path: str) -> str | None:
        """The path rule that hides ``path`` (vault-relative), or None."""
        if self._folders is not None:
            hit = self._folders.check_file(path)
            if hit.include:
                return f"folder:{self.hide_folders[hit.index]}"
        if self._ignore is not None:
            hit = self._ignore.check_file(path)
            if hit.include:
                return f"kmsignore:{self._ignore.patterns[hit.index].pattern}"
        return None

    def reason(
        self, path: str, frontmatter: str | None, tags: str, link_to: str | None = None, raw: str | None = None
    ) -> str | None:
        """Why a note is hidden by rule, or None; the arguments are its ``notes`` columns
        (frontmatter as JSON text, tags space-separated) and, when its frontmatter could not be
        parsed, the raw start of the file (``raw``): a broken YAML block still hides its note."""
        why = self.path_reason(path) or (self.path_reason(link_to) if link_to else None)
        if why:
            return why
        if frontmatter and (why := self._frontmatter_reason(frontmatter)):
            return why
        if frontmatter is None and raw and (why := self._raw_reason(raw)):
            return why
        if tags and self.hide_tags:
            for tag in tags.split():
                for pattern in self.hide_tags:
                    if fnmatchcase(tag, pattern.lstrip("#").lower()):
                        return f"tag:{pattern}"
        return None

    def _frontmatter_reason(self, text: str) -> str | None:
        key = self.frontmatter_key
        if (not key or f'"{key}"' not in text) and '"visibility"' not in text:
            return None  # the common case costs a substring search, not a JSON parse
        try:
            fm = json.loads(text)
        except ValueError:
            return None
        if not isinstance(fm, dict):
            return None
        if key and key in fm:
            value = fm[key]
            if value is True or (isinstance(value, str) and value.strip().lower() in TRUE_TEXT):
                return f"frontmatter:{key}"
        vis = fm.get("visibility")
        if isinstance(vis, str) and vis.strip().lower() == "private":
            return "frontmatter:visibility"
        return None

    def _raw_reason(self, head: str) -> str | None:
        """Fail closed on a frontmatter block YAML could not read: a line that looks like the
        rule (``private: true``, ``visibility: private``) hides the note all the same."""
        block = head[3:].split("\n---", 1)[0] if head.startswith("---") else ""
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            key, value = key.strip().strip("'\"").lower(), value.strip().strip("'\"").lower()
            if sep and self.frontmatter_key and key == self.frontmatter_key.lower() and value in TRUE_TEXT:
                return f"frontmatter:{self.frontmatter_key}"
            if sep and key == "visibility" and value == "private":
                return "frontmatter:visibility"
        return None


def raw_head(root: Path, path: str) -> str | None:
    """The start of a note's file (for ``Rules.reason``'s ``raw``), None when unreadable."""
    try:
        with open(root / path, "rb") as fh:
            return fh.read(RAW_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


RAW_BYTES = 16_384  # how much of a file with broken frontmatter is searched for a privacy line


def _folder_pattern(glob: str) -> str:
    """``journal`` and ``journal/**`` both hide the folder's notes, at any depth, from the root."""
    glob = glob.strip().strip("/")
    if not glob.endswith("**"):
        glob += "/**"
    return "/" + glob


# ----------------------------------------------------------------------------- loading

_cache: dict[str, tuple[tuple, Rules]] = {}


def _version(path: Path) -> tuple[int, int] | None:
    """(mtime, size) of a file, None when it is missing: what tells a re-read is due (one stat)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def settings_path() -> Path:

    return default_config_path()


def read_kmsignore(root: Path) -> tuple[tuple[str, ...], str | None]:
    """The ``.kmsignore`` lines, and why it could not be read (a missing file is no problem)."""
    try:
        text = (root / KMSIGNORE).read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return (), None
    except OSError as e:
        return (), f"{root / KMSIGNORE}: {e.strerror}"
    return tuple(text.splitlines()), None


def rules_for(root: Path) -> Rules:
    """The rules for the vault at ``root``, re-read only when the settings file or the
    ``.kmsignore`` changed (their mtimes and sizes). When either cannot be read (or a privacy
    setting is invalid), the rules come back with ``unreadable`` set: see ``vault_rules``."""
    cfg = settings_path()
    stamp = (str(cfg), _version(cfg), _version(root / KMSIGNORE))  # every write asks: two stats
    known = _cache.get(str(root))
    if known and known[0] == stamp:
        return known[1]

    settings = load_settings(cfg, env={}, has_vault=True)
    lines, problem = read_kmsignore(root)
    problem = problem or next((p for p in settings.problems if "privacy." in p or "Cannot read" in p), None)
    rules = Rules(
        frontmatter_key=settings.get("privacy.frontmatter_key"),
        hide_folders=tuple(settings.get("privacy.hide_folders")),
        hide_tags=tuple(settings.get("privacy.hide_tags")),
        kmsignore=lines,
        unreadable=problem,
    )
    _cache[str(root)] = (stamp, rules)
    return rules


def vault_rules(conn: apsw.Connection, vault_id: int, root: Path) -> Rules:
    """The rules to judge a vault by. A settings file that cannot be parsed, an invalid privacy
    setting or an unreadable ``.kmsignore`` must never make hidden notes visible: the vault then
    keeps the rules it was last judged by (stored with it) until the problem is fixed."""
    rules = rules_for(root)
    if rules.unreadable is None:
        return rules
    stored = conn.execute("SELECT privacy_rules FROM vaults WHERE id = ?", (vault_id,)).fetchall()
    kept = Rules.from_fingerprint(str(stored[0][0])) if stored and stored[0][0] else None
    return kept or rules


# ----------------------------------------------------------------------------- applying

# the effective flag of an updated row: the stamp, else the rule (keeping when it first hid the note)
HIDDEN_AT_SQL = (
    "CASE WHEN hidden_stamp IS NOT NULL THEN hidden_stamp WHEN :hidden_rule IS NULL THEN NULL "
    "ELSE coalesce(hidden_at, :indexed_at) END"
)


def stamps_back(conn: apsw.Connection, vault_id: int) -> int:
    """The ``kms hide`` stamps of notes gone from this vault (``stamps_gone``, m038) given back to the new
    rows they belong to: the ``stamp_back`` trigger's rule for a vault written with triggers off (a cold
    index, ``kept_counts.suspended``). Each stamp goes to one note: the same path and bytes first, then
    the same path, then the same bytes, the latest gone first. Returns how many notes were stamped."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'stamps_gone'").fetchall():
        return 0  # a database at an older schema (opened without its migrations)
    found = conn.execute(
        """SELECT g.rowid, n.rid, g.stamp FROM stamps_gone g JOIN vaults v ON v.name = g.vault
        JOIN notes n ON n.vault_id = v.id AND n.hidden_stamp IS NULL
            AND (n.path = g.path OR n.content_hash = g.content_hash)
        WHERE v.id = ?
        ORDER BY n.path = g.path AND n.content_hash = g.content_hash DESC, n.path = g.path DESC, g.gone_at DESC""",
        (vault_id,),
    ).fetchall()
    used: set[Any] = set()
    stamped: set[Any] = set()
    for gone, rid, stamp in found:
        if gone in used or rid in stamped:
            continue
        used.add(gone)
        stamped.add(rid)
        conn.execute("UPDATE notes SET hidden_stamp = ?1, hidden_at = ?1 WHERE rid = ?2", (stamp, rid))
        conn.execute("DELETE FROM stamps_gone WHERE rowid = ?", (gone,))
    return len(stamped)


def purge_embeddings(conn: apsw.Connection, rids: list[int] | None = None) -> int:
    """Delete the chunks (and vectors no visible chunk shares) of hidden notes: of ``rids``, or all."""
    if rids is not None and not rids:
        return 0
    where = "rid IN (SELECT rid FROM notes WHERE hidden_at IS NOT NULL)"
    params: tuple = ()
    if rids is not None:
        marks = ",".join("?" * len(rids))
        where = f"rid IN (SELECT rid FROM notes WHERE hidden_at IS NOT NULL AND rid IN ({marks}))"
        params = tuple(rids)
    hashes = [r[0] for r in conn.execute(f"SELECT DISTINCT hash FROM chunks WHERE {where}", params)]
    conn.execute(f"DELETE FROM note_embed_state WHERE {where}", params)
    if not hashes:
        return 0
    conn.execute(f"DELETE FROM chunks WHERE {where}", params)
    conn.executemany(
        "DELETE FROM embeddings WHERE hash = ? AND NOT EXISTS (SELECT 1 FROM chunks WHERE hash = ?)",
        [(h, h) for h in hashes],
    )
    return len(hashes)


def sync_symlinks(conn: apsw.Connection, vault_id: int) -> None:
    """A symlinked file follows the note it points at: hidden while that note is hidden. Free in a
    vault without symlinks (the partial ``notes_link_to`` index holds only symlinks; ``+vault_id``
    keeps SQLite on it)."""
    if not conn.execute(
        "SELECT 1 FROM notes WHERE link_to IS NOT NULL AND +vault_id = ? LIMIT 1", (vault_id,)
    ).fetchall():
        return
    now = time.time()
    conn.execute(
        """UPDATE notes SET hidden_rule = ?, hidden_at = coalesce(hidden_at, ?)
           WHERE link_to IS NOT NULL AND +vault_id = ? AND hidden_rule IS NULL
             AND link_to IN (SELECT path FROM notes WHERE vault_id = ? AND hidden_at IS NOT NULL)""",
        (SYMLINK, now, vault_id, vault_id),
    )
    conn.execute(
        """UPDATE notes SET hidden_rule = NULL, hidden_at = hidden_stamp
           WHERE link_to IS NOT NULL AND +vault_id = ? AND hidden_rule = ?
             AND link_to NOT IN (SELECT path FROM notes WHERE vault_id = ? AND hidden_at IS NOT NULL)""",
        (vault_id, SYMLINK, vault_id),
    )
    purge_embeddings(
        conn,
        [
            r[0]
            for r in conn.execute(
                "SELECT rid FROM notes WHERE link_to IS NOT NULL AND +vault_id = ? AND hidden_at IS NOT NULL",
                (vault_id,),
            )
        ],
    )


def apply_rules(conn: apsw.Connection, vault_id: int, root: Path, rules: Rules) -> int:
    """Judge every note of the vault by ``rules`` (inside the caller's write transaction);
    record them; return how many notes changed visibility."""
    now = time.time()
    changes = []
    for rid, path, fm, tags, link_to, old, flagged in conn.execute(
        "SELECT rid, path, frontmatter, tags, link_to, hidden_rule, fm_error IS NOT NULL FROM notes WHERE vault_id = ?",
        (vault_id,),
    ):
        raw = raw_head(root, path) if flagged and fm is None else None
        new = rules.reason(path, fm, tags, link_to, raw)
        if old == SYMLINK and new is None:
            continue  # sync_symlinks decides: the target may still be hidden
        if new != old:
            changes.append({"rid": rid, "hidden_rule": new, "indexed_at": now})
    conn.executemany(
        f"UPDATE notes SET hidden_rule = :hidden_rule, hidden_at = {HIDDEN_AT_SQL} WHERE rid = :rid", changes
    )
    sync_symlinks(conn, vault_id)
    purge_embeddings(conn, [c["rid"] for c in changes if c["hidden_rule"]])
    conn.execute("UPDATE vaults SET privacy_rules = ? WHERE id = ?", (rules.fingerprint, vault_id))
    return len(changes)


def refresh(conn: apsw.Connection, vault_id: int, root: Path) -> bool:
    """Re-judge the vault's notes if its rules changed since they were last judged."""
    rules = vault_rules(conn, vault_id, root)
    stored = conn.execute("SELECT privacy_rules FROM vaults WHERE id = ?", (vault_id,)).fetchall()
    if not stored or stored[0][0] == rules.fingerprint:
        return False
    with write_tx(conn):
        again = conn.execute("SELECT privacy_rules FROM vaults WHERE id = ?", (vault_id,)).fetchall()
        if not again or again[0][0] == rules.fingerprint:
            return False  # another process was first
        apply_rules(conn, vault_id, root, rules)
    return True


def refresh_all(conn: apsw.Connection) -> int:
    """``refresh`` every registered vault whose folder exists; how many were re-judged."""
    found = conn.execute("SELECT id, root FROM vaults").fetchall()
    return sum(
        refresh(conn, int(vid), Path(str(root)))  # type: ignore[arg-type]  # INTEGER PRIMARY KEY
        for vid, root in found
        if Path(str(root)).is_dir()
    )


STAMP = "kms hide"


def hidden_counts(conn: apsw.Connection, vault_id: Vaults = None) -> dict[str, int]:
    """How many notes each rule hides (``folder:journal/**``, ``tag:private``, ...; ``kms hide`` for the
    person's stamps), most first. A stamped note that a rule also hides counts under both."""
    scope, params = VaultScope.of(vault_id).sql("vault_id")
    found = conn.execute(
        f"""SELECT why, count(*) FROM (
              SELECT hidden_rule AS why FROM notes WHERE hidden_rule IS NOT NULL {scope}
              UNION ALL SELECT ? FROM notes WHERE hidden_stamp IS NOT NULL {scope})
            GROUP BY why ORDER BY count(*) DESC, why""",
        (*params, STAMP, *params),
    ).fetchall()
    return {str(why): int(n) for why, n in found}  # type: ignore[arg-type]  # count(*): an int


def hidden_notes(conn: apsw.Connection, vault_id: Vaults = None) -> list[dict[str, Any]]:
    """Every hidden note (for the person: ``kms hidden``) with the reasons it is hidden."""

    scope, params = VaultScope.of(vault_id).sql()
    found = rows(
        conn,
        f"""SELECT n.id AS noteId, v.name AS vault, n.path, n.title, n.hidden_rule, n.hidden_stamp
                          FROM notes n JOIN vaults v ON v.id = n.vault_id
                          WHERE n.hidden_at IS NOT NULL {scope} ORDER BY v.name, n.path""",
        params,
    )
    for r in found:
        rule, stamp = r.pop("hidden_rule"), r.pop("hidden_stamp")
        r["why"] = [w for w in (STAMP if stamp is not None else None, rule) if w]
    return found


def privacy_report(conn: apsw.Connection, settings: Any) -> dict[str, Any]:
    """``kms doctor``: how many notes each rule hides, and a warning when a built-in server that reads
    the vault folders itself (the filesystem server) is on for sessions while privacy rules are set:
    it would show agents the notes kms keeps from them."""
    counts = hidden_counts(conn)
    configured = bool(settings.get("privacy.hide_folders") or settings.get("privacy.hide_tags")) or any(
        (Path(str(root)) / KMSIGNORE).exists() for (root,) in conn.execute("SELECT root FROM vaults")
    )
    warning = None
    if settings.active("servers.filesystem.enabled") and (counts or configured):
        warning = (
            f"the filesystem server is on for sessions (servers.filesystem.enabled) while privacy rules "
            f"hide {sum(counts.values())} note(s): it reads the vault folders directly, bypassing them "
            "(kms config set servers.filesystem.enabled off)"
        )
    return {"hiddenBy": counts, "warning": warning}
