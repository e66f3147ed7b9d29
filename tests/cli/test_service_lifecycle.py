"""The service's lifecycle as systemd, a terminal and ``kms service`` drive it, on real subprocesses: every way
of stopping it cleans up the same (sessions ended, session tokens revoked, state file gone, exit 0), two
starts at once make one service, and a vault added or removed while it runs is watched or dropped live."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import anyio
import apsw
import pytest
from support.net import free_port
from support.service import Served, kms_args, kms_env, run_kms, search, wait_for

from server.activity import tokens
from server.activity.session_registry import get_session
from server.config.session_contract import SessionConfig, new_session_id
from server.mcp import service
from server.vault.registry import get_vault


def session_token(conn: apsw.Connection) -> tuple[tokens.Token, str]:
    """A ``kms claude`` session's token, as the launcher makes it for the service."""
    return tokens.for_session(conn, SessionConfig.from_env(session_id=new_session_id()))


@pytest.mark.parametrize("how", ["SIGTERM", "SIGINT", "SIGHUP", "kms service stop"])
def test_every_way_of_stopping_the_service_cleans_up_and_exits_0(
    how: str, indexed: apsw.Connection, db_path: Path
) -> None:
    served = Served.start(db_path)
    try:
        token, secret = session_token(indexed)
        assert anyio.run(search, served.url, secret)["hits"]  # the session is open, its row written
        row = get_session(indexed, token.session_id)
        assert row is not None and row.ended_at is None
        if how == "kms service stop":
            stopped = run_kms("service", "stop")
            assert stopped.returncode == 0 and "stopped the kms service" in stopped.stdout, stopped.stderr
        else:
            served.proc.send_signal(getattr(signal, how))
        code, err = served.wait()
    finally:
        served.kill()
    assert code == 0, f"kms serve exited {code} on {how}: {err}"
    assert "Traceback" not in err, err
    assert not service.state_path(db_path).exists()
    row = get_session(indexed, token.session_id)
    assert row is not None and row.ended_at is not None, "the session is still shown active"
    assert tokens.verify(indexed, secret, touch=False) is None, "its session token is still accepted"
    assert tokens.get(indexed, token.id).state(time.time()) == "revoked"
    after = run_kms("service", "status")
    assert "no kms service is running" in after.stdout
    assert "stale" not in after.stderr and "without cleaning up" not in after.stderr, after.stderr


def test_a_host_token_outlives_a_service_stop(indexed: apsw.Connection, db_path: Path) -> None:
    """Only ``session`` tokens end with the service: a host's standing token reaches the next one."""
    served = Served.start(db_path)
    try:
        made = run_kms("token", "create", "--label", "cursor", "--scopes", "tier:read")
        secret = made.stdout.strip().splitlines()[-1]
        assert anyio.run(search, served.url, secret)["hits"]
        served.proc.send_signal(signal.SIGTERM)
        code, err = served.wait()
    finally:
        served.kill()
    assert code == 0, err
    assert tokens.verify(indexed, secret, touch=False) is not None


