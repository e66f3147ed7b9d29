"""The ``kms claude`` harness: a fake ``claude`` (a small Python script written into tmp_path) that records its
argv, env, the MCP config file's content and modes while it runs, and its signal handling, into a JSON
file; a private environment for it; the launcher run as ``python -m kmscli claude ...`` in a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

from server.mcp import service
from server.store.db import connect
from server.vault.registry import add_vault
from support.net import free_port

ROOT = Path(__file__).resolve().parents[2]

FAKE_CLAUDE = textwrap.dedent(
    """\
    #!{python}
    import json, os, signal, stat, sys, time
    record = os.environ["FAKE_CLAUDE_RECORD"]
    argv = sys.argv[1:]
    out = {{"argv": argv, "env": {{k: v for k, v in os.environ.items() if k.startswith(("KMS_", "FAKE_"))}},
            "blocked": sorted(int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])),
            "signals": [], "pid": os.getpid()}}
    configs = [a for a in argv if a.startswith("--mcp-config=")]
    if configs:
        path = configs[0].split("=", 1)[1]
        out["config_path"] = path
        out["config"] = json.load(open(path))
        out["mode"] = stat.S_IMODE(os.stat(path).st_mode)
        out["dir_mode"] = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
    settings = [a for a in argv if a.startswith("--settings=")]
    if settings:
        path = settings[0].split("=", 1)[1]
        out["settings_path"] = path
        out["settings"] = json.load(open(path))
        out["settings_mode"] = stat.S_IMODE(os.stat(path).st_mode)
        contract = os.path.join(os.path.dirname(path), "session.json")
        out["contract"] = json.load(open(contract))
        out["contract_mode"] = stat.S_IMODE(os.stat(contract).st_mode)
    def save():
        with open(record + ".tmp", "w") as f:
            json.dump(out, f)
        os.replace(record + ".tmp", record)
    if os.environ.get("FAKE_CLAUDE_WAIT"):
        # Take signals one delivery at a time (sigtimedwait), so a doubled one is seen, with its sender.
        watch = {{signal.SIGTERM, signal.SIGINT, signal.SIGWINCH, signal.SIGHUP}}
        signal.pthread_sigmask(signal.SIG_BLOCK, watch)
        out["ready"] = True
        save()
        stop, deadline = None, time.time() + 30
        while time.time() < deadline and (stop is None or time.time() < stop):
            info = signal.sigtimedwait(watch, 0.02)
            if info is None:
                continue
            out["signals"].append(signal.Signals(info.si_signo).name)
            out.setdefault("senders", []).append("kernel" if info.si_code > 0 else info.si_pid)
            save()
            if info.si_signo in (signal.SIGTERM, signal.SIGINT) and stop is None:
                stop = time.time() + 1.0  # linger: a doubled signal would show up
        save()
        sys.exit(int(os.environ.get("FAKE_CLAUDE_EXIT", "0")))
    save()
    if os.environ.get("FAKE_CLAUDE_KILL_SELF"):
        os.kill(os.getpid(), signal.SIGTERM)
    sys.exit(int(os.environ.get("FAKE_CLAUDE_EXIT", "0")))
    """
)


def launcher_env(tmp_path: Path) -> dict[str, str]:
    """A private environment: own config, DB, runtime dir and a fake claude; one vault registered."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "claude"
    fake.write_text(FAKE_CLAUDE.format(python=sys.executable))
    fake.chmod(0o755)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    vault = tmp_path / "vault"
    vault.mkdir()
    (vault / "a.md").write_text("# A\n")
    base = {k: v for k, v in os.environ.items() if not k.startswith(("KMS_", "FAKE_", "XDG_"))}
    e = {
        **base,
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path / "home"),
        "KMS_CONFIG": str(tmp_path / "config" / "config.toml"),
        "KMS_DB_PATH": str(tmp_path / "kms.db"),
        "KMS_CLAUDE_BIN": str(fake),
        "XDG_RUNTIME_DIR": str(runtime),
        "FAKE_CLAUDE_RECORD": str(tmp_path / "record.json"),
        "KMS_SERVICE_USE": "0",  # the service has tests of its own (tests/e2e/test_claude_service_e2e.py)
    }
    conn = connect(e["KMS_DB_PATH"])
    add_vault(conn, vault, "notes")
    conn.close()
    return e


def kms(env: dict[str, str], *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "kmscli", *args],
        env=env,
        cwd=kw.pop("cwd", env["HOME"] if Path(env["HOME"]).is_dir() else None),
        capture_output=True,
        text=True,
        timeout=60,
        **kw,
    )


