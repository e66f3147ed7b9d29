"""The tier chain, read → write → edit → organize: its one home.

A tier is named by the setting that switches it (``agent.write``); the switches it needs are that
setting and its ``parent=`` chain in the settings schema (``kms.enabled`` → ``agent.read`` → …), so
each tier needs every tier before it and kms itself, and the environment variables come from the
schema too. The tool listing, the read gate, the write guard, the disabled-tier message, ``kms doctor``
and the generated tool reference read it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from server.config.schema import SETTINGS
from server.config.tier_names import SWITCH_FIELDS as SWITCH_FIELDS  # the chain's plain data, where callers look
from server.config.tier_names import TIERS as TIERS
from server.config.tier_names import Tier as Tier
from server.config.tier_names import WriteTier as WriteTier

if TYPE_CHECKING:
    from server.config.session_contract import SessionConfig


@dataclass(frozen=True)
class TierRule:
    """One tier: its name, the setting that switches it, and what its tools do (for people)."""

    name: Tier
    key: str
    does: str

    @property
    def env(self) -> str:
        """The variable that carries the tier's switch into a session (the schema's)."""
        return SETTINGS[self.key].env

    @property
    def switches(self) -> tuple[str, ...]:
        """Every setting that must be on for this tier, outermost first: its ``parent=`` chain."""
        chain: list[str] = []
        key: str | None = self.key
        while key is not None:
            chain.append(key)
            key = SETTINGS[key].parent
        return tuple(reversed(chain))


CHAIN: tuple[TierRule, ...] = (  # in the order of TIERS (tier_names)
    TierRule("read", "agent.read", "search and read notes"),
    TierRule("write", "agent.write", "create notes and add to them"),
    TierRule("edit", "agent.edit", "replace and delete text in notes"),
    TierRule("organize", "agent.organize", "move, rename and trash notes"),
)
RULES: dict[Tier, TierRule] = {t.name: t for t in CHAIN}


def tier_enabled(config: SessionConfig, tier: Tier) -> bool:
    """A tier is on when every switch of its chain is (kms itself and every tier below it)."""
    return not off_switches(config, tier)


def off_switches(config: SessionConfig, tier: Tier) -> tuple[str, ...]:
    """The settings of ``tier``'s chain that are off for this session, outermost first."""
    return tuple(key for key in RULES[tier].switches if not getattr(config, SWITCH_FIELDS[key]))


def disabled_message(config: SessionConfig, tool: str, tier: Tier) -> str:
    """Why ``tool`` is refused (``feature-disabled``): the settings that are off and the command that fixes it,
    or, when a service token's ``tier:`` scope is what turned it off (``config.token_cut``), that scope: the
    settings are on then, and telling the person to turn them on would fix nothing."""
    off = off_switches(config, tier) or RULES[tier].switches  # a gate that refused should name something
    by_token = [key for key in off if key in config.token_cut]
    off = tuple(key for key in off if key not in config.token_cut)
    named = " and ".join(f"{key} ({SETTINGS[key].env})" for key in off)
    fix = " and ".join(f"`kms config set {key} true`" for key in off)
    verb = "is" if len(off) == 1 else "are"
    if by_token:
        said = (
            f"{tool} needs tier:{tier}, and this session's token has the scope tier:{config.token_tier}, which "
            f"stops at {config.token_tier}. The person can connect with a token that allows it "
            f"(`kms token create --scopes tier:{tier}`)."
        )
        return said + (f" The settings {named} {verb} off too: {fix}." if off else "")
    return (
        f"{tool} is turned off for this session: {named} {verb} off. The person can turn it on with {fix} "
        "and start a new session."
    )


def tiers_prose() -> list[str]:
    """What the tool reference says about tiers: the switches each tier adds to the one before (docs/tools.md)."""
    lines = []
    for prev, rule in zip((None, *CHAIN), CHAIN, strict=False):
        had = prev.switches if prev is not None else ()
        added = ", ".join(f"`{k}` (`{SETTINGS[k].env}`)" for k in rule.switches if k not in had)
        also = f" on top of {prev.name}'s" if prev is not None else ""
        lines.append(f"- **{rule.name}** ({rule.does}): {added}{also}.")
    return lines
