"""The vault summary every front end shows: vaults, their note counts and when they were indexed.

``kms status``, ``kms vault list``, ``kms doctor`` and the dashboard's header all read this one
overview. It is cheap by default (the counts come from indexes: the dashboard asks after
every change it sees); the flagged-note count needs a pass over the notes, so only the
commands that show it ask for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import apsw

from server.store.db import rows


@dataclass(frozen=True)
class VaultSummary:
    name: str
    root: str
    notes: int
    hidden: int
    last_indexed_at: float | None
    flagged: int | None = None  # notes whose frontmatter was not parsed; None = not counted
    dialect: str | None = None  # the rules its notes are read by (None until first indexed)
    sync: str | None = None  # what keeps it in sync (``server.vault.sync_tools``; None: not looked yet)
    conflicts: int | None = None  # its open conflicts (``server.index.conflicts``)
    # 'searchable' between a new vault's two index transactions (``server.index.cold``), None once complete
    index_state: str | None = None
    git_mode: str | None = None  # NULL/'off', 'commit' or 'sync' (m054; ``server.vault.git_state``)

    @property
    def git_on(self) -> bool:
        """Whether kms commits (and maybe syncs) this vault with git."""
        return self.git_mode in ("commit", "sync")

    @property
    def complete(self) -> bool:
        """False while its notes are searchable but their links, tags and counts are still being built."""
        return self.index_state is None

    @property
    def root_exists(self) -> bool:
        return Path(self.root).is_dir()

    def to_json(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "root": self.root,
            "notes": self.notes,
            "hidden": self.hidden,
            "lastIndexedAt": self.last_indexed_at,
            "dialect": self.dialect,
            "sync": self.sync,
            "conflicts": self.conflicts,
            "index": "complete" if self.complete else "searchable; links and tags still being built",
        }
        if self.flagged is not None:
            out["flagged"] = self.flagged
        return out


@dataclass(frozen=True)
class Overview:
    vaults: tuple[VaultSummary, ...] = ()

    @property
    def notes(self) -> int:
        return sum(v.notes for v in self.vaults)

    @property
    def hidden(self) -> int:
        return sum(v.hidden for v in self.vaults)

    @property
    def last_indexed_at(self) -> float | None:
        return max((v.last_indexed_at for v in self.vaults if v.last_indexed_at is not None), default=None)

    @property
    def incomplete(self) -> tuple[str, ...]:
        """The vaults searchable but not complete yet."""
        return tuple(v.name for v in self.vaults if not v.complete)

    @property
    def flagged(self) -> int | None:
        counted = [v.flagged for v in self.vaults if v.flagged is not None]
        return sum(counted) if len(counted) == len(self.vaults) else None


_FLAGGED = "(SELECT count(*) FROM notes n WHERE n.vault_id = v.id AND n.fm_error IS NOT NULL)"


def overview(conn: apsw.Connection, *, flagged: bool = False) -> Overview:
    """Every vault by name with its counts (``flagged=True`` also counts flagged notes).

    The ``+`` keeps SQLite on the partial ``notes_hidden`` index (only hidden notes) instead of
    walking every note of the vault: the count grows with the hidden notes, not the vault.
    """
    found = rows(
        conn,
        f"""SELECT v.name, v.root, v.last_indexed_at, v.dialect, v.sync, v.index_state, v.git_mode,
                   (SELECT count(*) FROM conflicts c WHERE c.vault_id = v.id AND c.resolved_at IS NULL) AS conflicts,
                   (SELECT count(*) FROM notes n WHERE n.vault_id = v.id) AS notes,
                   (SELECT count(*) FROM notes n WHERE +n.vault_id = v.id AND n.hidden_at IS NOT NULL) AS hidden,
                   {_FLAGGED if flagged else "NULL"} AS flagged
            FROM vaults v ORDER BY v.name""",
    )
    return Overview(tuple(VaultSummary(**r) for r in found))
