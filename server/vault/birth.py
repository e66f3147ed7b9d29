"""When a file was made (its birth time), for a note's ``createdAt`` when its frontmatter gives no date.

macOS and the BSDs report it in ``stat`` (``st_birthtime``); Linux only through ``statx`` (ext4, btrfs,
xfs, tmpfs record it), which Python 3.11 does not wrap, so it is called through libc. A file system that
keeps no birth time answers None, and so does any failure: the caller falls back to the file's mtime.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from collections.abc import Callable
from functools import cache

AT_FDCWD = -100
AT_STATX_DONT_SYNC = 0x4000  # never ask a network file system's server: the cached value is enough
STATX_BTIME = 0x800
_STATX_SIZE = 256  # struct statx
_MASK_OFFSET = 0  # u32 stx_mask: which fields the file system filled in
_BTIME_OFFSET = 80  # struct statx_timestamp stx_btime: i64 seconds, u32 nanoseconds


@cache
def _statx() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.statx
    except (OSError, AttributeError):  # a libc older than glibc 2.28 or musl without it
        return None
    fn.argtypes = (ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint, ctypes.c_void_p)
    fn.restype = ctypes.c_int
    return fn


def birth_time(path: str) -> float | None:
    """The file's birth time in epoch seconds, or None where the system or file system keeps none."""
    if sys.platform != "linux":
        try:
            born = getattr(os.stat(path), "st_birthtime", None)
        except OSError:
            return None
        return float(born) if born else None
    fn = _statx()
    if fn is None:
        return None
    buf = ctypes.create_string_buffer(_STATX_SIZE)
    if fn(AT_FDCWD, os.fsencode(path), AT_STATX_DONT_SYNC, STATX_BTIME, buf) != 0:
        return None
    mask = int.from_bytes(buf.raw[_MASK_OFFSET : _MASK_OFFSET + 4], sys.byteorder)
    if not mask & STATX_BTIME:
        return None
    sec = int.from_bytes(buf.raw[_BTIME_OFFSET : _BTIME_OFFSET + 8], sys.byteorder, signed=True)
    nsec = int.from_bytes(buf.raw[_BTIME_OFFSET + 8 : _BTIME_OFFSET + 12], sys.byteorder)
    return sec + nsec / 1e9 if sec > 0 else None
