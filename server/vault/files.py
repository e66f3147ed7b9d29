"""Crash-safe file writes that keep a note's encoding and line endings.

A note is either its old bytes or its new bytes, never a torn mix: the new text
goes to a temp file in the same folder, is fsynced, then ``os.replace``d over the
note, and the folder is fsynced so the rename itself survives a power cut.
New notes are published with ``os.link`` (fails if the name exists) so a create
can never overwrite a note that appeared meanwhile.

Notes are edited as *decoded text without the BOM*; ``TextFormat`` remembers the
BOM and the dominant newline so inserted content can be converted to match and
untouched bytes stay untouched (a mixed-ending file is not normalised).
"""

from __future__ import annotations

import codecs
import contextlib
import ctypes
import errno
import hashlib
import os
import re
import secrets
import stat
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from server.errors import KmsError
from server.vault.saves import open_for_writing


@dataclass(frozen=True)
class TextFormat:
    """How a note's text is stored on disk."""

    bom: bool = False
    newline: str = "\n"
    encoding: str = "utf-8"


def sha256_hex(data: bytes) -> str:
    """The version token: sha256 of the file bytes (== ``notes.content_hash``)."""
    return hashlib.sha256(data).hexdigest()


def detect_newline(text: str) -> str:
    """``\\r\\n`` if most line breaks are CRLF, else ``\\n`` (also for text without breaks)."""
    crlf = text.count("\r\n")
    lf = text.count("\n") - crlf
    return "\r\n" if crlf > lf else "\n"


def convert_newlines(content: str, newline: str) -> str:
    """Normalise any line break in ``content`` to ``newline``."""
    s = content.replace("\r\n", "\n").replace("\r", "\n")
    return s if newline == "\n" else s.replace("\n", newline)


def decode(raw: bytes) -> tuple[str, TextFormat]:
    """Decode note bytes; refuse anything that is not UTF-8 rather than guess and corrupt it."""
    bom = raw.startswith(codecs.BOM_UTF8)
    body = raw[len(codecs.BOM_UTF8) :] if bom else raw
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as e:
        raise KmsError("invalid-input", f"the note is not valid UTF-8 (byte {e.start}); kms will not rewrite it") from e
    return text, TextFormat(bom=bom, newline=detect_newline(text))


def encode(text: str, fmt: TextFormat = TextFormat()) -> bytes:
    """Inverse of ``decode``: put the BOM back if the note had one."""
    data = text.encode(fmt.encoding)
    return codecs.BOM_UTF8 + data if fmt.bom else data


def fsync_dir(folder: Path) -> None:
    """Make a rename durable; not possible (nor needed) on Windows."""
    if os.name != "posix":  # pragma: no cover
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _create_temp(folder: Path, dir_fd: int | None = None) -> tuple[Path, int]:
    """A new, empty temp file next to the target (same file system for the rename); with
    ``dir_fd`` it is made in that open folder, whatever its name leads to now.

    The name is short and hidden (``.kms-<random>.tmp``) so it never exceeds the
    name limit, and Obsidian and the indexer ignore a leftover after a crash.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    while True:
        tmp = folder / f".kms-{secrets.token_hex(8)}.tmp"
        try:
            if dir_fd is not None:
                return tmp, os.open(tmp.name, flags, 0o666, dir_fd=dir_fd)
            return tmp, os.open(tmp, flags, 0o666)
        except FileExistsError:  # pragma: no cover - 64 random bits
            continue


LEFTOVER_AGE_S = 60.0  # a temp file lives milliseconds; one this old was left by a killed writer
_LEFTOVER = re.compile(r"\.kms-[0-9a-f]{16}\.tmp")
_SWEEP_EVERY_S = 600.0  # a folder is listed at most this often per process: writes stay cheap
_swept: dict[str, float] = {}


def is_leftover(name: str, mtime: float, now: float) -> bool:
    """A temp file of kms's (``.kms-<16 hex>.tmp``) old enough to be no live writer's."""
    return _LEFTOVER.fullmatch(name) is not None and now - mtime >= LEFTOVER_AGE_S


def sweep_leftovers(
    folder: str | os.PathLike[str], *, dir_fd: int | None = None, now: float | None = None, force: bool = False
) -> int:
    """Remove the temp files a killed writer left in ``folder`` (at the next write there, or at the
    next index); returns how many. ``dir_fd``: the folder, already open (listed and cleaned through
    it). Never raises: a leftover costs nothing but clutter."""
    key = os.fspath(folder)
    now = time.time() if now is None else now
    if not force and now - _swept.get(key, 0.0) < _SWEEP_EVERY_S:
        return 0
    _swept[key] = now
    removed = 0
    try:
        listing = os.scandir(dir_fd) if dir_fd is not None else os.scandir(key)  # scandir dups the fd
        with listing as entries:
            for entry in entries:
                if not entry.name.startswith(".kms-"):
                    continue
                with contextlib.suppress(OSError):
                    st = (
                        os.stat(entry.name, dir_fd=dir_fd, follow_symlinks=False)
                        if dir_fd is not None
                        else entry.stat(follow_symlinks=False)
                    )
                    if stat.S_ISREG(st.st_mode) and is_leftover(entry.name, st.st_mtime, now):
                        os.unlink(entry.name if dir_fd is not None else entry.path, dir_fd=dir_fd)
                        removed += 1
    except OSError:
        pass
    return removed


def write_failure(exc: OSError, name: str) -> KmsError:
    """A typed error for a write the file system refused: a full disk says so; a folder moved,
    removed or swapped for a link mid-write is a ``conflict`` to retry. Nothing was changed."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return KmsError(
            "disk-full",
            f"the disk holding the vault is full: {name} was not changed; free some space and retry",
            path=name,
        )
    if exc.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR, errno.EXDEV):
        return KmsError(
            "conflict",
            f"the folder of {name} was moved, removed or replaced by a link while kms "
            "was writing; nothing was written, try again",
            path=name,
        )
    return KmsError(
        "conflict", f"the file system refused the write of {name} ({exc.strerror}); nothing was written", path=name
    )


