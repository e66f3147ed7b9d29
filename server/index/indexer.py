"""Keep the index in step with the files: scan, compare with the manifest, parse what changed.

The files are the truth and indexing only reads them. The manifest is the notes row itself
(mtime, size, content hash), so an unchanged vault costs one ``stat`` per file. A note is
removed only when its file is positively gone: a folder or file that cannot be read keeps
its notes. Rows are updated in place, so note ids and DB-only state (hidden stamps, and
everything keyed by note id) survive a full reindex; a new path whose content hash equals a
vanished note's is a rename and keeps that note's id.

Reading files is ``server.index.records``; writing rows is ``server.index.writer``.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import Counter
from collections.abc import Collection, Container

import apsw

from server.index import conflicts, manifest_index, note_versions
from server.index.cold import HistoryPlan, OnSearchable, history_plan, in_two_phases, incomplete, index_cold
from server.index.incremental import TOUCHED
from server.index.link_resolve import affected_keys, resolve_links, resolve_named, sync_attachments
from server.index.privacy import (
    Rules,
    apply_rules,
    purge_embeddings,
    refresh,
    stamps_back,
    sync_symlinks,
    vault_rules,
)
from server.index.records import FileRecord, Progress, gc_paused, read_all, scan
from server.index.report import IndexReport
from server.index.writer import (
    ChangedNotes,
    NewNotes,
    StoredRows,
    delete_note_row,
    write_children,
)
from server.store import kept_counts
from server.store import version_blobs as blobs
from server.store.db import checkpoint_and_truncate, write_tx
from server.store.registrations import save_registrations
from server.vault.conflict_names import CopyOf
from server.vault.registry import Vault, get_vault, list_vaults, settle_dialect, settle_sync, settle_workspace


@gc_paused()  # a tuple a file from the scan and the manifest: no full collection (a pause all threads wait on)
def index_vault(
    conn: apsw.Connection,
    vault: Vault,
    *,
    full: bool = False,
    progress: Progress | None = None,
    how: str = note_versions.HOW_INDEX,
    on_searchable: OnSearchable | None = None,
) -> IndexReport:
    """Bring one vault's index up to date with its files (``full`` re-parses every file); every version
    it sees goes to the note's history (``how``: who looked, ``kms index`` or the watcher).

    A vault with no note yet is indexed in two transactions (``server.index.cold``), ``on_searchable``
    called between them; a vault a crash left between the two is completed here, as a full reindex."""
    started = time.perf_counter()
    report = IndexReport(vault=vault.name)
    if not vault.root.is_dir():
        report.errors.append(f"vault folder {vault.root} is missing or unreadable; index left as it was")
        return report
    vault, full = _settle(conn, vault, full)
    completing = _left_searchable(conn, vault.id)
    attachments: list[str] = []
    symlinks: set[str] = set()
    files, unreadable, errors = scan(vault.root, attachments, symlinks)
    copies = conflicts.split_copies(conflicts.names_for(vault), files, attachments)  # never notes
    report.errors.extend(errors)
    report.scanned = len(files)
    manifest = manifest_index.read(conn, vault.id)
    todo = _todo(files, manifest, full or completing)
    report.unchanged = len(files) - len(todo)
    gone = _gone(vault, files, manifest, unreadable, copies)
    rules = vault_rules(conn, vault.id, vault.root)
    if not todo and not gone and not completing:
        _nothing_changed(conn, vault, attachments, copies, files, full, how)
    elif (
        manifest
        or not in_two_phases(conn)
        or not index_cold(
            conn,
            vault,
            todo,
            report,
            attachments=attachments,
            symlinks=symlinks,
            rules=rules,
            progress=progress,
            how=how,
            on_searchable=on_searchable,
            started=started,
        )
    ):
        _Pass(conn, vault, report, rules, how, full=full or completing, completing=completing).run(
            todo, gone, manifest, attachments, symlinks, progress, copies, files
        )
        report.completed = completing
    elif copies:  # indexed cold: the conflict copies it found open their conflicts
        with write_tx(conn):
            conflicts.settle_copies(conn, vault, copies, files)
    report.seconds = time.perf_counter() - started
    return report


def _settle(conn: apsw.Connection, vault: Vault, full: bool) -> tuple[Vault, bool]:
    """The vault's dialect and Dendron workspace as its files say now; ``full`` when the vault was indexed
    before dialects (every note is read again by its dialect's rules)."""
    vault, unset = settle_dialect(conn, vault)
    vault = settle_sync(conn, vault)
    if settle_workspace(conn, vault):  # its dendron.yml names other vaults now (or was read the first time)
        with write_tx(conn):
            resolve_named(conn)
    return vault, full or unset


def _left_searchable(conn: apsw.Connection, vault_id: int) -> bool:
    """Whether a crash left the vault between a cold index's two transactions (``server.index.cold``).
    Asked again under the write lock when it says so: a cold index still running in another process holds
    the lock until it completes."""
    if not in_two_phases(conn) or vault_id not in incomplete(conn):
        return False
    with write_tx(conn):
        return vault_id in incomplete(conn)


def _todo(
    files: dict[str, tuple[int, int]], manifest: dict[str, tuple[int, int, int, str]], full: bool
) -> list[tuple[str, int, int]]:
    """The files to read: every one (``full``), else those new or with another mtime or size."""
    return [
        (path, mtime_ns, size)
        for path, (mtime_ns, size) in files.items()
        if full or (known := manifest.get(path)) is None or known[1] != mtime_ns or known[2] != size
    ]


def _gone(
    vault: Vault,
    files: dict[str, tuple[int, int]],
    manifest: dict[str, tuple[int, int, int, str]],
    unreadable: list[str],
    copies: Container[str] = (),
) -> dict[str, tuple[int, str]]:
    """path -> (rid, '') of the notes whose file is positively gone (its hash is read under the write lock),
    or that is a conflict copy now (``copies``: one indexed as a note before goes)."""
    gone: dict[str, tuple[int, str]] = {}
    for path in [p for p in manifest if p not in files]:
        rid, _m, _s, chash = manifest[path]
        if any(u == "" or path == u or path.startswith(u + "/") for u in unreadable):
            continue
        if path not in copies and os.path.lexists(os.path.join(vault.root, path)):
            continue  # still there but not indexable now (e.g. permissions): keep it
        gone[path] = (rid, chash)
    return gone


def _nothing_changed(
    conn: apsw.Connection,
    vault: Vault,
    attachments: list[str],
    copies: dict[str, CopyOf],
    notes: Container[str],
    full: bool,
    how: str,
) -> None:
    """No note to read or remove: the attachments, the conflict copies, the index date, the history's missing
    first versions."""
    if not full:
        # looked for before the write lock (a scan of every note): the calls that write wait on it
        lacking = (
            note_versions.active(conn) and how == note_versions.HOW_INDEX and note_versions.missing(conn, vault.id)
        )
        with write_tx(conn):
            sync_attachments(conn, vault.id, attachments)
            conflicts.settle_copies(conn, vault, copies, notes)
            conn.execute("UPDATE vaults SET last_indexed_at = ? WHERE id = ?", (time.time(), vault.id))
            if lacking:
                note_versions.backfill(conn, vault.id, vault.root)
    refresh(conn, vault.id, vault.root)


class _Pass:
    """One transaction bringing a vault's notes in line with the files read: new, changed, renamed and
    gone notes, their children and links, history, privacy. ``completing``: the vault was left between a
    cold index's two transactions; this full pass completes it (counts recounted, first versions kept)."""

    def __init__(
        self,
        conn: apsw.Connection,
        vault: Vault,
        report: IndexReport,
        rules: Rules,
        how: str,
        *,
        full: bool,
        completing: bool,
    ) -> None:
        self.conn, self.vault, self.report, self.rules, self.how = conn, vault, report, rules, how
        self.full, self.completing = full, completing
        self.keys: set[str] = set()
        self.srcs: set[int] = set()
        self.seen: list[note_versions.Seen] = []
        self.hidden_rids: list[int] = []
        self.now = time.time()
        self.keeping = note_versions.active(conn)
        self.cold = False

    def run(
        self,
        todo: list[tuple[str, int, int]],
        gone: dict[str, tuple[int, str]],
        manifest: dict[str, tuple[int, int, int, str]],
        attachments: list[str],
        symlinks: Collection[str],
        progress: Progress | None,
        copies: dict[str, CopyOf],
        notes: Container[str],
    ) -> None:
        conn, vault = self.conn, self.vault
        self.cold = not manifest  # (a cold index that found the vault indexed by another process meanwhile)
        plan = history_plan(conn, vault, todo, new=self.cold)
        with write_tx(conn), contextlib.ExitStack() as counting:
            # re-read under the write lock: another process's watcher may have added, changed or
            # removed rows since the scan (inserting a path twice would break UNIQUE(vault_id, path))
            current = manifest_index.read(conn, vault.id)
            if current != manifest:
                gone = {p: g for p, g in gone.items() if p in current and current[p][0] == g[0]}
                manifest = current
            if not current or self.completing:  # the kept counts are recounted once at the end
                counting.enter_context(kept_counts.suspended(conn))
            manifest = manifest_index.with_hashes(conn, manifest, [*(p for p, _m, _s in todo), *gone])
            gone = {p: (rid, manifest[p][3]) for p, (rid, _h) in gone.items()}
            self.renames = _Renames(conn, gone)
            self.new_notes = NewNotes(conn, vault.id)
            self.changed = ChangedNotes(conn)
            self.stored = (
                StoredRows(conn, [manifest[p][0] for p, _m, _s in todo if p in manifest]) if self.full else None
            )
            sync_attachments(conn, vault.id, attachments)  # before the links are resolved, which may name them
            conflicts.settle_copies(conn, vault, copies, notes)
            for rec in read_all(vault.root, todo, progress, vault.rules, plan.keep, symlinks):
                self.record(rec, manifest.get(rec.path))
            self.changed.flush()
            self._inserted(self.new_notes.flush())
            if not current:  # written with triggers off: the stamps of notes gone from it, given back here
                stamps_back(conn, vault.id)
            self.finish(plan, self.renames.gone)

    def record(self, rec: FileRecord, known: tuple[int, int, int, str] | None) -> None:
        """One file read: its note touched, changed, renamed or new."""
        report, conn = self.report, self.conn
        if rec.error or rec.values is None:
            report.errors.append(rec.error or f"{rec.path}: unreadable")
            return
        if known and known[3] == rec.content_hash and not self.full:
            conn.execute(TOUCHED, (rec.mtime_ns / 1e9, rec.mtime_ns, known[0]))
            report.unchanged += 1
            return
        values = rec.values  # the record's own: filled in place
        values["indexed_at"] = self.now
        values["hidden_rule"] = self.rules.reason(
            values["path"], values["frontmatter"], values["tags"], values["link_to"], rec.fm_raw
        )
        if rec.flagged:
            report.flagged += 1
        if known:
            rid = known[0]
            self.changed.add(rid, values, self.stored.note(rid) if self.stored else None)
            if known[3] == rec.content_hash:  # --full re-parses it, but the file did not change
                report.unchanged += 1
            else:
                report.updated += 1
                self._seen(rid, rec)
        elif (rid_renamed := self.renames.take(rec, values)) is not None:
            rid = rid_renamed
            self.changed.add(rid, values)
            report.renamed += 1
            self._seen(rid, rec)
        else:
            report.added += 1
            self._inserted(self.new_notes.add(rec, values))
            return
        if values["hidden_rule"]:
            self.hidden_rids.append(rid)
        changed_keys, links_changed = write_children(
            conn, rid, self.vault.id, rec, self.stored.children_of(rid) if self.stored else None
        )
        self.keys.update(changed_keys)
        if links_changed:
            self.srcs.add(rid)

    def _seen(self, rid: int, rec: FileRecord) -> None:
        if self.keeping:
            self.seen.append(note_versions.Seen(rid, rec.path, rec.content_hash, rec.size, rec.data, rec.packed))

    def _inserted(self, done: list[tuple[int, FileRecord]]) -> None:
        for rid, rec in done:
            self._seen(rid, rec)
        if self.cold:
            return  # every link is resolved at the end anyway
        for rid, rec in done:
            self.keys.update(k for k, _kind in rec.keys)
            self.srcs.add(rid)

    def finish(self, plan: HistoryPlan, gone: dict[str, tuple[int, str]]) -> None:
        """After every record: history, notes gone, links, privacy, the vault's date (and state)."""
        conn, vault, report = self.conn, self.vault, self.report
        if self.keeping:
            seed_bid = blobs.put_seed(conn, vault.id, plan.new_seed) if plan.new_seed is not None else plan.seed_bid
            note_versions.record_seen(
                conn, vault.id, self.seen, self.how, self.now, packed_base=seed_bid if plan.keep is not None else None
            )
        for _path, (rid, _h) in gone.items():
            self.keys.update(affected_keys(conn, rid))
            note_versions.record_gone(conn, rid)
            delete_note_row(conn, rid)
            report.deleted += 1
        if self.keeping and (self.how == note_versions.HOW_INDEX or self.completing) and not self.cold:
            note_versions.backfill(conn, vault.id, vault.root)
        if self.full and self.changed.fts_rewritten * 4 >= max(1, report.scanned):  # much rewritten: merge segments
            conn.execute("INSERT INTO notes_fts(notes_fts) VALUES ('optimize')")
        every = self.cold or self.full
        resolve_links(conn, None if every else self.keys, None if every else self.srcs)
        purge_embeddings(conn, self.hidden_rids)
        if self.cold:  # every note was judged as it was read: only the rules' fingerprint is left to record
            sync_symlinks(conn, vault.id)
            conn.execute("UPDATE vaults SET privacy_rules = ? WHERE id = ?", (self.rules.fingerprint, vault.id))
        elif (
            next(conn.execute("SELECT privacy_rules FROM vaults WHERE id = ?", (vault.id,)))[0]
            != self.rules.fingerprint
        ):
            apply_rules(conn, vault.id, vault.root, self.rules)
        else:
            sync_symlinks(conn, vault.id)
        conn.execute("UPDATE vaults SET last_indexed_at = ? WHERE id = ?", (time.time(), vault.id))
        if self.completing:
            conn.execute("UPDATE vaults SET index_state = NULL WHERE id = ?", (vault.id,))


class _Renames:
    """The notes whose file is gone, matched to new paths: the same bytes, or the most similar words (a note
    hidden by hand; any note of some length, renamed and edited while no kms process ran)."""

    def __init__(self, conn: apsw.Connection, gone: dict[str, tuple[int, str]]) -> None:
        self.gone = gone
        self.by_hash: dict[str, list[str]] = {}
        for path, (_rid, chash) in gone.items():
            self.by_hash.setdefault(chash, []).append(path)
        self.stamped = stamped_gone(conn, gone)  # hidden by hand: followed through an edited rename
        self.edited = edited_gone(conn, gone)  # any other: its id followed through an edited rename
        self.budget = EDITED_BUDGET

    def take(self, rec: FileRecord, values: dict) -> int | None:
        """The rid of the gone note ``rec`` is (then no longer gone), None for a new note."""
        old_path = (
            self.by_hash[rec.content_hash].pop(0)
            if self.by_hash.get(rec.content_hash)
            else similar_note(self.stamped, values)
            if self.stamped
            else None
        ) or self._edited(values)
        if not old_path or old_path not in self.gone:
            return None
        self.stamped.pop(old_path, None)
        self.edited.pop(old_path, None)
        return self.gone.pop(old_path)[0]

    def _edited(self, values: dict) -> str | None:
        """The vanished note a new file is, renamed and edited (``EDITED_RENAME``), within the run's budget of
        comparisons (``EDITED_BUDGET``: a vault moved wholesale is not compared note by note)."""
        if not self.edited or self.budget <= 0:
            return None
        self.budget -= len(self.edited)
        return similar_note(self.edited, values, EDITED_RENAME)


SIMILAR = 0.6  # share of words a renamed-and-edited note must keep to carry its hidden stamp
# A note renamed and edited while no kms process ran keeps its id (so its history, provenance and the id
# the machines that saw the rename kept: docs/sync.md, "Note ids") when it keeps this share of its words,
# it had at least EDITED_MIN_WORDS (an empty daily note and the next day's are not one note), and no more
# than EDITED_MAX_GONE notes vanished in the run (each new file is compared with each of them).
EDITED_RENAME = 0.8
EDITED_MIN_WORDS = 20
EDITED_MAX_GONE = 200
EDITED_BUDGET = 20_000  # (new file, vanished note) pairs compared in one run, at most


def stamped_gone(conn: apsw.Connection, gone: dict[str, tuple[int, str]]) -> dict[str, Counter[str]]:
    """The words of each vanished note that was hidden by hand (``kms hide``), by its old path."""
    if not gone:
        return {}
    marks = ",".join("?" * len(gone))
    found = conn.execute(
        f"SELECT path, body FROM notes WHERE hidden_stamp IS NOT NULL AND rid IN ({marks})",
        tuple(rid for rid, _h in gone.values()),
    )
    return {path: Counter(body.lower().split()) for path, body in found}


def edited_gone(conn: apsw.Connection, gone: dict[str, tuple[int, str]]) -> dict[str, Counter[str]]:
    """The words of each vanished note not hidden by hand, by its old path, when it is long enough to be
    recognised after an edit (``EDITED_MIN_WORDS``) and few enough vanished (``EDITED_MAX_GONE``)."""
    if not gone or len(gone) > EDITED_MAX_GONE:
        return {}
    marks = ",".join("?" * len(gone))
    found = conn.execute(
        f"SELECT path, body FROM notes WHERE hidden_stamp IS NULL AND rid IN ({marks})",
        tuple(rid for rid, _h in gone.values()),
    )
    words = {path: Counter(body.lower().split()) for path, body in found}
    return {path: w for path, w in words.items() if sum(w.values()) >= EDITED_MIN_WORDS}


def similar_note(stamped: dict[str, Counter[str]], values: dict, least: float = SIMILAR) -> str | None:
    """The vanished note a new file most likely is (a rename with edits while no kms process ran): the one
    sharing the most words, if it keeps at least ``least`` of them (Dice coefficient over word counts).
    Hidden notes: only stamped ones are compared (rule-hidden notes are judged by their rule)."""
    words = Counter(values["body"].lower().split())
    best, best_score = None, least
    for path, old in stamped.items():
        total = sum(old.values()) + sum(words.values())
        score = 2 * sum((old & words).values()) / total if total else 1.0
        if score >= best_score:
            best, best_score = path, score
    return best


def remove_vault(conn: apsw.Connection, name: str) -> Vault:
    """Forget a vault and its index rows; its files are never touched. Its notes' ``kms hide`` stamps
    stay, by vault name (``stamps_gone``, m038): the only way to tell kms a vault folder moved is to
    remove it and add it again, and that must not publish what the person hid."""
    vault = get_vault(conn, name)
    with write_tx(conn), kept_counts.removing(conn, vault.id):
        for (rid,) in conn.execute("SELECT rid FROM notes WHERE vault_id = ?", (vault.id,)).fetchall():
            note_versions.record_gone(conn, rid, "vault removed")  # type: ignore[arg-type]
            delete_note_row(conn, rid)  # type: ignore[arg-type]  # rid: INTEGER PRIMARY KEY
        conn.execute("DELETE FROM vaults WHERE id = ?", (vault.id,))
    save_registrations(conn)
    return vault


def index_all(
    conn: apsw.Connection,
    *,
    full: bool = False,
    vault: str | None = None,
    progress: Progress | None = None,
    on_searchable: OnSearchable | None = None,
) -> list[IndexReport]:
    vaults = [v for v in list_vaults(conn) if vault is None or v.name == vault]
    reports = [index_vault(conn, v, full=full, progress=progress, on_searchable=on_searchable) for v in vaults]
    if sum(r.added + r.updated + r.deleted for r in reports) >= BULK_NOTES:
        checkpoint_and_truncate(conn)
    return reports


BULK_NOTES = 500  # an index that wrote this many notes leaves a WAL worth truncating