def serving_processes(port: int) -> list[int]:
    """Pids of the ``kms serve`` processes for ``port`` (Linux: their command lines)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"kmscli" in argv and b"serve" in argv and str(port).encode() in argv:
            found.append(int(entry.name))
    return found


def test_two_starts_at_once_make_one_service(indexed: apsw.Connection, db_path: Path) -> None:
    """Both find no state file; the service lock lets one serve, and the other says the one that runs."""
    port = free_port()
    env = kms_env()
    starts = [
        subprocess.Popen(
            kms_args("service", "start", "--port", str(port)),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    try:
        outs = [p.communicate(timeout=60) for p in starts]
        state = service.read_state(db_path)
        assert state is not None
        for p, (out, err) in zip(starts, outs, strict=True):
            assert p.returncode == 0, err
            assert "Traceback" not in err, err
            assert state.url in out and f"pid {state.pid}" in out
        said = sorted(out.split(" (pid")[0] for out, _err in outs)
        assert said[1] == f"kms service on {state.url}", said  # the one that started it
        assert said[0] in (  # the other: it lost the race for the lock, or came once the winner had answered
            f"a kms service was starting already: it runs on {state.url}",
            f"a kms service already runs on {state.url}",
        ), said
        assert json.loads(service.state_path(db_path).read_text())["pid"] == state.pid  # whole, one writer
        assert serving_processes(port) == [state.pid], "two processes serve"
        answer = service.health(state.url)
        assert answer is not None and answer["pid"] == state.pid
    finally:
        run_kms("service", "stop")
    assert serving_processes(port) == []


def test_a_second_kms_serve_is_refused_while_one_starts(indexed: apsw.Connection, db_path: Path) -> None:
    """``kms serve`` twice at once, on two ports: one serves, the other is refused before it binds, naming
    the one that holds the database (exit 1, ``already-exists``)."""
    ports = [free_port(), free_port()]
    procs = [
        subprocess.Popen(
            kms_args("serve", "--port", str(p)),
            env=kms_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in ports
    ]
    try:
        state = wait_for(lambda: service.read_state(db_path), 30, "a service to write its state")
        winner = next(p for p in procs if p.pid == state.pid)
        loser = next(p for p in procs if p is not winner)
        _out, err = loser.communicate(timeout=30)
        assert loser.returncode == 1, err
        assert "error (already-exists): a kms service is starting or running for this database" in err
        assert f"(pid {state.pid}, port {state.port})" in err
        assert winner.poll() is None and service.read_state(db_path) == state
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        codes = [p.wait(timeout=30) for p in procs]
    assert codes.count(0) == 1 and codes.count(1) == 1, codes


def found(url: str, secret: str, word: str) -> list[str]:
    return [h["path"] for h in anyio.run(search, url, secret, word)["hits"]]


def test_a_vault_added_or_removed_while_the_service_runs_is_watched_or_dropped(
    indexed: apsw.Connection, db_path: Path, tmp_path: Path
) -> None:
    served = Served.start(db_path)
    try:
        secret = run_kms("token", "create", "--label", "agent").stdout.strip().splitlines()[-1]
        assert found(served.url, secret, "auth")  # the session is open before the vault comes
        fresh = tmp_path / "fresh"
        fresh.mkdir()
        added = run_kms("vault", "add", str(fresh), "--name", "fresh")
        assert added.returncode == 0, added.stderr
        (fresh / "zebracorn.md").write_text("# Zebracorn\n\nA zebracorn grazes here.\n")
        began = time.monotonic()
        wait_for(lambda: found(served.url, secret, "zebracorn"), 15, "the new vault's note to be found", 0.2)
        took = time.monotonic() - began
        print(f"new vault's note found {took:.2f} s after it was written")
        removed = run_kms("vault", "remove", "fresh")
        assert removed.returncode == 0, removed.stderr
        (fresh / "quagga.md").write_text("# Quagga\n\nA quagga was here.\n")
        (fresh / "zebracorn.md").write_text("# Zebracorn\n\nStill a zebracorn.\n")
        (get_vault(indexed, "sample").root / "okapi.md").write_text("# Okapi\n\nAn okapi, written last.\n")
        wait_for(lambda: found(served.url, secret, "okapi"), 15, "the watcher to take in the later note", 0.2)
        assert found(served.url, secret, "quagga") == []
        assert found(served.url, secret, "zebracorn") == []
        assert indexed.execute("SELECT count(*) FROM notes WHERE path IN ('quagga.md', 'zebracorn.md')").fetchall() == [
            (0,)
        ]
        assert served.proc.poll() is None
        os.kill(served.proc.pid, signal.SIGTERM)
        code, err = served.wait()
        assert code == 0, err
    finally:
        served.kill()
