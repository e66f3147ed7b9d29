"""The tiers' names, in chain order, and the session switch each tier's setting is carried by: the plain data
of the tier chain, with no settings schema behind it.

``server.config.tiers`` builds the chain's rules (each tier's setting and its ``parent=`` chain in the schema)
on these names. They live apart so the scope grammar (``server.config.scopes``) can read them without the
schema: the schema validates ``remote.max_scopes`` with that grammar, and the schema must not import itself.
"""

from __future__ import annotations

from typing import Literal

Tier = Literal["read", "write", "edit", "organize"]
WriteTier = Literal["write", "edit", "organize"]  # the tiers whose tools go through the write guard

TIERS: tuple[Tier, ...] = ("read", "write", "edit", "organize")  # the chain's order: each needs the ones before

# the switches a tier's chain can hold -> the SessionConfig field carrying each (effective: auto resolved)
SWITCH_FIELDS: dict[str, str] = {
    "kms.enabled": "enabled",
    "agent.read": "read_enabled",
    "agent.write": "write_enabled",
    "agent.edit": "edit_enabled",
    "agent.organize": "organize_enabled",
}
