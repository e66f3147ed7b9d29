"""Is someone saving a note right now? What kms can tell from outside an editor that takes no lock.

``file_stamp``: a version's identity on disk (inode, mtime, size); ``write_stamp``/``read_stamp``: the version
kms itself wrote last, kept in the note's held lock file, so kms need not wait for its own writes to settle.
``open_for_writing``: whether another process holds the file open for writing (a save in progress: an editor
that truncates and writes, in one or several chunks). Linux answers it exactly with a read lease
(``F_SETLEASE``), which the kernel refuses while any descriptor is open for writing; the lease is let go at
once, and the signal a lease break would send is one whose default is to be ignored. Elsewhere, or for a
file this user does not own, the answer is None: unknown.
"""

from __future__ import annotations

import errno
import os

try:
    import fcntl
    import signal

    _LEASE: tuple[int, int, int, int] | None = (
        (fcntl.F_SETLEASE, fcntl.F_RDLCK, fcntl.F_UNLCK, int(signal.SIGURG)) if hasattr(fcntl, "F_SETLEASE") else None
    )
except ImportError:  # pragma: no cover - Windows
    _LEASE = None
F_SETSIG = 10  # Linux: the signal a lease break sends (SIGIO by default, whose default ends the process)


def open_for_writing(name: str, dir_fd: int | None = None) -> bool | None:
    """Whether some process holds ``name`` (in folder ``dir_fd``) open for writing; None where kms cannot tell
    (no leases on this system or file system, a file of another user, a file gone)."""
    if _LEASE is None:
        return None
    setlease, rdlck, unlck, quiet_signal = _LEASE
    try:
        fd = os.open(name, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0), dir_fd=dir_fd)
    except OSError:
        return None
    try:
        fcntl.fcntl(fd, F_SETSIG, quiet_signal)
        try:
            fcntl.fcntl(fd, setlease, rdlck)
        except OSError as e:
            return True if e.errno == errno.EAGAIN else None
        fcntl.fcntl(fd, setlease, unlck)
        return False
    except OSError:
        return None
    finally:
        os.close(fd)


def file_stamp(path: str | os.PathLike[str]) -> str:
    """Identity of a file's current version on disk: inode, mtime and size."""
    st = os.stat(path)
    return f"{st.st_ino} {st.st_mtime_ns} {st.st_size}"


STAMP_BYTES = 100  # "inode mtime_ns size" is at most ~60 characters


def write_stamp(lock_fd: int, stamp: str) -> None:
    """Remember (in the held lock file) the version kms itself just wrote. A fixed-width record
    written in place: truncating the file first would make every write a journaled size change."""
    data = stamp.encode().ljust(STAMP_BYTES)
    if hasattr(os, "pwrite"):
        os.pwrite(lock_fd, data, 0)
    else:  # pragma: no cover - Windows
        os.lseek(lock_fd, 0, os.SEEK_SET)
        os.write(lock_fd, data)


def read_stamp(lock_fd: int) -> str:
    os.lseek(lock_fd, 0, os.SEEK_SET)
    return os.read(lock_fd, STAMP_BYTES).decode(errors="replace").rstrip()