def _sync_and_close(fd: int) -> None:
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# One write uses one or two of these; a call rewriting many files (a rename's linking notes) keeps
# several fsyncs in flight, which the file system's journal commits together.
IO_THREADS = 8
RENAME_EXCHANGE = 2  # linux/fs.h


def _load_renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    """glibc's ``renameat2`` (Linux 3.15+, glibc 2.28+), or None: then kms checks and renames in
    two steps, and a save landing in the microseconds between them can still be lost."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint)
    fn.restype = ctypes.c_int
    return fn


_renameat2 = _load_renameat2()


def _exchange(dir_fd: int, a: str, b: str) -> bool:
    """Atomically swap the names ``a`` and ``b`` in the folder; False where unsupported."""
    if _renameat2 is None:
        return False
    if _renameat2(dir_fd, os.fsencode(a), dir_fd, os.fsencode(b), RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False  # this file system cannot exchange
    raise OSError(err, os.strerror(err), b)


_io_pool: ThreadPoolExecutor | None = None
_io_pool_lock = threading.Lock()


def _in_background(fn: Callable[..., None], *args: object) -> Future[None]:
    """Run a blocking flush on a kms I/O thread. An fsync waits for the disk without the GIL, so
    the caller can do CPU work meanwhile (parse the new text for the index) instead of waiting."""
    global _io_pool
    with _io_pool_lock:
        if _io_pool is None:
            _io_pool = ThreadPoolExecutor(max_workers=IO_THREADS, thread_name_prefix="kms-fsync")
    return _io_pool.submit(fn, *args)


def sync_and_close_all(fds: list[int]) -> None:
    """fsync every file, all in flight at once on kms's I/O threads (the journal commits them together),
    and close them all; the first error is raised once every one is closed."""
    futures = [_in_background(_sync_and_close, fd) for fd in fds]
    errors = [e for f in futures if (e := f.exception()) is not None]
    if errors:
        raise errors[0]


class PendingWrite:
    """A temp file holding the new bytes, waiting to replace ``target``.

    Splitting preparation from ``commit`` lets a caller do the slow part (write +
    fsync) first and then check that the target is still the version it read
    right before the rename, leaving a window of microseconds, not milliseconds.
    The fsync runs in the background until ``commit``, which waits for it before
    the rename (a crash can never leave the name pointing at unflushed bytes); the
    folder's fsync after the rename runs in the background until ``wait_durable``.
    """

    def __init__(
        self,
        target: str | os.PathLike[str],
        data: bytes,
        *,
        keep_mode: bool = True,
        sync_now: bool = True,
        dir_fd: int | None = None,
    ) -> None:
        """``dir_fd``: the target's folder, already open (``paths.open_folder``): every name is then
        taken in that folder, so a folder swapped for a link meanwhile cannot redirect the write."""
        self.target = Path(target)
        self._dir_fd = os.dup(dir_fd) if dir_fd is not None else None
        self._fd: int | None = None
        mode = None
        if keep_mode:
            with contextlib.suppress(FileNotFoundError):
                mode = stat.S_IMODE(
                    os.stat(self.target.name, dir_fd=self._dir_fd, follow_symlinks=True).st_mode
                    if self._dir_fd is not None
                    else os.stat(self.target).st_mode
                )
        self._synced: Future[None] | None = None
        self._dir_synced: Future[None] | None = None
        self.tmp: Path | None = None
        sweep_leftovers(self.target.parent, dir_fd=self._dir_fd)  # a killed writer's temp files
        try:
            self.tmp, fd = _create_temp(self.target.parent, self._dir_fd)
        except BaseException:
            self._close_dir()
            raise
        try:
            with memoryview(data) as view:
                written = 0
                while written < len(view):
                    written += os.write(fd, view[written:])
            if mode is not None:
                os.fchmod(fd, mode) if hasattr(os, "fchmod") else os.chmod(self.tmp, mode)
            st = os.fstat(fd)
        except BaseException:
            os.close(fd)
            self.discard()
            raise
        self._fd = fd
        if sync_now:  # else the caller starts it (``start_sync``): many temp files first, then their fsyncs
            self.start_sync()
        self.size = len(data)
        # what the target will look like after the rename (which keeps inode and mtime)
        self.mtime_ns = st.st_mtime_ns
        self.stamp = f"{st.st_ino} {st.st_mtime_ns} {st.st_size}"

    def start_sync(self) -> None:
        """Flush the temp file on a kms I/O thread (once)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            self._synced = _in_background(_sync_and_close, fd)

    def wait_synced(self) -> None:
        """Return once the temp file's bytes are on disk."""
        self.start_sync()
        if self._synced is not None:
            synced, self._synced = self._synced, None
            synced.result()  # an fsync error surfaces here, before the rename

    def commit(self, *, sync_dir: bool = True) -> None:
        """Atomically replace the target once the new bytes are on disk; the rename is made durable
        in the background (``wait_durable``). ``sync_dir=False``: the caller fsyncs the folder itself,
        once for many renames into it (a folder fsync per rename serialises them)."""
        assert self.tmp is not None
        self.wait_synced()
        if self._dir_fd is not None:
            os.replace(self.tmp.name, self.target.name, src_dir_fd=self._dir_fd, dst_dir_fd=self._dir_fd)
            self.tmp = None
            dir_fd, self._dir_fd = self._dir_fd, None
            self._dir_synced = _in_background(_sync_and_close, dir_fd)
            return
        os.replace(self.tmp, self.target)
        self.tmp = None
        if sync_dir:
            self._dir_synced = _in_background(fsync_dir, self.target.parent)

    def commit_if_unchanged(self, expected: str, new: bytes) -> bool | None:
        """Swap the new file in only over the version kms read (sha256 ``expected``), with no window
        for a save to be lost: the names are exchanged atomically, then what came out of the target
        is checked. If it is not the version read (a save landed meanwhile), it is swapped back, and
        if yet another save replaced kms's version in that instant, that newest save is put back.
        A version still held open for writing by another process (a save in progress: ``saves``) counts as
        changed too. Returns True (committed), False (the note had changed: nothing of kms's is left in place),
        or None where the platform cannot exchange (then the caller checks and ``commit``s)."""
        assert self.tmp is not None
        if self._dir_fd is None:
            return None
        self.wait_synced()
        if not self._target_is(expected):
            return False  # a save landed since kms read: kms's version is never shown, not even for a moment
        if not _exchange(self._dir_fd, self.tmp.name, self.target.name):
            return None
        # the version read, and nobody in the middle of writing it: an editor that truncated it and stalled
        # between two chunks still holds it open, and its next chunk would go to the file just swapped out
        if sha256_hex(self._read_tmp()) == expected and not open_for_writing(self.tmp.name, self._dir_fd):
            self._finish_exchange()
            return True
        _exchange(self._dir_fd, self.tmp.name, self.target.name)  # the person's save goes back
        if self._read_tmp() != new:  # a newer save replaced kms's version meanwhile: that one wins
            _exchange(self._dir_fd, self.tmp.name, self.target.name)
        return False

    def _target_is(self, expected: str) -> bool:
        """Whether the target still is the version read, just before the exchange: a save that landed while kms
        computed and synced its version is not swapped out and back (an editor reading in that instant would
        take up kms's version, without the person's last save). The check after the exchange stays the rule."""
        assert self._dir_fd is not None
        try:
            fd = os.open(self.target.name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=self._dir_fd)
        except OSError:
            return True  # the exchange finds out and answers for it
        with os.fdopen(fd, "rb") as f:
            return sha256_hex(f.read()) == expected

    def _read_tmp(self) -> bytes:
        assert self.tmp is not None and self._dir_fd is not None
        fd = os.open(self.tmp.name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=self._dir_fd)
        with os.fdopen(fd, "rb") as f:
            return f.read()

    def _finish_exchange(self) -> None:
        """The old version now has the temp name: drop it; make the exchange durable in the background."""
        assert self.tmp is not None and self._dir_fd is not None
        os.unlink(self.tmp.name, dir_fd=self._dir_fd)
        self.tmp = None
        dir_fd, self._dir_fd = self._dir_fd, None
        self._dir_synced = _in_background(_sync_and_close, dir_fd)

    def publish_new(self, data: bytes) -> None:
        """Give the finished temp file the target's name only if that name is free (a create)."""
        assert self.tmp is not None
        self.wait_synced()
        _publish_new(self.tmp, self.target, data, self._dir_fd)
        if self._dir_fd is not None:
            os.fsync(self._dir_fd)
        else:
            fsync_dir(self.target.parent)

    def _close_dir(self) -> None:
        if self._dir_fd is not None:
            os.close(self._dir_fd)
            self._dir_fd = None

    def wait_durable(self) -> None:
        """Return once the rename survives a power cut."""
        if self._dir_synced is not None:
            synced, self._dir_synced = self._dir_synced, None
            synced.result()

    def discard(self) -> None:
        if self.tmp is not None:
            if self._fd is not None:  # never flushed: nothing to wait for
                fd, self._fd = self._fd, None
                os.close(fd)
            with contextlib.suppress(OSError):
                self.wait_synced()  # the background fsync still holds the file open
            with contextlib.suppress(FileNotFoundError):
                if self._dir_fd is not None:
                    os.unlink(self.tmp.name, dir_fd=self._dir_fd)
                else:
                    os.unlink(self.tmp)
            self.tmp = None
        self._close_dir()

    def __enter__(self) -> PendingWrite:
        return self

    def __exit__(self, *exc: object) -> None:
        self.discard()


