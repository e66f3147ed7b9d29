"""What one vault's index did (``server.index.indexer.index_vault``): counts, errors, times."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IndexReport:
    vault: str
    scanned: int = 0
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    renamed: int = 0
    flagged: int = 0
    errors: list[str] = field(default_factory=list)
    seconds: float = 0.0
    # a new vault's first index (``server.index.cold``): when its notes became searchable, and whether
    # the index completed a vault a crash had left searchable but not complete
    searchable_seconds: float | None = None
    completed: bool = False

    @property
    def changed(self) -> int:
        return self.added + self.updated + self.deleted + self.renamed
