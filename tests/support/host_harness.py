"""Driving kms as an agent host does: the entry ``kms mcp-config HOST --install`` wrote, read back from the
host's own config file, started (stdio) or reached (the service, over HTTP) with the real SDK client.

What the in-process tests cannot see and a host's session goes through: a process of its own started from
exactly the host's entry (its command, args and env, the host's environment under it), the first calls,
a pause while the person reads (every background timer of the process fires and its threads come and go),
then the writes, then SIGTERM. A process that dies of a signal (segfault, abort) fails, with its stderr.

The transport here is the SDK's stdio transport minus its shutdown: a host's process is stopped with SIGTERM
by the test and its exit code looked at, which ``mcp.client.stdio`` does not expose.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import tomllib
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import Process
from anyio.streams.text import TextReceiveStream

from kmscli import jsonc
from kmscli.hosts import HOSTS, STDIO_ONLY, Host

SIGNAL_DEATHS = (139, 134, 137)  # a shell's 128+SIGSEGV/SIGABRT/SIGKILL; a negative returncode is one too
STDIO_HOSTS = tuple(HOSTS)
HTTP_HOSTS = tuple(h for h in HOSTS if h not in STDIO_ONLY)


def read_entry(host: Host, home: Path) -> dict[str, Any]:
    """The kms entry as the host reads it from its own file under ``home`` (JSON, JSON with comments, TOML)."""
    path = host.config_path({"HOME": str(home)})
    text = path.read_text(encoding="utf-8")
    doc: Any = tomllib.loads(text) if host.fmt == "toml" else json.loads(jsonc.strip(text))
    for key in (*host.key, "kms"):
        doc = doc[key]
    return dict(doc)


def host_environment(home: Path, entry_env: Mapping[str, str]) -> dict[str, str]:
    """What a host starts a stdio server with: its own small environment (HOME, PATH, locale), the entry's
    ``env`` over it; none of the test runner's ``KMS_*``. ``PYTHONFAULTHANDLER`` so a crash prints where."""
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")}
    return {**base, "HOME": str(home), "PYTHONFAULTHANDLER": "1", **entry_env}


def faulthandler_args(command: str, args: list[str]) -> list[str]:
    """The entry's args with ``-X faulthandler`` first when the command is a Python: the entry's ``-E``
    makes the interpreter ignore ``PYTHONFAULTHANDLER``, and a segfault's stack is what the failure must show.
    The entry is otherwise started as written."""
    return ["-X", "faulthandler", *args] if re.search(r"python[\d.]*(\.exe)?$", Path(command).name) else args


