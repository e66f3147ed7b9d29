"""A token's scopes: the ceiling on what a session reached through the service may do.

Grammar (``kms token create --scopes``): words separated by spaces or commas.

- ``tier:read`` | ``tier:write`` | ``tier:edit`` | ``tier:organize``: the highest tier (each implies the ones
  before it); default ``read``;
- ``vault:NAME``: a vault the session sees; repeatable (``vault:work vault:notes``: those two); default: every
  vault the settings allow. A vault outside them is as if absent, for every read and write;
- ``folder:GLOB``: folders a write may go to, narrowing ``write.allowlist`` (never widening it); repeatable;
- ``approval``: every write waits for the person, whatever ``write.approval`` says;
- ``admin``: the service's own management (never given to an agent; no tool is listed for it).

A session's powers are the person's settings AND the token (``narrow``): a scope can only take away.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.config.allowlist import folder_glob_problem, normalize_folder_glob
from server.config.tier_names import SWITCH_FIELDS, TIERS, Tier

if TYPE_CHECKING:
    from server.config.session_contract import SessionConfig

_WORD = re.compile(r"[\s,]+")


class ScopeError(ValueError):
    """A scope string kms cannot read: says which word and what is valid."""


@dataclass(frozen=True)
class Scopes:
    tier: Tier = "read"
    vaults: tuple[str, ...] = ()  # empty: every vault
    folders: tuple[str, ...] = ()  # empty: no narrowing
    approval: bool = False
    admin: bool = False

    @classmethod
    def parse(cls, text: str) -> Scopes:
        tier: Tier = "read"
        vaults: list[str] = []
        folders: list[str] = []
        approval = admin = False
        for word in (w for w in _WORD.split(text.strip()) if w):
            key, sep, value = word.partition(":")
            if key == "tier" and sep and value in TIERS:
                tier = TIERS[TIERS.index(value)]
            elif key == "vault" and sep and value:
                if value not in vaults:
                    vaults.append(value)
            elif key == "folder" and sep and value:
                problem = folder_glob_problem(value)
                if problem:
                    raise ScopeError(f"{word!r}: {problem}")
                folders.append(normalize_folder_glob(value))
            elif word == "approval":
                approval = True
            elif word == "admin":
                admin = True
            else:
                raise ScopeError(
                    f"unknown scope {word!r}; valid: tier:{'|'.join(TIERS)}, vault:NAME, folder:GLOB, approval, admin"
                )
        return cls(tier, tuple(vaults), tuple(folders), approval, admin)

    def text(self) -> str:
        """The canonical spelling (``parse`` gives this back)."""
        words = [f"tier:{self.tier}"]
        words += [f"vault:{v}" for v in self.vaults]
        words += [f"folder:{f}" for f in self.folders]
        words += ["approval"] if self.approval else []
        words += ["admin"] if self.admin else []
        return " ".join(words)

    def within(self, ceiling: Scopes) -> Scopes:
        """These scopes clamped to ``ceiling`` (a remote grant's ``remote.max_scopes``): the lower tier, the vaults
        both name (the ceiling's when these name none or none in common), the folders of these that lie in one of
        the ceiling's (else the ceiling's), approval if either asks it; never admin. Never more than ``ceiling``."""
        tier = TIERS[min(TIERS.index(self.tier), TIERS.index(ceiling.tier))]
        vaults = tuple(v for v in self.vaults if v in ceiling.vaults) if ceiling.vaults else self.vaults
        folders = self.folders
        if ceiling.folders:
            inside = tuple(f for f in self.folders if any(_folder_in(f, c) for c in ceiling.folders))
            folders = inside or ceiling.folders
        return Scopes(tier, vaults or ceiling.vaults, folders, self.approval or ceiling.approval, False)

    def narrow(self, config: SessionConfig) -> SessionConfig:
        """The session a client with these scopes gets, from the person's ``config``: tiers above the ceiling
        off, the vaults the two have in common, the allowlist narrowed, approval forced. Never more than
        ``config`` nor than the token: a token and settings with no vault in common are a ``ScopeError``."""
        ceiling = TIERS.index(self.tier)
        tiers = {t: TIERS.index(t) <= ceiling for t in TIERS}
        allowed = config.vault_names
        vaults = allowed
        if self.vaults:
            vaults = tuple(v for v in self.vaults if v in allowed) if allowed else self.vaults
            if not vaults:  # the two leave no vault in common
                raise ScopeError(f"the token reaches {_names(self.vaults)}, the settings only {_names(allowed)}")
        narrowed = dataclasses.replace(
            config.with_vaults(vaults),
            write_enabled=config.write_enabled and tiers["write"],
            edit_enabled=config.edit_enabled and tiers["edit"],
            organize_enabled=config.organize_enabled and tiers["organize"],
            token_folders=config.token_folders + self.folders,
            approval="always" if self.approval else config.approval,
            token_tier=self.tier,
        )
        # what the token, not the settings, turned off: a refusal names the token's scope for these
        cut = tuple(k for k, f in SWITCH_FIELDS.items() if getattr(config, f) and not getattr(narrowed, f))
        return dataclasses.replace(narrowed, token_cut=config.token_cut + cut)


def _folder_in(folder: str, ceiling: str) -> bool:
    """Whether every note ``folder`` names also lies under ``ceiling`` (plain folders; a glob only when equal)."""
    plain = ceiling.rstrip("/")
    return folder == ceiling or (not any(c in ceiling for c in "*?[") and folder.startswith(plain + "/"))


def _names(vaults: tuple[str, ...]) -> str:
    return ("vault " if len(vaults) == 1 else "vaults ") + ", ".join(repr(v) for v in vaults)
