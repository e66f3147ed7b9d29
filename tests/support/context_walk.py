"""Follow a write call's ``WriteContext`` through kms's modules (issue 43's walk): ``bench/walk_append.py``
prints it, ``tests/unit/test_write_seam.py`` holds it to its bounds.

The walk is the frames that hold the call's ``WriteContext`` (an argument, a local, or ``self`` in one of
its methods), Python frames of kms's own modules (``server.*``) only, seen through ``sys.setprofile``:

- *rooms crossed* (``entries``): each time the context enters a module other than the one of the
  context-holding frame it came from (a module entered twice counts twice: a room crossed again);
- *climbs back*: a context-holding frame returning to the context-holding frame below it in another module;
- *returns*: every return of a context-holding frame.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")


class Walk:
    """A ``sys.setprofile`` hook following the frames that hold a ``WriteContext``."""

    def __init__(self, ctx_type: type) -> None:
        self.ctx_type = ctx_type
        self.stack: list[tuple[str, bool]] = []  # (module, holds the context) of kms's frames
        self.entries: list[str] = []  # module.function where the context crossed into a room
        self.climbs = self.returns = 0

    def _holds(self, frame: FrameType) -> bool:
        return any(isinstance(v, self.ctx_type) for v in frame.f_locals.values())

    def _below(self) -> str | None:
        return next((m for m, held in reversed(self.stack) if held), None)

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event not in ("call", "return"):
            return
        mod = str(frame.f_globals.get("__name__", "?"))
        if not mod.startswith("server."):
            return
        if event == "call":
            holds = self._holds(frame)
            if holds and self._below() != mod:
                self.entries.append(f"{mod.removeprefix('server.')}.{frame.f_code.co_name}")
            self.stack.append((mod, holds))
            return
        if not self.stack:
            return
        mod, holds = self.stack.pop()
        if holds:
            self.returns += 1
            below = self._below()
            if below is not None and below != mod:
                self.climbs += 1


def walk(ctx_type: type, fn: Callable[[], T]) -> tuple[Walk, T]:
    """Run ``fn`` under a ``Walk``; the walk and what ``fn`` returned."""
    w = Walk(ctx_type)
    sys.setprofile(w)
    try:
        out = fn()
    finally:
        sys.setprofile(None)
    return w, out
