"""The remote listener's life inside the service process (``server.mcp.service``): open while remote mode is on.

``RemoteListener.follow`` runs in the service's task group for as long as the service serves. Every
``POLL_S`` it looks at the settings file (only re-read when it changed): remote mode on with an address, and
no listener, opens one (its own uvicorn server on loopback ``remote.port``, same process, same hub); off
(``kms remote off``, ``disable``) closes it at once: the listening socket closes, open streams are cut within
``GRACE_S``. Changed remote settings reopen it. When the service stops, the listener stops with it (the task
group waits for it), so SIGTERM and ``kms service stop`` clean up both. Without remote mode nothing here runs
on the local path: the poll only stats a file.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable
from typing import Any

import anyio
import uvicorn

from server.config.remote import RemoteSettings
from server.config.settings import default_config_path, load_settings
from server.mcp.remote.app import remote_app

log = logging.getLogger("kms.service")
POLL_S = 0.25
GRACE_S = 1


def wanted_settings() -> RemoteSettings:
    return RemoteSettings.from_settings(load_settings())


class RemoteListener:
    """See the module docstring. ``bind``: sockets for a port (the service's ``loopback_sockets``);
    ``announce``: told the remote listener's (url, port) when it opens, None when it closes (the state file)."""

    def __init__(
        self,
        hub: Any,
        *,
        bind: Callable[[int], list[socket.socket]],
        announce: Callable[[RemoteSettings | None, str | None], None],
        uvicorn_options: dict[str, Any],
        extra_public_routes: list[Any] | None = None,
    ) -> None:
        self.hub = hub
        self.extra_public_routes = extra_public_routes or []  # more routes on the public origin (remote_app)
        self.bind = bind
        self.announce = announce
        self.uvicorn_options = uvicorn_options
        self.server: Any = None
        self.current: RemoteSettings | None = None
        self.failed: RemoteSettings | None = None  # settings it could not open with (not retried until changed)
        self._seen: tuple[float, int] | None = None
        self.done: Any = None  # set when the open listener's server has ended

    def _file_changed(self) -> bool:
        try:
            st = os.stat(default_config_path())
            seen = (st.st_mtime, st.st_size)
        except OSError:
            seen = (0.0, 0)
        changed = seen != self._seen
        self._seen = seen
        return changed

    async def follow(self, stopping: Callable[[], bool]) -> None:
        """Open, close and reopen the listener as the settings say until ``stopping()``; then close it."""
        async with anyio.create_task_group() as tg:
            wanted = wanted_settings()
            while not stopping():
                if wanted.active and wanted != self.current and wanted != self.failed:
                    await self._close()
                    self._open(tg, wanted)
                elif not wanted.active and self.current is not None:
                    log.info("remote mode is off: the remote listener closes")
                    await self._close()
                await anyio.sleep(POLL_S)
                if self._file_changed():
                    try:
                        wanted = wanted_settings()
                    except Exception:  # a settings file being written: the next poll reads it
                        log.exception("could not read the remote settings")
            await self._close()

    def _open(self, tg: Any, settings: RemoteSettings) -> None:

        try:
            sockets = self.bind(settings.port)
        except OSError as e:
            self.failed = settings
            log.error("the remote listener could not open on 127.0.0.1:%d: %s", settings.port, e)
            self.announce(None, f"port {settings.port}: {e.strerror or e}")
            return
        app = remote_app(self.hub, settings, extra_public_routes=self.extra_public_routes)
        config = uvicorn.Config(
            app,
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=GRACE_S,
            proxy_headers=False,  # the terminator's X-Forwarded-* are not trusted for anything
            **self.uvicorn_options,
        )
        server = uvicorn.Server(config)
        self.server, self.current, self.failed = server, settings, None
        done = self.done = anyio.Event()

        async def serve() -> None:
            try:
                await server.serve(sockets=sockets)
            finally:
                for sock in sockets:
                    sock.close()
                done.set()

        tg.start_soon(serve)
        log.info("remote listener on 127.0.0.1:%d for %s", settings.port, settings.issuer)
        self.announce(settings, None)

    async def _close(self) -> None:
        server, self.server, self.current = self.server, None, None
        if server is None:
            return
        server.should_exit = True
        with anyio.move_on_after(GRACE_S + 3):
            await self.done.wait()
        self.announce(None, None)