def record(env: dict[str, str]) -> dict:
    return json.loads(Path(env["FAKE_CLAUDE_RECORD"]).read_text())


HOOK_CLAUDE = textwrap.dedent(
    """\
    #!{python}
    # A stand-in claude that runs the hooks a Claude Code would for one short session: those of the person's
    # settings, the project's (and its local ones) and the --settings file, for SessionStart, one Edit of the
    # file $FAKE_CLAUDE_EDIT (PostToolUse) and SessionEnd; command hooks with the event on stdin, HTTP hooks
    # POSTed with their allowed variables expanded. What each hook answered goes into the record.
    import json, os, re, subprocess, sys, urllib.error, urllib.request, uuid
    argv, cwd, home = sys.argv[1:], os.getcwd(), os.environ["HOME"]
    if argv == ["--version"]:  # kms doctor asks
        print("2.0.0 (Claude Code stand-in)")
        sys.exit(0)
    files = [os.path.join(home, ".claude", "settings.json"), os.path.join(cwd, ".claude", "settings.json"),
             os.path.join(cwd, ".claude", "settings.local.json")]
    files += [a.split("=", 1)[1] for a in argv if a.startswith("--settings=")]
    host_session = next((a.split("=", 1)[1] for a in argv if a.startswith("--session-id=")), str(uuid.uuid4()))
    ran = []

    def expand(text, allowed):
        for var in allowed:
            text = text.replace("${{" + var + "}}", os.environ.get(var, "")).replace("$" + var, os.environ.get(var, ""))
        return text

    def fire(name, tool=None, **extra):
        event = {{"session_id": host_session, "cwd": cwd, "hook_event_name": name, "transcript_path": "", **extra}}
        for path in files:
            if not os.path.exists(path):
                continue
            for group in json.load(open(path)).get("hooks", {{}}).get(name, []):
                if group.get("matcher") and tool and not re.fullmatch(group["matcher"], tool):
                    continue
                for hook in group["hooks"]:
                    if hook["type"] == "command":
                        done = subprocess.run(hook["command"], shell=True, input=json.dumps(event), cwd=cwd,
                                              capture_output=True, text=True, timeout=60)
                        answer, status = done.stdout, done.returncode
                    else:
                        allowed = hook.get("allowedEnvVars", [])
                        headers = {{k: expand(v, allowed) for k, v in hook.get("headers", {{}}).items()}}
                        headers["Content-Type"] = "application/json"
                        request = urllib.request.Request(hook["url"], json.dumps(event).encode(), headers)
                        try:
                            with urllib.request.urlopen(request, timeout=60) as reply:
                                answer, status = reply.read().decode(), reply.status
                        except urllib.error.HTTPError as e:
                            answer, status = e.read().decode(), e.code
                    ran.append({{"event": name, "file": path, "type": hook["type"], "status": status,
                                "answer": answer}})

    fire("SessionStart", source="startup")
    edited = os.environ["FAKE_CLAUDE_EDIT"]
    with open(edited, "a") as f:
        f.write("\\nA line the host's own Edit tool added.\\n")
    fire("PostToolUse", tool="Edit", tool_name="Edit", tool_input={{"file_path": edited}}, tool_response={{}})
    fire("SessionEnd", reason="other")
    record = os.environ["FAKE_CLAUDE_RECORD"]
    with open(record, "w") as f:
        json.dump({{"argv": argv, "env": {{k: v for k, v in os.environ.items() if k.startswith("KMS_")}},
                   "hooks": ran}}, f)
    """
)


def hook_claude(env: dict[str, str]) -> None:
    """Make ``env``'s claude the stand-in that runs its hooks (``HOOK_CLAUDE``) instead of ``FAKE_CLAUDE``."""
    Path(env["KMS_CLAUDE_BIN"]).write_text(HOOK_CLAUDE.format(python=sys.executable))


@contextlib.contextmanager
def on_the_service(env: dict[str, str]) -> Iterator[dict[str, str]]:
    """``env`` for `kms claude` sessions served by the kms service on a free port of their own (started by the
    launcher, up to 30 s later); whatever service they started is gone after the block."""
    env.update(KMS_SERVICE_USE="1", KMS_SERVICE_PORT=str(free_port()), KMS_SERVICE_START_WAIT="30")
    try:
        yield env
    finally:
        state = service.read_state(Path(env["KMS_DB_PATH"]))
        if state is not None:
            os.kill(state.pid, signal.SIGKILL)
