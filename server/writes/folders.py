"""A folder moved or renamed as one unit: every note in it moves, every link to any of them is rewritten.

The notes of the folder (its subfolders too, hidden notes included so the person's links keep working,
except a note hidden by where it is, which stays there: ``_moving``) and every note of the vault with a
link the index resolved to one of them form one unit (``server.writes.multifile``): all change or none
does, under one journal. Each link is rewritten in the style it was written
(``server.vault.links.FolderMoves``); each note keeps its row, so its id. The call
counts every file against ``write.max_files_per_call`` before anything is touched, unless the session stages
its calls for the person's approval (``write.approval``): then a larger unit is staged, every file's diff shown,
and lands only as approved. ``dry_run`` answers the same counts and writes nothing, so an agent can see the
blast radius first. The change is one
``FilesChanged`` record, which revert undoes exactly. Only notes move: other files stay where they are, and
the moving notes' relative links to them are rewritten to keep naming them.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from collections.abc import Callable

from server.activity.changes import FilesChanged
from server.errors import KmsError
from server.index.privacy import vault_rules
from server.store.db import rows
from server.vault.links import FolderMoves, rewrite_links
from server.vault.paths import TRASH, folder_key
from server.vault.registry import Vault
from server.writes import reindex
from server.writes.context import Touched, WriteContext
from server.writes.multifile import apply_plans
from server.writes.operations import refuse_private
from server.writes.organize import Radius
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.unit_files import FilePlan


def _members(ctx: WriteContext, vault: Vault, folder: str) -> list[dict]:
    """Every indexed note under ``folder`` (its subfolders too), hidden ones included."""
    return rows(
        ctx.conn,
        """
        SELECT path, hidden_at IS NOT NULL AS hidden, link_to IS NOT NULL AS link FROM notes
        WHERE vault_id = ? AND substr(path, 1, ?) = ? ORDER BY path""",
        (vault.id, len(folder) + 1, folder + "/"),
    )


def _moving(ctx: WriteContext, vault: Vault, members: list[dict], old: str, new: str) -> list[dict]:
    """The notes of the folder that move. A privacy path rule hides a place, not a note: a note it hides
    stays where it is unless a path rule hides its new place too (moving it would publish it to agents), and
    so does a hidden symlink (hidden by its target's place; a move would write it as a plain file);
    a visible note never moves where a path rule would hide it (``refuse_private``, as kms_create). A
    folder with no note the agent can see answers as one that does not exist: a hidden one is not told
    apart, and nothing of it is counted, even in a dry run."""
    if all(m["hidden"] for m in members):
        raise KmsError("not-found", f"no note in folder {old!r} of vault {vault.name!r}", folder=old)
    rules = vault_rules(ctx.conn, vault.id, vault.root)
    moving = []
    for m in members:
        dest = new + m["path"][len(old) :]
        if not m["hidden"]:
            refuse_private(ctx.conn, vault, dest, rules)
        elif (m["link"] or rules.path_reason(m["path"])) and not rules.path_reason(dest):
            continue  # hidden by where it is (or a symlink, by where its target is): it stays
        moving.append(m)
    return moving


def _links_into(ctx: WriteContext, vault: Vault, folder: str) -> tuple[dict[str, set[str]], dict[str, bool]]:
    """(note path -> the notes under ``folder`` its links resolve to, note path -> hidden) for every note of
    the vault linking into the folder. A Logseq block reference names no note and stays."""
    linked: dict[str, set[str]] = defaultdict(set)
    hidden: dict[str, bool] = {}
    for r in rows(
        ctx.conn,
        """
            SELECT s.path AS src, d.path AS dst, s.hidden_at IS NOT NULL AS hidden FROM notes d
            JOIN links l ON l.dst_rid = d.rid JOIN notes s ON s.rid = l.src_rid
            WHERE d.vault_id = ? AND substr(d.path, 1, ?) = ? AND s.vault_id = ? AND l.target NOT LIKE '((%'""",
        (vault.id, len(folder) + 1, folder + "/", vault.id),
    ):
        linked[r["src"]].add(r["dst"])
        hidden[r["src"]] = bool(r["hidden"])
    return linked, hidden


def names_a_folder(ctx: WriteContext, ref: str) -> bool:
    """Whether ``ref`` is a folder with visible notes in the session's scope (a note tool was given a folder)."""
    try:
        key = folder_key(ref)
    except KmsError:
        return False
    if not key:
        return False
    scope, params = ctx.vault_scope().sql()
    return bool(
        ctx.conn.execute(
            f"""SELECT 1 FROM notes n JOIN vaults v ON v.id = n.vault_id WHERE n.hidden_at IS NULL
            AND substr(n.path, 1, ?) = ? {scope} LIMIT 1""",
            (len(key) + 1, key + "/", *params),
        ).fetchall()
    )


def _check_folders(ctx: WriteContext, old: str, new: str) -> None:
    if not old:
        raise KmsError("invalid-input", "the vault root is not a folder that can move; name a folder in it")
    if new == old:
        raise KmsError("invalid-input", f"the folder is already at {old!r}")
    if new.startswith(old + "/"):
        raise KmsError("invalid-input", f"{old!r} cannot move into itself ({new!r})")
    if any(seg.startswith(".") for seg in new.split("/")):
        what = "use kms_trash for each note" if new.split("/")[0] == TRASH else "kms does not index hidden folders"
        raise KmsError("invalid-input", f"{new!r} is a hidden folder: {what}")


def relocate_folder(
    ctx: WriteContext, vault: Vault, folder: str, new_folder: str, *, dry_run: bool = False
) -> WriteOutcome:
    """Move every note under ``folder`` to the same place under ``new_folder``, rewriting every link to them."""
    old, new = folder_key(folder), folder_key(new_folder)
    ctx.touched = Touched(None, vault.name, old or None, None)
    _check_folders(ctx, old, new)
    members = _moving(ctx, vault, _members(ctx, vault, old), old, new)
    moves = {m["path"]: new + m["path"][len(old) :] for m in members}
    # every path a note leaves and every one it comes to, where each really is (a hidden one never named);
    # a dry run is refused the same
    for m in sorted(members, key=lambda m: m["path"]):
        for path in (m["path"], moves[m["path"]]):
            ctx.check_write(vault, path, hidden=bool(m["hidden"]))
    linked, hidden = _links_into(ctx, vault, old)
    linkers = sorted(p for p, dsts in linked.items() if p not in moves and dsts & moves.keys())
    count = len(members) + len(linkers)
    moved, hidden_moved = len(members), sum(bool(m["hidden"]) for m in members)
    if dry_run:
        result = WriteResult(
            noteId=None,
            title=new.rpartition("/")[2],
            path=new,
            vault=vault.name,
            bytesBefore=0,
            bytesAfter=0,
            linesAdded=0,
            changed=False,
            folder=old,
            newFolder=new,
            dryRun=True,
            filesChanged=0,
            linesRemoved=0,
            notesMoved=moved,
            hiddenNotesMoved=hidden_moved,
            linkingNotes=len(linkers),
        )
        result["withinLimit"] = count <= ctx.max_files
        return WriteOutcome(result)
    if ctx.staging is None:  # a call shown to the person file by file (write.approval) may be larger
        ctx.check_breadth(count, "files (the folder's notes and the notes linking to them)")
    targets = FolderMoves(moves, exists=lambda rel: (vault.root / rel).is_file())
    alias_first = vault.rules.alias_first

    def compute(path: str) -> Callable[[str], str]:
        folder_of = path.rpartition("/")[0]
        moving = path in moves
        note_targets = targets.for_note({*linked.get(path, ()), path} if moving else linked.get(path, ()))
        new_folder_of = moves[path].rpartition("/")[0] if moving else None
        return lambda text: rewrite_links(
            text, note_targets, alias_first=alias_first, folder=folder_of, new_folder=new_folder_of
        )[0]

    measure = Radius()
    plans = [
        FilePlan(
            m["path"],
            measure.measured(m["path"], compute(m["path"])),
            new_path=moves[m["path"]],
            hidden=bool(m["hidden"]),
        )
        for m in members
    ]
    plans += [FilePlan(p, measure.measured(p, compute(p)), hidden=hidden[p]) for p in linkers]
    files, unit = apply_plans(ctx, vault, plans)
    if ctx.capture is None:
        _prune(vault, old, moves)
    result = WriteResult(
        noteId=None,
        title=new.rpartition("/")[2],
        path=new,
        vault=vault.name,
        bytesBefore=0,
        bytesAfter=0,
        linesAdded=0,
        changed=bool(files),
        folder=old,
        newFolder=new,
        notesMoved=moved,
        hiddenNotesMoved=hidden_moved,
        linkingNotes=len(linkers),
    )
    measure.fill(result, files)
    changed = [f for f in files if f.path not in moves]
    result["linksRewritten"] = {
        "notes": [f.path for f in changed if not f.hidden],
        "hiddenNotes": sum(f.hidden for f in changed),
    }
    reindex.warn_into(ctx, unit, result)
    return WriteOutcome(result, FilesChanged(old, tuple(files)))


def _prune(vault: Vault, folder: str, moves: dict[str, str]) -> None:
    """Remove the folders the moved notes left empty (one with anything else in it stays, and so does an
    empty folder no note was in)."""
    left: set[str] = set()
    for path in moves:
        here = path.rpartition("/")[0]
        while here and here not in left and (here == folder or here.startswith(folder + "/")):
            left.add(here)
            here = here.rpartition("/")[0]
    for here in sorted(left, key=lambda f: f.count("/"), reverse=True):
        with contextlib.suppress(OSError):  # not empty (another file, a person's new note): it stays
            os.rmdir(vault.root / here)


def move_folder(ctx: WriteContext, vault: Vault, folder: str, *, to: str, dry_run: bool = False) -> WriteOutcome:
    """``folder`` goes into ``to`` ('' = the vault root), keeping its name."""
    name = folder_key(folder).rpartition("/")[2]
    dest = folder_key(to)
    return relocate_folder(ctx, vault, folder, f"{dest}/{name}" if dest else name, dry_run=dry_run)


def rename_folder(ctx: WriteContext, vault: Vault, folder: str, *, name: str, dry_run: bool = False) -> WriteOutcome:
    """``folder`` gets the name ``name``, where it is."""
    if "/" in name.strip("/"):
        raise KmsError("invalid-input", "a folder's new name is one name, without '/': use kms_move_folder to move it")
    parent = folder_key(folder).rpartition("/")[0]
    seg = folder_key(name)
    return relocate_folder(ctx, vault, folder, f"{parent}/{seg}" if parent else seg, dry_run=dry_run)
