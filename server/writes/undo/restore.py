"""Bring a note back to a version kms kept (docs/history.md): the person's ``kms restore``.

A restore is the person's write (``WriteContext.for_person``, like a revert): one provenance row (tool
``restore``, actor ``person``) with the change it made, so it is itself revertible (``kms revert``). An
existing note is rewritten as one unit (``multifile.apply_plans``) only while it still holds the bytes
the preview showed (``expect``), else ``conflict``; a note that no longer exists is created again at its
last path, byte for byte, only while nothing is there (``expect`` ``""``).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import apsw

from server.activity.changes import FilesChanged
from server.activity.note_history import Line, find_line, pick, unified, version_bytes, versions
from server.errors import KmsError
from server.vault.files import sha256_hex
from server.vault.registry import Vault, get_vault
from server.writes import reindex
from server.writes.context import Touched
from server.writes.multifile import apply_plans
from server.writes.operations import create_exact
from server.writes.outcome import WriteOutcome, WriteResult
from server.writes.person import PersonCall, person_write
from server.writes.undo.trash import parse_duration
from server.writes.unit_files import FilePlan

TOOL_RESTORE = "restore"


def parse_when(text: str, now: float) -> float:
    """A moment the person names: a time ago (``2h``, ``30m``, ``3d``: the one duration grammar), an ISO
    date or time (``2026-12-01``, ``2026-12-01T14:30``, local time unless it says otherwise) or epoch
    seconds. ``invalid-input`` otherwise."""

    text = (text or "").strip()
    try:
        return now - parse_duration(text)
    except KmsError:
        pass
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise KmsError(
            "invalid-input", f"{text!r} is not a time: give e.g. 2h (ago), 2026-12-01T14:30 or epoch seconds"
        ) from None


def _current(vault: Vault, path: str) -> bytes | None:
    try:
        return (vault.root / path).read_bytes()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except IsADirectoryError as e:
        raise KmsError("conflict", f"{path!r} is a folder now") from e


def restore_target(conn: apsw.Connection, line: Line) -> tuple[Vault, str]:
    """The vault and path a restore writes: where the note is now (its row's path), else its last path."""
    vault = get_vault(conn, line.vault)
    if line.rid is not None:
        row = conn.execute("SELECT path FROM notes WHERE rid = ?", (line.rid,)).fetchone()
        if row is not None:
            return vault, str(row[0])
    return vault, line.path


def current_bytes(conn: apsw.Connection, line: Line) -> bytes | None:
    """The note's file as it is now (None: there is none)."""
    vault, path = restore_target(conn, line)
    return _current(vault, path)


def default_version(conn: apsw.Connection, line: Line, current: bytes | None) -> int | None:
    """The version ``kms diff`` shows when none is named: the newest whose bytes differ from the file now."""

    digest = None if current is None else sha256_hex(current)
    for v in versions(conn, line):
        if v["how"] not in ("deleted", "moved") and v["hash"] != digest:
            return int(v["version"])
    return None


def preview_restore(
    conn: apsw.Connection, ref: str, *, number: int | None = None, at: float | None = None, vault: str | None = None
) -> dict[str, Any]:
    """What ``restore`` would do now: the version, where it goes, the diff from the file as it is, and
    ``expect`` (the hash of the file now, ``""`` when there is none) to hand back to ``restore``."""
    line = find_line(conn, ref, vault)
    version = pick(conn, line, number=number, at=at)
    data = version_bytes(conn, version)
    vault_obj, path = restore_target(conn, line)
    now = _current(vault_obj, path)
    return {
        "noteId": line.note_id,
        "vault": vault_obj.name,
        "path": path,
        "version": version["version"],
        "at": version["at"],
        "size": version["size"],
        "exists": now is not None,
        "expect": "" if now is None else sha256_hex(now),
        "same": now == data,
        "diff": unified(
            now or b"",
            data,
            (path if now is not None else None, "now"),
            (path, f"version {version['version']}"),
        ),
    }


def restore(
    conn: apsw.Connection,
    ref: str,
    *,
    number: int | None = None,
    at: float | None = None,
    expect: str | None = None,
    vault: str | None = None,
    why: str | None = None,
) -> dict[str, Any]:
    """Write the version back as the person; ``expect``: the hash the preview saw (``""``: no file), a
    file that changed since is ``conflict``. None: no preview (the file as read now). ``why``: said in the
    provenance row (a session's undo)."""
    with person_write(conn, tool=TOOL_RESTORE, summary=f"restore {ref}") as call:
        version = _restore(call, ref, number, at, expect, vault, why)
        call.message = f"restored version {version}"
    return {**call.result.result, "invocationId": call.invocation_id, "restoredVersion": version}


def _restore(
    call: PersonCall,
    ref: str,
    number: int | None,
    at: float | None,
    expect: str | None,
    vault: str | None,
    why: str | None = None,
) -> int:
    """Write the version back through the call's context; return its number."""
    ctx = call.ctx
    conn = ctx.conn
    line = find_line(conn, ref, vault)
    chosen = pick(conn, line, number=number, at=at)
    data = version_bytes(conn, chosen)
    vault_obj, path = restore_target(conn, line)
    touched = call.touched = Touched(line.note_id, vault_obj.name, path, path.rsplit("/", 1)[-1])
    call.summary = f"restore {path} to version {chosen['version']}" + (f" ({why})" if why else "")
    now = _current(vault_obj, path)
    if expect is not None and ("" if now is None else sha256_hex(now)) != expect:
        raise KmsError("conflict", f"{path!r} changed since the preview; nothing was restored", path=path)
    if now is None:
        try:
            call.outcome = create_exact(ctx, vault_obj, path, data)
        except KmsError as e:
            if e.kind != "already-exists":
                raise
            raise KmsError("conflict", f"{path!r} exists again; nothing was restored", path=path) from None
        return int(chosen["version"])
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KmsError("invalid-input", f"version {chosen['version']} is not UTF-8; kms will not write it") from e
    files, unit = apply_plans(ctx, vault_obj, [FilePlan(path, lambda _t: text, expect_hash=sha256_hex(now))])
    result = WriteResult(
        title=touched.title or path,
        path=path,
        vault=vault_obj.name,
        bytesBefore=len(now),
        bytesAfter=len(data),
        changed=bool(files),
        noteId=line.note_id,
    )
    reindex.warn_into(ctx, unit, result)
    call.outcome = WriteOutcome(
        result, FilesChanged(path, tuple(files)) if files else None, sha256_hex(now), sha256_hex(data)
    )
    return int(chosen["version"])
