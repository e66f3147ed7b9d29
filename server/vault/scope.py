"""Which vaults a session sees, by id: every vault, or the ones its scope names (one or several).

A session's scope is vault *names* (``SessionConfig.vault_names``: the launcher's ``--vault``, a service
token's ``vault:`` scopes); a read turns them into a ``VaultScope`` once (``ToolContext.vault_filter``),
and every query that narrows by vault asks it for its SQL (``sql``, ``rids_sql``) or a vault id's fate
(``sees``), so no site handles "one id or None" by itself. A note outside the scope is as if absent.

Functions over the index take ``Vaults``: a ``VaultScope``, or the shorthand of one vault's id (the CLI's
``--vault``) or None (every vault), made a ``VaultScope`` by ``VaultScope.of``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import apsw

from server.errors import KmsError
from server.vault.registry import list_vaults


@dataclass(frozen=True)
class VaultScope:
    """Every vault (``ids`` None) or the vaults with these ids (never empty: no vault in common is an error
    raised where the scope is made)."""

    ids: tuple[int, ...] | None = None

    @classmethod
    def of(cls, value: Vaults) -> VaultScope:
        if isinstance(value, VaultScope):
            return value
        return cls() if value is None else cls((int(value),))

    @classmethod
    def only(cls, ids: Iterable[int]) -> VaultScope:
        found = tuple(dict.fromkeys(int(i) for i in ids))
        if not found:
            raise ValueError("a vault scope names at least one vault")
        return cls(found)

    @property
    def every(self) -> bool:
        return self.ids is None

    def sees(self, vault_id: int) -> bool:
        return self.ids is None or vault_id in self.ids

    def sql(self, column: str = "n.vault_id") -> tuple[str, tuple[int, ...]]:
        """`` AND column = ?`` (or ``IN (?, ...)``) and its parameters; nothing for every vault."""
        if self.ids is None:
            return "", ()
        if len(self.ids) == 1:
            return f" AND {column} = ?", self.ids
        return f" AND {column} IN ({', '.join('?' * len(self.ids))})", self.ids

    def named_sql(self, column: str = "n.vault_id") -> tuple[str, dict[str, int]]:
        """``sql`` for a query with named parameters (``:vault0``, ...)."""
        if self.ids is None:
            return "", {}
        names = {f"vault{i}": vid for i, vid in enumerate(self.ids)}
        return f" AND {column} IN ({', '.join(':' + k for k in names)})", names

    def rids_sql(self, column: str) -> tuple[str, tuple[int, ...]]:
        """`` AND column IN (the rids of the scope's notes)``: for the tables keyed by rid (tags, links), whose
        index answers it without reading a note row."""
        if self.ids is None:
            return "", ()
        inner, params = self.sql("vault_id")
        return f" AND {column} IN (SELECT rid FROM notes WHERE {inner.removeprefix(' AND ')})", params


Vaults = VaultScope | int | None

EVERY = VaultScope()


def scope_ids(conn: apsw.Connection, names: Iterable[str]) -> dict[str, int]:
    """The registered vaults among ``names``, by name (a vault removed since a session began is as if absent)."""

    by_name = {v.name: v.id for v in list_vaults(conn)}
    return {n: by_name[n] for n in names if n in by_name}


def resolve(conn: apsw.Connection, names: tuple[str, ...]) -> VaultScope:
    """The scope of a session that sees ``names`` (empty: every vault); ``not-found`` when none is registered."""
    if not names:
        return EVERY
    ids = scope_ids(conn, names)
    if not ids:
        said = f"vault {names[0]!r}, which is" if len(names) == 1 else f"vaults {', '.join(names)}, which are"
        raise KmsError("not-found", f"this session is scoped to {said} not registered (any more): start a new session")
    return VaultScope.only(ids.values())
