"""A Dendron workspace as its ``dendron.yml`` declares it: which vaults it has, what each is called and where
its notes are, so a ``[[dendron://name/note]]`` link can be taken to the kms vault (and folder) that holds them.

The file is Dendron's own: ``workspace.vaults[]`` (version 5 and later) or the older top-level ``vaults:``
(versions 1 to 4), each vault an ``fsPath`` relative to the workspace root and a ``name`` (else its
``fsPath``'s last part; a seed vault is named by its ``seed``). Where the notes are follows Dendron's
``VaultUtils.getRelPath``: a self-contained vault keeps them in ``fsPath/notes``, a vault of a remote
workspace in ``workspace/fsPath``, a seed in ``seeds/<seed>/fsPath``.

A kms vault is Dendron's in one of two ways (``find``): its root holds ``dendron.yml`` (a workspace added by
its root: every Dendron vault inside it is a folder of the one kms vault), or an ancestor's ``dendron.yml``
(up to ``MAX_UP`` folders up) lists the folder as one of its vaults (a vault folder added by itself). Reading
never raises: what could not be read is a ``problem`` the caller shows (``kms vault add``), and the vault is
added all the same.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

CONFIG = "dendron.yml"
MAX_UP = 4  # ancestors looked at for the dendron.yml of a vault folder (fsPaths like vaults/main are 2 deep)


@dataclass(frozen=True)
class DendronVault:
    name: str  # what [[dendron://name/note]] says
    fs_path: str  # as dendron.yml writes it
    notes: Path  # the folder its notes are in (absolute)


@dataclass(frozen=True)
class Workspace:
    root: Path  # the folder holding dendron.yml
    vaults: tuple[DendronVault, ...] = ()
    problem: str | None = None  # what of dendron.yml could not be read (the vaults read are kept)


@dataclass(frozen=True)
class Found:
    """What a folder is in Dendron's terms."""

    workspace: Workspace
    inside: tuple[tuple[str, str], ...] = ()  # (Dendron name, its folder in this kms vault: '' = the root)
    at_root: bool = False  # dendron.yml is in the folder itself (the workspace was added by its root)

    @property
    def is_dendron(self) -> bool:
        """Whether the folder is read as Dendron: a workspace root, or a vault its workspace lists."""
        return self.at_root or bool(self.inside)


def _problem(config: Path, why: str) -> str:
    return f"{config}: {why}"


def _vault(entry: Any, root: Path) -> DendronVault | str:
    """One ``vaults[]`` entry, or why it is not one."""
    if not isinstance(entry, dict) or not isinstance(entry.get("fsPath"), str) or not entry["fsPath"].strip():
        return "a vault without an fsPath"
    fs_path = entry["fsPath"].strip()
    seed, remote_ws = entry.get("seed"), entry.get("workspace")
    rel = PurePosixPath(fs_path.replace("\\", "/"))
    if entry.get("selfContained") is True:
        rel = rel / "notes"
    elif isinstance(remote_ws, str) and remote_ws.strip():
        rel = PurePosixPath(remote_ws.strip()) / rel
    elif isinstance(seed, str) and seed.strip():
        rel = PurePosixPath("seeds", seed.strip()) / rel
    notes = Path(os.path.normpath(root / rel))
    if isinstance(seed, str) and seed.strip():
        name = seed.strip()
    elif isinstance(entry.get("name"), str) and entry["name"].strip():
        name = entry["name"].strip()
    else:
        name = PurePosixPath(fs_path).name or root.name  # fsPath "." : the workspace folder's own name
        name = root.name if name in ("", ".") else name
    return DendronVault(name, fs_path, notes)


def read_config(config: Path) -> Workspace:
    """The workspace a ``dendron.yml`` declares; never raises (an unreadable file is a ``problem``)."""
    # deferred: only where there is a dendron.yml: listing the MCP tools loads no YAML reader
    from server.vault import yaml12

    root = config.parent
    try:
        text = config.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        return Workspace(root, problem=_problem(config, f"could not be read ({exc.__class__.__name__})"))
    try:
        data = yaml12.load(text)
    except yaml12.YamlError as exc:
        return Workspace(root, problem=_problem(config, f"is not valid YAML ({str(exc)[:160]})"))
    if not isinstance(data, dict):
        return Workspace(root, problem=_problem(config, "is not a mapping of settings"))
    workspace = data.get("workspace")
    entries = workspace.get("vaults") if isinstance(workspace, dict) else None
    if entries is None:
        entries = data.get("vaults")  # versions 1-4: vaults at the top level
    if not isinstance(entries, list) or not entries:
        return Workspace(root, problem=_problem(config, "lists no vaults (workspace.vaults)"))
    vaults: list[DendronVault] = []
    skipped: list[str] = []
    for entry in entries:
        got = _vault(entry, root)
        if isinstance(got, str):
            skipped.append(got)
        elif any(v.name == got.name for v in vaults):
            skipped.append(f"a second vault named {got.name!r}")
        else:
            vaults.append(got)
    problem = _problem(config, "skipped " + ", ".join(skipped)) if skipped else None
    return Workspace(root, tuple(vaults), problem)


def _resolved(path: Path) -> Path:
    try:
        return path.resolve()
    except OSError:
        return path


def find(root: str | os.PathLike[str]) -> Found | None:
    """The Dendron workspace the folder ``root`` is, or is a vault of; None when there is none.

    ``dendron.yml`` in the folder: every vault of the workspace inside it is a folder of this kms vault.
    Else the nearest ancestor's ``dendron.yml`` (up to ``MAX_UP``): the folder is Dendron's when that file
    lists it as a vault (``inside`` holds that one vault at ''); a file that does not list it, or cannot be
    read, is returned with nothing ``inside`` so the caller can say so."""
    base = _resolved(Path(root))
    config = base / CONFIG
    if config.is_file():
        ws = read_config(config)
        inside: list[tuple[str, str]] = []
        for v in ws.vaults:
            notes = _resolved(v.notes)
            if notes == base or notes.is_relative_to(base):
                inside.append((v.name, notes.relative_to(base).as_posix() if notes != base else ""))
        return Found(ws, tuple(inside), at_root=True)
    for parent in list(base.parents)[:MAX_UP]:
        config = parent / CONFIG
        if not config.is_file():
            continue
        ws = read_config(config)
        mine = tuple((v.name, "") for v in ws.vaults if _resolved(v.notes) == base)
        if not mine and ws.problem is None:
            listed = ", ".join(f"{v.name} ({v.fs_path})" for v in ws.vaults)
            why = f"does not list this folder among its vaults: {listed}"
            ws = Workspace(ws.root, ws.vaults, _problem(config, why))
        return Found(ws, mine)
    return None
