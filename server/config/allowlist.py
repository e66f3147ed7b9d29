"""Which vault folders agents may add content to (create, append, insert_at).

Globs match one path segment per pattern segment (``*`` never crosses a ``/``):
``drafts/*`` allows ``drafts/x`` but neither ``drafts`` nor ``drafts/x/y``, and
``drafts`` allows exactly ``drafts``. This is deliberately stricter than a
recursive glob so a person can see exactly where agent writes may land. The
vault root is ``""`` (also spelled ``.`` or ``/`` in a pattern). An empty list
allows every folder. ``update_properties`` is exempt: it never adds body text.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from fnmatch import fnmatchcase

from server.errors import KmsError


def _norm(folder: str) -> str:
    f = folder.strip().strip("/")
    return "" if f == "." else f


class Allowlist:
    """An immutable set of single-segment folder globs."""

    def __init__(self, patterns: Iterable[str] | None = None) -> None:
        self.patterns: tuple[str, ...] = tuple(_norm(p) for p in (patterns or ()))

    @classmethod
    def parse(cls, spec: str | None) -> Allowlist:
        """From a comma/newline separated string (an env var or a settings field)."""
        if not spec:
            return cls()
        parts = [p for chunk in spec.splitlines() for p in chunk.split(",")]
        return cls(p for p in parts if p.strip())

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Allowlist:
        """``KMS_WRITE_ALLOWLIST`` (comma or newline separated), as ``server.config.settings`` documents it."""
        env = dict(os.environ) if env is None else env
        return cls.parse(env.get("KMS_WRITE_ALLOWLIST"))

    def __bool__(self) -> bool:
        return bool(self.patterns)

    def allows(self, folder: str) -> bool:
        """True if agents may write notes directly in ``folder`` (vault-relative, '' = root)."""
        if not self.patterns:
            return True
        f = _norm(folder)
        segs = f.split("/") if f else []
        for pattern in self.patterns:
            psegs = pattern.split("/") if pattern else []
            if len(psegs) == len(segs) and all(fnmatchcase(s, p) for s, p in zip(segs, psegs, strict=True)):
                return True
        return False

    def check(self, folder: str, *, what: str = "folder") -> None:
        """Raise ``folder-denied`` naming the allowed folders."""
        if not self.allows(folder):
            shown = ", ".join(p or "(vault root)" for p in self.patterns)
            raise KmsError(
                "folder-denied",
                f"writing to {what} {folder or '(vault root)'!r} is not allowed; allowed folders: {shown}",
                folder=folder,
                allowed=list(self.patterns),
            )
