"""A write unit's git step: after the call's provenance row is committed, the files it changed in each vault
in git mode are kept for that vault's commit (``server.vault.git_units``: in the answer as blobs and a
``git_pending`` row; the commit itself after it). Vaults not in git mode are passed over.

The guard calls this once per unit with only what the step needs (the files that landed and the unit's
names), not the call's whole ``WriteContext``: the context's walk ends at the guard's provenance row.
"""

from __future__ import annotations

from collections.abc import Sequence

import apsw

from server.vault import git_units
from server.vault.registry import Vault
from server.writes.context import Landed
from server.writes.crash_points import crash_point


def keep_unit(conn: apsw.Connection, landed: Sequence[Landed], unit: git_units.Unit) -> None:
    """The unit's commit in each git-mode vault it changed, kept (``git_units.enqueue``) in landing order."""
    by_vault: dict[int, list[git_units.File]] = {}
    vaults: dict[int, Vault] = {}
    for f in landed:
        if f.vault.git_mode != "off":
            by_vault.setdefault(f.vault.id, []).append((f.path, f.before, f.after))
            vaults[f.vault.id] = f.vault
    if not by_vault:
        return
    for vault_id, files in by_vault.items():
        git_units.enqueue(conn, vaults[vault_id], files, unit)
    crash_point("git.kept")