def atomic_write(
    path: str | os.PathLike[str],
    text: str | bytes,
    *,
    encoding: str = "utf-8",
    newline_style: str | None = None,
    bom: bool = False,
    create_only: bool = False,
    dir_fd: int | None = None,
) -> int:
    """Write ``text`` to ``path`` atomically and durably; return the bytes written.

    ``newline_style`` (``"\\n"``/``"\\r\\n"``) converts every line break first; leave
    it ``None`` when the caller already composed the exact text. ``bom`` prefixes a
    UTF-8 BOM. ``create_only`` never replaces an existing file: ``already-exists``.
    An existing file keeps its permission bits. ``dir_fd``: ``path``'s folder, already open.
    """
    target = Path(path)
    if isinstance(text, str):
        if newline_style is not None:
            text = convert_newlines(text, newline_style)
        data = encode(text, TextFormat(bom=bom, encoding=encoding))
    else:
        data = text
    with PendingWrite(target, data, keep_mode=not create_only, dir_fd=dir_fd) as pending:
        if create_only:
            pending.publish_new(data)
        else:
            pending.commit()
            pending.wait_durable()
    return len(data)


def _publish_new(tmp: Path, target: Path, data: bytes, dir_fd: int | None = None) -> None:
    """Give the finished temp file its real name only if that name is free."""
    try:
        if dir_fd is not None:
            os.link(tmp.name, target.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
        else:
            os.link(tmp, target)
        return
    except FileExistsError as e:
        raise KmsError("already-exists", f"{target.name} already exists", path=target.name) from e
    except OSError as e:
        if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EXDEV, errno.EMLINK):
            raise
    # File systems without hard links (some FUSE, exFAT): O_EXCL still never overwrites.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0) | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target.name, flags, 0o666, dir_fd=dir_fd) if dir_fd is not None else os.open(target, flags, 0o666)
    except FileExistsError as e:
        raise KmsError("already-exists", f"{target.name} already exists", path=target.name) from e
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def default_lock_dir() -> Path:
    """Fallback lock folder when the database has no file (``:memory:`` tests)."""
    uid = os.getuid() if hasattr(os, "getuid") else "user"
    return Path(tempfile.gettempdir()) / f"kms-locks-{uid}"
