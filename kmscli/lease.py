"""A `kms claude` session token kept alive only while its launcher lives (issue 37: tokens as leases)."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from server.activity import tokens
from server.store import db


class LeaseKeeper:
    """Keeps a session token alive while this launcher runs: a daemon thread renews its lease every third of
    it (``tokens.renew_lease``), so two renewals may fail in a row (a busy database) before it lapses. When the
    launcher dies, even by SIGKILL, the renewals stop and the token lapses within one lease: the service then
    refuses it and ends the session (``tokens.end_lapsed_sessions``). A launcher that was frozen past its lease
    (the machine slept, Ctrl-Z) renews it on waking, which brings the session back (``renew_lease``); a revoked
    token is not renewed, and the thread stops: claude runs on without kms's tools."""

    def __init__(self, db_path: Path, token_id: str, lease_s: float) -> None:
        self.db_path, self.token_id, self.lease_s = db_path, token_id, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="kms-lease", daemon=True)

    @classmethod
    def start(cls, db_path: Path, token_id: str, lease_s: float, blocked: set[signal.Signals]) -> LeaseKeeper:
        """``blocked``: the signals the launcher's main thread waits for, never taken by this thread."""
        keeper = cls(db_path, token_id, lease_s)
        if not hasattr(signal, "pthread_sigmask"):
            keeper._thread.start()
            return keeper
        # born with the signals blocked (a thread inherits the mask): every signal stays for ``run_child``'s
        # sigtimedwait on the main thread, none is taken by this one
        old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
        try:
            keeper._thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        return keeper

    def _renew(self) -> None:
        conn = db.connect(self.db_path)
        try:
            while not self._stop.wait(self.lease_s / 3):
                try:
                    if not tokens.renew_lease(conn, self.token_id, self.lease_s):
                        return
                except Exception:  # noqa: S112 - a busy or locked database: the next beat tries again
                    continue
        finally:
            conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
