"""``kms mcp`` start-up: answer the handshake from a cache while the SDK is still importing.

Importing the MCP SDK (pydantic models for every protocol type) takes longer than some agent hosts
wait for a server's tool list. So the process starts the heavy import (``server.mcp_server``) on a
background thread and, meanwhile, reads newline-delimited JSON-RPC from fd 0 itself:

* ``initialize`` is answered from the cache (the SDK's own answer, recorded earlier);
* ``notifications/initialized`` is buffered;
* ``tools/list`` is answered from the cache;
* anything else (or the import finishing) ends the fast path.

Then the connection is handed to the SDK: its stdin first yields the buffered ``initialize`` and
``notifications/initialized`` lines, so the SDK session goes through its normal handshake, then the
rest of fd 0; its stdout drops the SDK's answer to that replayed ``initialize``. Answered
``tools/list`` requests are not replayed. Everything else passes through unchanged.

The cache (``mcp-handshake-cache.json`` next to the database) holds the SDK's exact result text per
protocol version. It is keyed by the installed versions of kms and the SDK, the source files that
shape the listing and whether write tools are listed; the full server rewrites it once the SDK is
loaded (``refresh_cache``, which runs the real server in-process over the SDK's stdio transport, so
the bytes are the SDK's). With no valid cache, nothing is answered early. ``KMS_MCP_FASTPATH=0`` turns
the fast path off (the cache is still written).

Only the standard library is imported here at import time: ``kms mcp`` imports this module first.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import sys
import threading
import time
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no fast path
    fcntl = None  # type: ignore[assignment]

CACHE_NAME = "mcp-handshake-cache.json"
CACHE_FORMAT = 1
# what the fast path itself may need (the flags from the settings file, the default data folder), imported
# first so that the main thread never imports a module while the loader thread is importing it
LIGHT_MODULES = ("server.settings", "server.db", "platformdirs")
HEAVY_MODULES = ("server.mcp_server", "server.tools", "server.mcp_session", "mcp.server.stdio")
_light_ready: threading.Event | None = None  # set by run(): wait for LIGHT_MODULES before using them
_DISTS = ("kms", "mcp", "mcp_types", "pydantic", "pydantic_core", "anyio")
_FLAG_VARS = ("KMS_ENABLED", "KMS_AGENT_TOOLS_ENABLED", "KMS_AGENT_WRITE_TOOLS_ENABLED")
_FLAG_KEYS = ("kms.enabled", "agent.read", "agent.write")
_HERE = os.path.dirname(os.path.abspath(__file__))


def _debug(message: str) -> None:
    if os.environ.get("KMS_LOG_LEVEL", "").upper() == "DEBUG":
        sys.stderr.write(f"kms.fastpath: {message}\n")
        sys.stderr.flush()


def _warn(message: str) -> None:
    sys.stderr.write(f"kms.fastpath: warning: {message}\n")
    sys.stderr.flush()


# ----------------------------------------------------------------------------- the cache key


def _await_light_modules() -> None:
    if _light_ready is not None and not _light_ready.wait(30):
        raise TimeoutError("the loader thread did not import the settings modules")


def cache_path(env: Any = None) -> str:
    """``<dir of the DB>/mcp-handshake-cache.json``, the DB path resolved as ``ServerConfig.from_env`` does."""
    env = os.environ if env is None else env
    db = env.get("KMS_DB_PATH")
    if db:
        folder = os.path.dirname(os.path.expanduser(db)) or "."
    else:
        _await_light_modules()
        from platformdirs import user_data_dir

        folder = user_data_dir("kms", appauthor=False)
    return os.path.join(folder, CACHE_NAME)


def _parse_flag(value: str | None) -> bool | None:
    """``server.tools.base._flag`` for a set value; None when unset/blank; ValueError when invalid."""
    if value is None or value.strip() == "":
        return None
    v = value.strip().lower()
    if v in ("1", "true", "yes", "on"):
        return True
    if v in ("0", "false", "no", "off"):
        return False
    raise ValueError(f"flag value {value!r}")


def write_tools_listed(env: Any = None) -> bool:
    """Whether write tools are listed: ``ServerConfig.from_env(env).tier_enabled("write")``.

    The environment wins; the settings file (and the 'auto' defaults, which count registered vaults)
    is read only when a flag is unset and none is explicitly off. Raises on an invalid flag value.
    """
    env = os.environ if env is None else env
    flags = [_parse_flag(env.get(var)) for var in _FLAG_VARS]
    if False in flags:
        return False
    if None in flags:
        _await_light_modules()
        from server.settings import load_settings  # an import error means no fast path, never a guess

        defaults: dict[str, Any] = {}
        try:
            settings = load_settings(env=env)
            defaults = {k: settings.get(k) for k in _FLAG_KEYS}
        except Exception:  # as ServerConfig: a broken settings file leaves env and defaults
            defaults = {}
        fallback = (True, True, False)
        flags = [f if f is not None else defaults.get(k, d)
                 for f, k, d in zip(flags, _FLAG_KEYS, fallback, strict=True)]
    return bool(flags[0] and flags[1] and flags[2])


def _installed_dists() -> list[str]:
    """The ``*.dist-info`` names (they carry the version) of kms, the SDK and pydantic on ``sys.path``."""
    found: set[str] = set()
    cwd = os.getcwd()
    for entry in sys.path:
        if not entry or entry == cwd:  # `python -m` puts the working directory first: not an install
            continue
        try:
            names = os.listdir(entry)
        except OSError:
            continue
        for name in names:
            if name.endswith(".dist-info") and name.split("-", 1)[0].lower() in _DISTS:
                found.add(name)
    return sorted(found)


def _source_stamps() -> list[list[Any]]:
    """(name, mtime_ns, size) of the kms source files that shape the tool listing and the handshake."""
    stamps: list[list[Any]] = []
    for folder, prefix in ((_HERE, ""), (os.path.join(_HERE, "tools"), "tools/")):
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            continue
        for e in entries:
            if e.name.endswith(".py") and e.is_file():
                st = e.stat()
                stamps.append([prefix + e.name, st.st_mtime_ns, st.st_size])
    return stamps


def cache_key(env: Any = None) -> dict[str, Any]:
    return {
        "format": CACHE_FORMAT,
        "python": sys.version,
        "dists": _installed_dists(),
        "sources": _source_stamps(),
        "writeTools": write_tools_listed(env),
    }


def load_cache(env: Any = None) -> dict[str, Any] | None:
    """The cache if it exists, parses and matches this process's key; otherwise None."""
    path = cache_path(env)
    try:
        with open(path, "rb") as f:
            cache = json.load(f)
    except (OSError, ValueError):
        return None
    try:
        key = cache_key(env)
    except Exception as exc:  # an invalid flag: the full server reports it
        _debug(f"no cache key ({exc})")
        return None
    if not isinstance(cache, dict) or cache.get("key") != key:
        _debug("handshake cache does not match this configuration")
        return None
    versions = cache.get("protocolVersions")
    init, tools = cache.get("initialize"), cache.get("toolsList")
    if not (isinstance(versions, list) and isinstance(init, dict) and isinstance(tools, dict)
            and cache.get("latest") in versions and all(v in init and v in tools for v in versions)):
        return None
    return cache


