"""Writes kms makes on its own, unasked, happen on one machine only (setting ``sync.own_writes_here``).

With one vault synced to several machines, each machine runs its own kms over its own copy. Anything kms
writes into the vault without an agent or the person asking would then be written by each of them, and the
sync tool would turn the copies into conflicts no person caused. So such writes run only where
``sync.own_writes_here`` is on (the default: one machine needs nothing), and a person who syncs a vault turns
it off on every machine but one. The one rule is ``allowed``; what asks it:

- the session note kms writes itself when a host's hooks say a session compacts or ends (actor ``capture``,
  ``server.writes.capture.capture``). The agent's own ``kms_capture`` is asked for, so it is not held back.

Not an own write, so not held back: an agent's calls and the person's commands (``kms revert``, ``kms
conflicts resolve``, ``kms restore``), and the put-back of a write a crash left half done
(``unit_journal.recover``: it finishes this machine's own interrupted call from a journal kept beside the
database). kms never writes state of one machine into the vault: locks, journals, the database and its
backups live beside the database, temp files (``.kms-*``) only for the moment of a write.
"""

from __future__ import annotations

from pathlib import Path

from server.config.settings import load_settings

SETTING = "sync.own_writes_here"


def allowed(config_path: Path | str | None) -> bool:
    """Whether this machine makes kms's own writes (``sync.own_writes_here`` in its settings file)."""
    return bool(load_settings(config_path, env={}, has_vault=True).get(SETTING))


def held_back() -> str:
    """Why an own write was not made (said in the answer instead of the write)."""
    return f"{SETTING} is off on this machine: another machine makes kms's own writes to this vault"
