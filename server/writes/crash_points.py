"""Named points of the write path where a test may kill the process: the seam for fault injection.

Whether a write is applied at most once across a crash (``server.writes.once``) depends on where the
process dies, so the places that matter have names, and a test starts a real service with
``KMS_CRASH_AT=<name>``: the process kills itself (``SIGKILL``: no ``finally``, no flush, as a power cut or
``kill -9`` leaves it) when the write path reaches that point. The variable is read once, at import; unset
(every real run) a point costs one comparison with ``None``.

The points, in the order a write reaches them:

- ``write.journaled``: the write's journal is durable; no note has changed yet;
- ``write.landed``: the note files hold the new bytes; nothing of the call is committed in the database;
- ``write.recorded``: the database committed the call (index rows, provenance row, the journal's token);
  its journal is not deleted yet and the agent has no answer;
- ``git.kept``: a unit of a vault in git mode is kept to be committed (its blobs and ``git_pending`` row),
  not committed yet (``server.vault.git_units``).
"""

from __future__ import annotations

import os
import signal

POINTS = ("write.journaled", "write.landed", "write.recorded")  # (a keyed write's; ``git.kept`` is git mode's)
CRASH_AT = os.environ.get("KMS_CRASH_AT") or None


def crash_point(name: str) -> None:
    """Die here, at once and without cleaning up, when the process was started with ``KMS_CRASH_AT=name``."""
    if CRASH_AT is not None and CRASH_AT == name:
        os.kill(os.getpid(), signal.SIGKILL)