# ----------------------------------------------------------------------------- writing the cache


def _capture_sdk_answers(server: Any, versions: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """Per protocol version, the exact result text the SDK sends for ``initialize`` and ``tools/list``.

    Runs ``server`` in-process behind the SDK's own ``stdio_server`` (explicit streams), so the
    serialisation is the one the real transport uses.
    """
    import queue

    import anyio
    from mcp.server.stdio import stdio_server

    class Feed:
        def __init__(self) -> None:
            self.q: queue.Queue[str] = queue.Queue()

        def readline(self) -> str:
            return self.q.get()

    class Sink:
        def __init__(self) -> None:
            self.q: queue.Queue[str] = queue.Queue()

        def write(self, s: str) -> int:
            self.q.put(s)
            return len(s)

        def flush(self) -> None:
            pass

    def result_text(line: str, rid: int) -> str:
        prefix = f'{{"jsonrpc":"2.0","id":{rid},"result":'
        line = line.rstrip("\n")
        if not (line.startswith(prefix) and line.endswith("}")):
            raise ValueError(f"unexpected SDK answer {line[:200]!r}")
        text = line[len(prefix):-1]
        json.loads(text)
        return text

    async def one(version: str) -> tuple[str, str]:
        feed, sink = Feed(), Sink()

        def drive() -> tuple[str, str]:
            try:
                feed.q.put(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": version, "capabilities": {},
                    "clientInfo": {"name": "kms-cache", "version": "0"}}}) + "\n")
                init = result_text(sink.q.get(timeout=30), 1)
                feed.q.put('{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
                feed.q.put('{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
                tools = result_text(sink.q.get(timeout=30), 2)
                return init, tools
            finally:
                feed.q.put("")  # EOF ends the session

        async with stdio_server(stdin=anyio.wrap_file(feed), stdout=anyio.wrap_file(sink)) as (r, w):
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.run, r, w, server.create_initialization_options())
                return await anyio.to_thread.run_sync(drive)

    async def every() -> dict[str, tuple[str, str]]:
        return {v: await one(v) for v in versions}

    return anyio.run(every)


def build_cache(server: Any, env: Any = None) -> dict[str, Any]:
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION

    key = cache_key(env)
    answers = _capture_sdk_answers(server, tuple(HANDSHAKE_PROTOCOL_VERSIONS))
    return {
        "key": key,
        "protocolVersions": list(HANDSHAKE_PROTOCOL_VERSIONS),
        "latest": LATEST_HANDSHAKE_VERSION,
        "initialize": {v: a[0] for v, a in answers.items()},
        "toolsList": {v: a[1] for v, a in answers.items()},
    }


def _write_atomic(path: str, data: bytes) -> None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{CACHE_NAME}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def refresh_cache(server: Any, write_listed: bool, env: Any = None) -> bool:
    """(Re)write the cache from the real ``server``; True when the file changed.

    ``write_listed`` is the running server's own ``tier_enabled("write")``: if the fast path's
    reading of the flags disagrees, nothing is written (the cache would be keyed wrongly).
    """
    cache = build_cache(server, env)
    if cache["key"]["writeTools"] != write_listed:
        _warn("the fast path reads the write flags differently from the server; handshake cache not written")
        invalidate_cache(env)
        return False
    path = cache_path(env)
    data = json.dumps(cache, ensure_ascii=False, indent=1).encode()
    try:
        with open(path, "rb") as f:
            if f.read() == data:
                return False
    except OSError:
        pass
    _write_atomic(path, data)
    _debug(f"handshake cache written to {path}")
    return True


def invalidate_cache(env: Any = None) -> None:
    try:
        os.unlink(cache_path(env))
    except OSError:
        pass


class CacheRefresh:
    """The cache rewrite on a daemon thread, started once the server is built."""

    def __init__(self, server: Any, write_listed: bool, delay: float) -> None:
        self.done = threading.Event()
        self._stop = threading.Event()
        self._args = (server, write_listed, delay)
        self.thread = threading.Thread(target=self._run, name="kms-handshake-cache", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        server, write_listed, delay = self._args
        try:
            if delay and self._stop.wait(delay):
                return
            refresh_cache(server, write_listed)
        except OSError as exc:  # e.g. a read-only data folder: just no fast start
            _debug(f"handshake cache not written ({exc})")
        except Exception as exc:  # the cache is an optimisation: never let it disturb the server
            _warn(f"handshake cache not written ({type(exc).__name__}: {exc})")
        finally:
            self.done.set()

    def finish(self, timeout: float) -> None:
        """At shutdown: let a running rewrite complete (briefly); a delayed one is skipped."""
        self._stop.set()
        self.done.wait(timeout)


# ----------------------------------------------------------------------------- the fast path


def _jsonrpc(msg: Any, method: str) -> bool:
    return (isinstance(msg, dict) and msg.get("jsonrpc") == "2.0" and msg.get("method") == method
            and set(msg) <= {"jsonrpc", "id", "method", "params"})


def _request_id_ok(msg: dict[str, Any]) -> bool:
    return type(msg.get("id")) in (int, str)


def _is_initialize(msg: Any) -> bool:
    if not (_jsonrpc(msg, "initialize") and _request_id_ok(msg)):
        return False
    p = msg.get("params")
    info = p.get("clientInfo") if isinstance(p, dict) else None
    return (isinstance(p, dict) and isinstance(p.get("protocolVersion"), str)
            and isinstance(p.get("capabilities"), dict) and isinstance(info, dict)
            and isinstance(info.get("name"), str) and isinstance(info.get("version"), str))


def _is_initialized(msg: Any) -> bool:
    if not _jsonrpc(msg, "notifications/initialized") or "id" in msg:
        return False
    p = msg.get("params")
    return p is None or (isinstance(p, dict) and set(p) <= {"_meta"} and isinstance(p.get("_meta", {}), dict))


def _is_tools_list(msg: Any) -> bool:
    if not (_jsonrpc(msg, "tools/list") and _request_id_ok(msg)):
        return False
    p = msg.get("params")
    if p is None:
        return True
    if not isinstance(p, dict) or not set(p) <= {"_meta", "cursor"} or p.get("cursor") is not None:
        return False
    meta = p.get("_meta")
    return meta is None or (isinstance(meta, dict) and set(meta) <= {"progressToken"})


def _response(rid: Any, result_text: str) -> bytes:
    rid_text = json.dumps(rid, ensure_ascii=False)
    return ('{"jsonrpc":"2.0","id":' + rid_text + ',"result":' + result_text + "}\n").encode()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


class _Loader(threading.Thread):
    """Imports the SDK and the server on a background thread; pokes ``wake`` when done."""

    def __init__(self) -> None:
        super().__init__(name="kms-import", daemon=True)
        self.error: BaseException | None = None
        self.light = threading.Event()
        self.wake_r, self.wake_w = os.pipe()

    def run(self) -> None:
        try:
            for name in LIGHT_MODULES:
                importlib.import_module(name)
            self.light.set()
            for name in HEAVY_MODULES:
                importlib.import_module(name)
        except BaseException as exc:  # re-raised by the main thread's own import
            self.error = exc
        finally:
            self.light.set()
            os.write(self.wake_w, b"x")


class _SdkStdin:
    """Raw reader for the SDK: the buffered bytes first, then the protocol descriptor."""

    def __init__(self, prefix: bytes, fd: int) -> None:
        import io

        class Raw(io.RawIOBase):
            def readable(self) -> bool:
                return True

            def readinto(self, b: Any) -> int:
                nonlocal prefix
                if prefix:
                    n = min(len(b), len(prefix))
                    b[:n] = prefix[:n]
                    prefix = prefix[n:]
                    return n
                data = os.read(fd, len(b))
                b[:len(data)] = data
                return len(data)

        self.text = io.TextIOWrapper(io.BufferedReader(Raw()), encoding="utf-8", errors="replace")


class _SdkStdout:
    """Text sink for the SDK's writer: drops the SDK's answer to the replayed ``initialize``."""

    def __init__(self, fd: int, drop_id: Any, sent: bytes | None, env: Any) -> None:
        self.fd = fd
        self.drop_id = drop_id
        self.pending = drop_id is not None
        self.sent = sent
        self.env = env
        self.partial = b""

    def write(self, s: str) -> int:
        data = self.partial + s.encode("utf-8")
        if not self.pending:
            self.partial = b""
            _write_all(self.fd, data)
            return len(s)
        lines = data.split(b"\n")
        self.partial = lines.pop()
        out = []
        for line in lines:
            if self.pending and self._is_replayed_answer(line):
                self.pending = False
                continue
            out.append(line + b"\n")
        if not self.pending:
            out.append(self.partial)
            self.partial = b""
        if out:
            _write_all(self.fd, b"".join(out))
        return len(s)

    def _is_replayed_answer(self, line: bytes) -> bool:
        try:
            msg = json.loads(line)
        except ValueError:
            return False
        if not (isinstance(msg, dict) and "method" not in msg and msg.get("id") == self.drop_id
                and type(msg.get("id")) is type(self.drop_id)):
            return False
        if self.sent is not None and msg != json.loads(self.sent):
            _warn("the SDK answered initialize differently from the handshake cache; cache dropped")
            _debug(f"SDK: {line[:300]!r}; cache: {self.sent[:300]!r}")
            invalidate_cache(self.env)
        return True

    def flush(self) -> None:
        pass


class Handoff:
    """What the fast path read and answered, and the streams that hand the connection to the SDK."""

    def __init__(self, cache: dict[str, Any], env: Any) -> None:
        self.cache = cache
        self.env = env
        self.used_cache = True
        self.answered: list[str] = []
        self.replay: list[bytes] = []
        self.rest = b""
        self.init_id: Any = None
        self.init_sent: bytes | None = None
        self.version: str | None = None
        self.initialized_seen = False
        self.ended = ""
        # the wire gets private descriptors; fd 0 reads /dev/null and fd 1 goes to stderr, so stray
        # prints (ours, the SDK's, a child's) cannot corrupt the stream (what the SDK's claim does).
        # Raises OSError before anything is diverted if the descriptors cannot be duplicated.
        self.in_fd = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
        try:
            self.out_fd = fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3)
        except OSError:
            os.close(self.in_fd)
            raise
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        try:
            os.dup2(2, 1)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, 1)
            os.close(null)

    def _handle(self, line: bytes) -> bool:
        """Answer or buffer one complete line; False ends the fast path (the line is not consumed)."""
        try:
            msg = json.loads(line)
        except ValueError:
            return False
        if self.version is None:
            if not _is_initialize(msg):
                return False
            requested = msg["params"]["protocolVersion"]
            self.version = requested if requested in self.cache["protocolVersions"] else self.cache["latest"]
            self.init_id = msg["id"]
            self.init_sent = _response(msg["id"], self.cache["initialize"][self.version])
            _write_all(self.out_fd, self.init_sent)
            self.replay.append(line)
            self.answered.append("initialize")
            return True
        if _is_initialized(msg) and not self.initialized_seen:
            self.initialized_seen = True
            self.replay.append(line)
            return True
        if _is_tools_list(msg):
            _write_all(self.out_fd, _response(msg["id"], self.cache["toolsList"][self.version]))
            self.answered.append("tools/list")
            return True
        return False

    def serve(self, loader: _Loader) -> None:
        """Read and answer until a message needs the SDK, the import is done, or stdin ends."""
        buf = b""
        try:
            while True:
                nl = buf.find(b"\n")
                if nl >= 0:
                    if loader.error is not None:
                        self.ended = "the import failed"
                        break
                    if not self._handle(buf[:nl + 1]):
                        self.ended = f"a message for the SDK: {buf[:min(nl, 300)].decode(errors='replace')}"
                        break
                    buf = buf[nl + 1:]
                    continue
                ready, _, _ = select.select([self.in_fd, loader.wake_r], [], [])
                if loader.wake_r in ready:
                    self.ended = "the SDK is loaded"
                    break
                chunk = os.read(self.in_fd, 65536)
                if not chunk:
                    self.ended = "end of input"
                    break
                buf += chunk
        except OSError as exc:  # e.g. the client went away: the SDK sees the same and ends the session
            self.ended = f"{exc}"
        except Exception as exc:  # a bug here must not cost the session: the SDK takes over as is
            self.ended = f"{type(exc).__name__}: {exc}"
            _warn(f"fast path stopped ({self.ended})")
        self.rest = buf

    def streams(self) -> dict[str, Any]:
        """``stdio_server(**streams)`` keyword arguments (the SDK is loaded by now)."""
        import anyio

        stdin = _SdkStdin(b"".join(self.replay) + self.rest, self.in_fd).text
        stdout = _SdkStdout(self.out_fd, self.init_id, self.init_sent, self.env)
        return {"stdin": anyio.wrap_file(stdin), "stdout": anyio.wrap_file(stdout)}


def run(argv: list[str]) -> int:
    """``kms mcp``: import in the background, answer the handshake from the cache, then serve with the SDK."""
    global _light_ready
    started = time.perf_counter()
    loader = _Loader()
    _light_ready = loader.light
    loader.start()
    handoff: Handoff | None = None
    if fcntl is not None and os.environ.get("KMS_MCP_FASTPATH", "1") != "0":
        try:
            cache = load_cache(os.environ)
        except Exception as exc:  # never let the optimisation stop the server
            _debug(f"cache unreadable ({type(exc).__name__}: {exc})")
            cache = None
        if cache is not None:
            try:
                handoff = Handoff(cache, os.environ)
            except OSError as exc:  # no private descriptors: the SDK claims fd 0/1 itself as usual
                _debug(f"no fast path ({exc})")
        if handoff is not None:
            handoff.serve(loader)
            _debug(f"answered {', '.join(handoff.answered) or 'nothing'} from the handshake cache; "
                   f"{(time.perf_counter() - started) * 1000:.0f} ms after start, {handoff.ended}, hands over")
    loader.join()
    from server.mcp_server import main  # re-raises an import error from the loader thread

    return main(argv, handoff=handoff)
