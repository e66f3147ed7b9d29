"""Exit codes kms chose, kept when a Ctrl-C it handled landed in the wrong place (imported by ``entry``:
no heavy imports)."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def forget_handled_interrupt() -> None:
    """A Ctrl-C that lands while ``exec`` runs a string (a dataclass or namedtuple built by a deferred
    import) is marked unhandled by CPython even when kms catches it, and ``python -m kmscli`` (how hosts
    start ``kms mcp`` and hooks) then ends by SIGINT instead of the exit code kms chose. Each evaluation
    of a string clears that mark first; one that runs nothing clears it and nothing else. Called as kms
    exits (``entry``): an interrupt still on its way out is marked again when it leaves the module run."""
    exec("")  # noqa: S102


@contextlib.contextmanager
def interrupts_noticed() -> Iterator[None]:
    """Ctrl-C inside the block raises ``KeyboardInterrupt`` as usual; one that Python swallowed (it landed in a
    weakref callback, such as an import's module-lock cleanup: "Exception ignored in ... KeyboardInterrupt")
    is raised again when the block ends, so a long ``kms vault add`` never ignores the person's Ctrl-C."""
    heard: list[int] = []

    def on_sigint(signum: int, _frame: object) -> None:
        heard.append(signum)
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if heard:
        raise KeyboardInterrupt
