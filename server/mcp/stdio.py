"""MCP's stdio transport for ``kms mcp``: the SDK frames and parses the messages, this module
supplies the two byte streams it accepts (``stdio_server(stdin=..., stdout=...)``).

Why not the SDK's own streams:
- They read each line and write and flush each reply on worker threads: three thread hand-offs
  per call, a visible share of a fast call's round trip (``bench/bench_mcp.py``). When stdin and
  stdout are pipes or sockets (an agent host), the event loop reads and writes them itself:
  non-blocking, with flow control when the client reads slowly.
- At end of input the SDK cancels the requests still running: it takes the client for gone. A
  client may just be done sending (``printf ... | kms mcp``), so the end of input is passed on
  only once what was asked has been answered (at most ``DRAIN_AT_EOF_S``).

A terminal or a file is read on a daemon thread and written on a worker thread: making a terminal
non-blocking would leak into the shell that owns it. As in the SDK, fd 0 and fd 1 point elsewhere
while serving (the null device, stderr), so a stray ``print`` or a child process can never write
into the protocol. On Windows the SDK's transport serves unchanged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, BinaryIO

import anyio

from server.mcp import wire

log = logging.getLogger("kms.mcp")

DRAIN_AT_EOF_S = 10.0
_RESPONSE_PREFIX = '{"jsonrpc":"2.0","id":'  # how the SDK writes a response (then "result" or "error")


def _is_pipe(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _key(request_id: object) -> tuple[str, str]:
    # JSON-RPC ids 1 and "1" are different requests; repr keeps any value hashable
    return (type(request_id).__name__, repr(request_id))


class _Unanswered:
    """Ids of the requests read and not yet answered (nor cancelled by the client)."""

    def __init__(self) -> None:
        self.ids: set[tuple[str, object]] = set()
        self.answered = asyncio.Event()

    def read(self, msg: object) -> None:
        """``msg`` is a message ``wire.screen`` let through: its id and params are well-formed."""
        if not isinstance(msg, dict):
            return
        if "id" in msg and "method" in msg:
            self.ids.add(_key(msg["id"]))
        elif msg.get("method") == "notifications/cancelled" and isinstance(msg.get("params"), dict):
            self._done(msg["params"].get("requestId"))  # never answered

    def wrote(self, text: str) -> None:
        if self.ids and text.startswith(_RESPONSE_PREFIX):
            end = text.find(',"', len(_RESPONSE_PREFIX))
            with contextlib.suppress(ValueError):
                self._done(json.loads(text[len(_RESPONSE_PREFIX) : end]))

    def _done(self, request_id: object) -> None:
        self.ids.discard(_key(request_id))
        if not self.ids:
            self.answered.set()

    async def wait(self, timeout: float) -> None:
        if self.ids:
            self.answered.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.answered.wait(), timeout)


class _Lines:
    """``async for line in stdin``: only lines ``wire.screen`` accepts reach the SDK; the others are
    answered here (or dropped with a logged reason). The end of input waits for the answers owed."""

    def __init__(
        self,
        readline: Callable[[], Awaitable[bytes]],
        unanswered: _Unanswered,
        reply: Callable[[bytes], Awaitable[None]],
    ) -> None:
        self._readline = readline
        self._unanswered = unanswered
        self._reply = reply

    def __aiter__(self) -> _Lines:
        return self

    async def __anext__(self) -> str:
        while True:
            try:
                line = await self._readline()
            except _Oversized as e:
                await self._refuse(wire.oversized(e.head))
                continue
            if not line:
                await self._unanswered.wait(DRAIN_AT_EOF_S)
                raise StopAsyncIteration
            if not line.strip():
                continue
            msg, refusal = wire.screen(line)
            if refusal is None:
                self._unanswered.read(msg)
                return line.decode("utf-8")  # screen parsed it: valid UTF-8
            await self._refuse(refusal)

    async def _refuse(self, refusal: wire.Refusal) -> None:
        if refusal.reply is None:
            log.warning("dropped a message: %s", refusal.reason)
        else:
            log.info("refused a request: %s", refusal.reason)
            await self._reply(refusal.reply)


class _Oversized(Exception):
    """A line longer than ``wire.MAX_LINE_BYTES``, skipped up to its end; ``head`` is its start."""

    def __init__(self, head: bytes) -> None:
        super().__init__("line too long")
        self.head = head


def _bounded_pipe_readline(reader: asyncio.StreamReader) -> Callable[[], Awaitable[bytes]]:
    """``reader.readline`` that skips a line over the limit (the stream's ``limit``) and says so."""

    async def readline() -> bytes:
        try:
            return await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as e:  # the end of input, maybe after a last line
            return e.partial
        except asyncio.LimitOverrunError:
            head = await reader.read(4096)
        while True:  # drop the rest of the line, a limit's worth at a time
            try:
                await reader.readuntil(b"\n")
                break
            except asyncio.IncompleteReadError:
                break
            except asyncio.LimitOverrunError as e:
                await reader.readexactly(e.consumed)
        raise _Oversized(head)

    return readline


class _FlowControl(asyncio.Protocol):
    """Lets a writer wait while the client has not yet read what was sent."""

    def __init__(self) -> None:
        self._resumed: asyncio.Future[None] | None = None
        self.closed = asyncio.get_running_loop().create_future()

    def pause_writing(self) -> None:
        self._resumed = asyncio.get_running_loop().create_future()

    def resume_writing(self) -> None:
        if self._resumed is not None and not self._resumed.done():
            self._resumed.set_result(None)
        self._resumed = None

    def connection_lost(self, exc: Exception | None) -> None:
        self.resume_writing()
        if not self.closed.done():
            self.closed.set_result(None)

    async def drained(self) -> None:
        if self._resumed is not None:
            await self._resumed


class _Out:
    """``await stdout.write(text)`` / ``flush()``."""

    def __init__(
        self,
        write: Callable[[bytes], Awaitable[None]],
        unanswered: _Unanswered,
        after_write: Callable[[], None] | None = None,
    ) -> None:
        self._write = write
        self._unanswered = unanswered
        self._after_write = after_write

    async def write(self, text: str) -> None:
        await self._write(text.encode("utf-8"))
        self._unanswered.wrote(text)
        if self._after_write is not None:
            self._after_write()

    async def flush(self) -> None:
        pass  # every write is already handed to the pipe


def _reader_thread(f: BinaryIO, loop: asyncio.AbstractEventLoop) -> Callable[[], Awaitable[bytes]]:
    """Lines read by a daemon thread: a read blocked on a terminal must not keep the process alive
    after SIGTERM or Ctrl-C (the SDK's worker-thread read did)."""
    lines: asyncio.Queue[bytes | _Oversized] = asyncio.Queue()

    def pump() -> None:
        while True:
            data = f.readline(wire.MAX_LINE_BYTES + 1)
            line: bytes | _Oversized = data
            if len(data) > wire.MAX_LINE_BYTES and not data.endswith(b"\n"):
                while (rest := f.readline(wire.MAX_LINE_BYTES)) and not rest.endswith(b"\n"):
                    pass  # dropped up to the end of the line
                line = _Oversized(data[:4096])
            try:
                loop.call_soon_threadsafe(lines.put_nowait, line)
            except RuntimeError:  # the loop is closed: the session is over
                return
            if not data:
                return

    threading.Thread(target=pump, name="kms-stdin", daemon=True).start()

    async def readline() -> bytes:
        line = await lines.get()
        if isinstance(line, _Oversized):
            raise line
        return line

    return readline


def _threaded_write(f: BinaryIO) -> Callable[[bytes], Awaitable[None]]:
    def write_all(data: bytes) -> None:
        f.write(data)
        f.flush()

    async def write(data: bytes) -> None:
        await anyio.to_thread.run_sync(write_all, data)

    return write


@contextlib.asynccontextmanager
async def kms_stdio_server(after_write: Callable[[], None] | None = None) -> AsyncIterator[tuple[Any, Any]]:
    """Like ``mcp.server.stdio.stdio_server()``; see the module docstring for the differences.
    ``after_write`` is called after each message is handed to the client (the server's start-up hook; not on
    Windows, where the SDK's transport serves)."""
    # deferred: the SDK's transport after import_sdk_lean (serve.main)
    from mcp.server.stdio import stdio_server

    if sys.platform == "win32":  # pragma: no cover
        async with stdio_server() as streams:
            yield streams
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    transports: list[asyncio.BaseTransport] = []
    flow: _FlowControl | None = None
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        unanswered = _Unanswered()
        if _is_pipe(wire_in):
            reader = asyncio.StreamReader(limit=wire.MAX_LINE_BYTES)
            read_transport, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(wire_in, "rb", 0)
            )
            transports.append(read_transport)
            readline: Callable[[], Awaitable[bytes]] = _bounded_pipe_readline(reader)
        else:
            readline = _reader_thread(os.fdopen(wire_in, "rb"), loop)

        if _is_pipe(wire_out):
            flow = _FlowControl()
            write_transport, _ = await loop.connect_write_pipe(lambda: flow, os.fdopen(wire_out, "wb", 0))
            transports.append(write_transport)

            async def write_piped(data: bytes) -> None:
                write_transport.write(data)  # sent at once when the pipe has room
                await flow.drained()

            write: Callable[[bytes], Awaitable[None]] = write_piped
        else:
            write = _threaded_write(os.fdopen(wire_out, "wb"))
        stdin, stdout = _Lines(readline, unanswered, write), _Out(write, unanswered, after_write)
        async with stdio_server(stdin=stdin, stdout=stdout) as streams:  # type: ignore[arg-type]
            yield streams
    finally:
        for transport in transports:
            transport.close()  # a write transport sends what is still buffered, then closes
        try:
            if flow is not None:  # also when cancelled (SIGTERM): what was answered still goes out
                with anyio.CancelScope(shield=True), anyio.move_on_after(2.0):
                    await flow.closed
        finally:
            os.dup2(saved_in, 0)
            os.dup2(saved_out, 1)
            for fd in (saved_in, saved_out, devnull):
                os.close(fd)
