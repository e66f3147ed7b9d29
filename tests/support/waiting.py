"""Waiting for the state a test needs, with a deadline, instead of sleeping and hoping it is there.

``until`` polls a condition (a database row, a file, a status); ``threads_waiting_in`` finds the threads of
this process whose stack is inside a given function right now (a write blocked on a lock is *in*
``server.store.locks.lock_file``), so a test can wait until the call it started really waits.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Awaitable, Callable
from types import FrameType
from typing import TypeVar

import anyio

T = TypeVar("T")


def until(check: Callable[[], T], *, timeout: float = 10.0, every: float = 0.01, what: str = "") -> T:
    """``check()``'s first truthy answer; ``AssertionError`` naming ``what`` if none came within ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what or check} after {timeout} s")
        time.sleep(every)


async def until_async(
    check: Callable[[], T | Awaitable[T]], *, timeout: float = 10.0, every: float = 0.01, what: str = ""
) -> T:
    """``until`` for a test on an event loop: it yields to the loop between checks."""
    deadline = time.monotonic() + timeout
    while True:
        found = check()
        if isinstance(found, Awaitable):
            found = await found
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what or check} after {timeout} s")
        await anyio.sleep(every)


def threads_waiting_in(function: str, file_suffix: str) -> list[str]:
    """The names of this process's threads whose stack is inside ``function`` of a file ending ``file_suffix``
    (another thread than the caller's)."""
    names = {t.ident: t.name for t in threading.enumerate()}
    found = []
    for ident, frame in sys._current_frames().items():
        if ident == threading.get_ident():
            continue
        at: FrameType | None = frame
        while at is not None:
            if at.f_code.co_name == function and at.f_code.co_filename.endswith(file_suffix):
                found.append(names.get(ident, str(ident)))
                break
            at = at.f_back
    return found


def idles_in(thread: threading.Thread, function: str, file_suffix: str) -> bool:
    """Whether ``thread`` is waiting (its innermost frame is a ``threading`` wait: an ``Event`` or a
    ``Condition``) with ``function`` of a file ending ``file_suffix`` on its stack: it went round its loop
    once and now idles there."""
    frame = sys._current_frames().get(thread.ident or -1)
    if frame is None or frame.f_code.co_name != "wait" or not frame.f_code.co_filename.endswith("threading.py"):
        return False
    at: FrameType | None = frame
    while at is not None:
        if at.f_code.co_name == function and at.f_code.co_filename.endswith(file_suffix):
            return True
        at = at.f_back
    return False
