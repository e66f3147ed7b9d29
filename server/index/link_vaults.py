"""The vault a link names: ``[[dendron://name/note]]`` resolves into the kms vault (and the folder in it) that
holds the Dendron vault ``name``, as its workspace's ``dendron.yml`` says (the ``dendron_vaults`` rows, m032,
kept by ``server.vault.registry.settle_workspace``), whatever the kms vault is called.

The one rule, as SQL over a link row ``links`` and its linking note ``s`` (``server.index.link_resolve`` resolves
every link with it; ``named_vault`` asks it for one name): a Dendron vault of the linking vault's own
workspace, the linking kms vault itself first (a workspace added by its root holds all its vaults); else the
kms vault of that name (a vault added without a ``dendron.yml``, or by its Dendron name); else nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from server.vault import dendron
from server.vault.registry import Vault


def _dendron(column: str) -> str:
    return f"""(SELECT {column} FROM dendron_vaults dv WHERE dv.name = links.target_vault
        AND dv.workspace = (SELECT w.workspace FROM dendron_vaults w WHERE w.vault_id = s.vault_id LIMIT 1)
        ORDER BY dv.vault_id = s.vault_id DESC, dv.vault_id LIMIT 1)"""


# For a link that names a vault (links.target_vault IS NOT NULL): the kms vault it resolves in, and what
# its key is prefixed with there (the Dendron vault's folder in that kms vault, '' or 'folder/').
NAMED_VAULT = f"coalesce({_dendron('dv.vault_id')}, (SELECT v.id FROM vaults v WHERE v.name = links.target_vault))"
NAMED_PREFIX = f"coalesce({_dendron('dv.key_prefix')}, '')"


def named_vault(conn: apsw.Connection, src_vault_id: int, name: str) -> tuple[int, str] | None:
    """(kms vault id, folder of the Dendron vault in it: '' or 'folder/', lower-cased) that
    ``[[dendron://name/...]]`` written in the vault ``src_vault_id`` resolves into; None if none."""
    found = conn.execute(
        f"SELECT {NAMED_VAULT}, {NAMED_PREFIX} FROM (SELECT ? AS target_vault) links, (SELECT ? AS vault_id) s",
        (name, src_vault_id),
    ).fetchall()
    return (int(found[0][0]), str(found[0][1])) if found and found[0][0] is not None else None


@dataclass(frozen=True)
class Mapped:
    """One vault of a Dendron workspace and where kms reads it."""

    name: str  # its Dendron name
    fs_path: str  # as dendron.yml writes it
    path: str  # the folder its notes are in
    vault: str | None  # the kms vault its dendron:// links resolve into (None: no registered vault holds it)
    folder: str  # its folder in that kms vault ('' for the vault's root)


@dataclass(frozen=True)
class WorkspaceView:
    """What ``kms vault add`` says of a vault's Dendron workspace."""

    root: str  # the workspace folder (of dendron.yml)
    at_root: bool  # the kms vault is the workspace root (it holds every vault inside it)
    vaults: list[Mapped]
    problem: str | None  # what of dendron.yml could not be read, or why it does not name this folder


def workspace_view(conn: apsw.Connection, vault: Vault) -> WorkspaceView | None:
    """The Dendron workspace ``vault`` is (or is a vault of), each of its vaults with the kms vault its
    ``dendron://`` links resolve into from ``vault`` (``named_vault``); None when there is no ``dendron.yml``."""
    found = dendron.find(vault.root)
    if found is None:
        return None
    names = {r[0]: r[1] for r in conn.execute("SELECT id, name FROM vaults")}
    mapped: list[Mapped] = []
    for v in found.workspace.vaults:
        target = named_vault(conn, vault.id, v.name)
        folder = target[1].rstrip("/") if target else ""
        if target and target[0] == vault.id:  # the key prefix is lower-cased: the folder as written
            folder = next((f for n, f in found.inside if n == v.name), folder)
        mapped.append(Mapped(v.name, v.fs_path, str(v.notes), names.get(target[0]) if target else None, folder))
    return WorkspaceView(str(found.workspace.root), found.at_root, mapped, found.workspace.problem)
