"""The one cross-process file lock (POSIX ``flock``, Windows ``msvcrt.locking``).

It sits at the bottom of the layers so both the settings file (``server/config``) and the
note writes (``server/vault``, ``server/writes``) use the same lock.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def lock_file(path: str | os.PathLike[str], *, wait: float | None = None) -> Iterator[int]:
    """Hold an exclusive lock on the file at ``path`` (created if missing); yields its fd.

    ``flock`` is per open file description, so it also excludes other threads of one
    process. Closing the descriptor releases the lock, even when the holder dies.
    ``wait``: give up after that many seconds (``TimeoutError``), for a caller that already
    holds other locks and so must not wait out of path order.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None and wait is not None:
            deadline = time.monotonic() + wait
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"{path} stayed locked for {wait} s") from None
                    time.sleep(0.01)
        elif fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        else:  # pragma: no cover - Windows
            # deferred: Windows only
            import msvcrt

            while True:
                try:
                    msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                    break
                except OSError:
                    continue
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def file_lock(
    target: str | os.PathLike[str], lock_dir: str | os.PathLike[str], *, wait: float | None = None
) -> Iterator[int]:
    """Exclusive lock for one note, shared by every kms thread and process; yields the lock fd.

    The lock file lives in a kms-private folder (next to the database), not on the
    note: ``os.replace`` swaps the note's inode, so a lock on the note itself would
    not be seen by the next writer. The lock file's content is free for the holder
    (``server.vault.saves.write_stamp`` / ``read_stamp``).
    """
    folder = Path(lock_dir)
    folder.mkdir(parents=True, exist_ok=True)
    key = hashlib.sha256(os.fsencode(os.path.normcase(os.fspath(target)))).hexdigest()[:40]
    with lock_file(folder / f"{key}.lock", wait=wait) as fd:
        yield fd


# In-process: the watcher of a server waits while that server makes a multi-file change (a rename's
# 500 linking notes). Its Python work on the thousands of events the change makes would otherwise take
# the GIL from the change at every system call; afterwards each event costs it a stat and a hash.
_own = threading.Condition()
_own_busy = 0


@contextlib.contextmanager
def own_writes() -> Iterator[None]:
    """Held by this process while it changes several files as one unit."""
    global _own_busy
    with _own:
        _own_busy += 1
    try:
        yield
    finally:
        with _own:
            _own_busy -= 1
            _own.notify_all()


def wait_own_writes(timeout: float = 10.0) -> None:
    """Return once this process makes no multi-file change (or after ``timeout`` s: never stuck)."""
    with _own:
        _own.wait_for(lambda: _own_busy == 0, timeout)