def expand_http(host: str, entry: Mapping[str, Any], secrets: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """(url, headers) of an HTTP entry as its host resolves them: ``${env:VAR}``/``${VAR}`` from the host's
    environment (``secrets``: the variables the person exported), VS Code's ``${input:kms-token}`` from its
    prompt (the secret it was given), Codex's ``bearer_token_env_var``, Claude Code's ``headersHelper``
    (run as its shell command)."""
    url = str(entry.get("url") or entry.get("serverUrl"))
    if "headersHelper" in entry:
        import subprocess

        out = subprocess.run(
            entry["headersHelper"], shell=True, capture_output=True, text=True, timeout=60, check=True
        ).stdout
        return url, dict(json.loads(out))
    if "bearer_token_env_var" in entry:
        return url, {"Authorization": f"Bearer {secrets[entry['bearer_token_env_var']]}"}

    def expand(text: str) -> str:
        def one(m: re.Match[str]) -> str:
            name = m.group(1)
            if name.startswith("input:"):
                return secrets[f"input:{host}"]
            return secrets[name.removeprefix("env:")]

        return re.sub(r"\$\{([^}]+)\}", one, text)

    return url, {k: expand(str(v)) for k, v in dict(entry.get("headers") or {}).items()}


@dataclass
class Launched:
    """A stdio server a host started: its process, and its stderr once it exited."""

    process: Process
    stderr_path: Path
    returncode: int | None = None

    @property
    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace") if self.stderr_path.exists() else ""

    async def terminate(self, timeout: float = 30.0) -> int:
        """SIGTERM, as hosts stop their servers; the exit code (SIGKILL after ``timeout``: then it is -9)."""
        if self.process.returncode is None:
            self.process.send_signal(signal.SIGTERM)
        with anyio.move_on_after(timeout):
            while self.process.returncode is None:
                await anyio.sleep(0.05)
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        self.returncode = self.process.returncode
        return int(self.returncode) if self.returncode is not None else -9


@contextlib.asynccontextmanager
async def stdio_entry(
    entry: Mapping[str, Any], home: Path, cwd: Path, stderr_path: Path
) -> AsyncIterator[tuple[Launched, Any]]:
    """Start ``entry`` (command, args, env) as a host does and yield (the process, the SDK's transport
    streams) — a ``Transport`` for ``mcp.client.Client``. Leaving stops the process (SIGKILL) if the
    test did not."""
    import mcp_types
    from mcp.shared.message import SessionMessage

    command = str(entry["command"])
    args = faulthandler_args(command, [str(a) for a in entry.get("args", [])])
    env = host_environment(home, {str(k): str(v) for k, v in dict(entry.get("env") or {}).items()})
    with open(stderr_path, "wb") as errlog:
        process = await anyio.open_process([command, *args], env=env, cwd=cwd, stderr=errlog)
    launched = Launched(process, stderr_path)
    read_send, read_recv = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_send, write_recv = anyio.create_memory_object_stream[SessionMessage](16)

    async def reader() -> None:
        assert process.stdout is not None
        buffer = ""
        async with read_send:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
                async for chunk in TextReceiveStream(process.stdout):
                    lines = (buffer + chunk).split("\n")
                    buffer = lines.pop()
                    for line in lines:
                        if line.strip():
                            message = mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                            await read_send.send(SessionMessage(message))

    async def writer() -> None:
        assert process.stdin is not None
        async with write_recv:
            with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
                async for msg in write_recv:
                    data = msg.message.model_dump_json(by_alias=True, exclude_unset=True) + "\n"
                    await process.stdin.send(data.encode())

    async with anyio.create_task_group() as tg:
        tg.start_soon(reader)
        tg.start_soon(writer)
        try:
            yield launched, (read_recv, write_send)
        finally:
            if process.returncode is None:
                process.kill()
            with anyio.CancelScope(shield=True):
                await process.wait()
                launched.returncode = process.returncode
            tg.cancel_scope.cancel()


def signal_death(returncode: int | None) -> bool:
    """A crash, not an exit kms chose: killed by a signal (negative) or a shell's 128+signal code. Also
    ``-SIGTERM`` after the host's SIGTERM: kms handles SIGTERM (it ends its sessions and exits 0), so dying of
    it means the handler was not there (uvicorn raising the signal again over Python's default: the service's
    clean-up never ran)."""
    return returncode is None or returncode < 0 or returncode in SIGNAL_DEATHS


# ----------------------------------------------------------------------------- the writes a host makes


def write_tool_names() -> list[str]:
    """Every tool of the write, edit and organize tiers, from the one registry (not a hand list)."""
    from server.mcp.tools import tool_names

    return [*tool_names("write"), *tool_names("edit"), *tool_names("organize")]


def seed_host_folder(vault: Path, folder: str) -> None:
    """What one host's writes work on, in ``folder`` of the vault: a subfolder to move and rename, and the
    folder the move goes into."""
    (vault / folder / "sub").mkdir(parents=True, exist_ok=True)
    (vault / folder / "sub" / f"{folder} in sub.md").write_text(f"# {folder} in sub\n\nA note in a folder.\n")
    (vault / folder / "dest").mkdir(parents=True, exist_ok=True)
    (vault / folder / "dest" / f"{folder} in dest.md").write_text(f"# {folder} in dest\n\nWhere sub goes.\n")


@dataclass
class WriteRun:
    """Each write tool called: (tool, is_error, the result's structured content)."""

    calls: list[tuple[str, bool, dict[str, Any]]] = field(default_factory=list)

    def failed(self) -> list[tuple[str, dict[str, Any]]]:
        return [(name, data) for name, is_error, data in self.calls if is_error]


async def call_every_write_tool(client: Any, folder: str) -> WriteRun:
    """Call each write-tier tool once with arguments that succeed, in an order where each call's note exists.
    A tool the registry gains without a recipe here fails the run (named), so the harness keeps up."""
    run = WriteRun()
    ids: dict[str, str] = {}

    async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        result = await client.call_tool(tool, args)
        data = result.structured_content
        if data is None:
            data = json.loads(result.content[0].text) if result.content else {}
        run.calls.append((tool, bool(result.is_error), dict(data)))
        return dict(data)

    async def version(note_id: str) -> str:
        result = await client.call_tool("kms_read", {"noteId": note_id})
        return str((result.structured_content or {}).get("version", ""))

    title = f"{folder} created"
    recipes: dict[str, Any] = {
        "kms_create": lambda: {
            "title": title,
            "folder": folder,
            "content": "first line\n\n## Log\n\nlogged\n",
            "tags": ["e2e"],
        },
        "kms_append": lambda: {"noteId": ids["created"], "content": "appended by the host"},
        "kms_update_properties": lambda: {"noteId": ids["created"], "set": {"status": "draft"}},
        "kms_insert_at": lambda: {
            "noteId": ids["created"],
            "content": "inserted",
            "position": {"afterHeading": "Log"},
        },
        "kms_remember": lambda: {"about": "person", "text": f"{folder}: the host remembered this", "category": "E2E"},
        "kms_create_many": lambda: {
            "notes": [{"title": f"{folder} many A", "folder": folder}, {"title": f"{folder} many B", "folder": folder}]
        },
        "kms_link": lambda: {"noteId": ids["created"], "target": f"{folder} many A"},
        "kms_capture": lambda: {"decisions": [f"{folder}: decided to test as hosts do"]},
        "kms_edit": None,  # needs the note's version: below
        "kms_move": lambda: {"noteId": ids["many A"], "folder": f"{folder}/dest"},
        "kms_rename": lambda: {"noteId": ids["created"], "title": f"{folder} renamed"},
        "kms_trash": lambda: {"noteId": ids["many B"]},
        "kms_move_folder": lambda: {"folder": f"{folder}/sub", "to": f"{folder}/dest"},
        "kms_rename_folder": lambda: {"folder": f"{folder}/dest/sub", "name": "sub2"},
    }
    for tool in write_tool_names():
        if tool not in recipes:
            run.calls.append((tool, True, {"error": "harness", "message": "no recipe in host_harness for it"}))
            continue
        if tool == "kms_edit":
            args = {
                "noteId": ids["created"],
                "version": await version(ids["created"]),
                "edits": [{"replace": {"old": "first line", "new": "edited line"}}],
            }
        else:
            args = recipes[tool]()
        data = await call(tool, args)
        if tool == "kms_create" and "noteId" in data:
            ids["created"] = data["noteId"]
        if tool == "kms_create_many":
            made = [r for r in data.get("results", []) if r.get("noteId")]
            for r, key in zip(made, ("many A", "many B"), strict=False):
                ids[key] = r["noteId"]
    return run
