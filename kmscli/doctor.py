"""``kms doctor``: what a session would get, and what would surprise the person (as data, then rendered).

Claude Code, the database and vaults, the embedding model and coverage, settings, agent writes so far,
the allowlist and limits, the servers a ``kms claude`` session gets, and warnings for settings that undo
kms's guarantees (``servers.filesystem``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from kmscli.compose import Session, compose
from kmscli.hook_cmd import log_path
from kmscli.hook_files import installed
from kmscli.launcher import find_claude, missing_claude_message
from server.activity.approvals import list_pending
from server.activity.provenance import write_totals
from server.activity.session_registry import list_sessions, pid_alive
from server.activity.unrecorded import room_report
from server.config.redact import redact, redact_settings
from server.config.settings import Settings, load_settings
from server.config.tiers import CHAIN
from server.errors import KmsError
from server.humanize import NEVER, ago
from server.index.backups import backup_report
from server.index.embed.pipeline import embed_stats
from server.index.note_versions import stats
from server.index.overview import overview
from server.index.planted_notes import planted_notes
from server.index.privacy import privacy_report
from server.store import db
from server.store.db import check_database
from server.vault import git_state
from server.vault.sync_tools import describe
from server.writes.context import lock_dir_for
from server.writes.unit_journal import kept

if TYPE_CHECKING:
    from rich.console import Console


def _claude_report(env: Mapping[str, str]) -> dict[str, Any]:
    claude = find_claude(env)
    if claude is None:
        return {"ok": False, "path": None, "version": None, "message": missing_claude_message(env)}
    try:
        out = subprocess.run(
            [claude, "--version"], capture_output=True, text=True, timeout=20, stdin=subprocess.DEVNULL
        )
        version = (out.stdout or out.stderr).strip().splitlines()[0] if (out.stdout or out.stderr).strip() else ""
        ok = out.returncode == 0
        message = "" if ok else f"`claude --version` exited with {out.returncode}"
    except (OSError, subprocess.TimeoutExpired) as e:
        version, ok, message = None, False, f"`claude --version` failed: {e}"
    return {"ok": ok, "path": claude, "version": version, "message": message}


def _index_report(conn: Any) -> list[dict[str, Any]]:

    return [
        {
            "name": v.name,
            "root": v.root,
            "root_exists": v.root_exists,
            "last_indexed_at": v.last_indexed_at,
            "notes": v.notes,
            "hidden": v.hidden,
            "frontmatter_errors": v.flagged,
            "sync": v.sync,
            "conflicts": v.conflicts or 0,
        }
        for v in overview(conn, flagged=True).vaults
    ]


def _print_sync(out: Any, v: dict[str, Any], *, own_writes_here: bool) -> None:
    """What keeps a vault in sync, what that asks of this machine, and its open conflicts."""

    said = describe(v["sync"])
    hint = ""
    if v["sync"] and own_writes_here:
        hint = (
            " — kms's own writes run here (sync.own_writes_here): on the vault's other machines turn them off,"
            " kms config set sync.own_writes_here off"
        )
    out.print(f"{OK}   kept in sync by {said}{hint}", highlight=False)
    if v["conflicts"]:
        out.print(
            f"{MEH}   {v['conflicts']} open conflict(s): two versions of a note; agents may not write to it until "
            "you choose (kms conflicts)",
            highlight=False,
        )


def _model_report(settings: Settings) -> dict[str, Any]:
    """``server.index.embed.model_status`` (files present, where from); guarded so doctor works without it."""
    if not settings.get("embed.enabled"):
        return {"ok": None, "state": "off (embed.enabled = false): search is keyword-only"}
    try:
        from server.index.embed import model_status  # deferred: the embedding stack is optional in a build
    except ImportError:
        return {"ok": None, "state": "embedding support not installed in this build"}
    try:
        status = model_status(settings.get("embed.model_dir"))
    except Exception as e:  # a broken model must not break doctor
        return {"ok": False, "error": True, "state": f"error: {e}"}
    if status.get("ready"):
        state = f"{status.get('model')} ready in {status.get('dir')} ({status.get('source')})"
    else:
        state = status.get("reason") or "not ready"
    return {"ok": bool(status.get("ready")), "state": state, **{k: _jsonable(v) for k, v in status.items()}}


def _jsonable(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool | type(None) | list | dict) else str(value)


FILESYSTEM_WARNING = (
    "servers.filesystem is on: `kms claude` sessions also get the filesystem server, which hands the agent "
    "the vault folders directly, around hidden notes, the write allowlist, the rate limits and the write "
    "log. Turn it off unless you mean it: kms config set servers.filesystem.enabled off"
)


def doctor_warnings(settings: Settings) -> list[str]:
    """What a session would get that undoes kms's guarantees."""
    return [FILESYSTEM_WARNING] if settings.get("servers.filesystem.enabled") else []


def _privacy_report(db_path: Path, settings: Settings) -> dict[str, Any]:

    conn = db.connect(db_path)
    try:
        return privacy_report(conn, settings)
    finally:
        conn.close()


def _capture_report(settings: Settings, env: Mapping[str, str]) -> dict[str, Any]:
    """Session capture (docs/hooks.md): its settings, where the hooks write what went wrong, and where kms's
    hooks are installed for plain claude (in a ``kms claude`` session they stand aside for the session's own)."""

    log = log_path(env)
    return {
        "installedHooks": [str(p) for p in installed(Path.cwd(), env)],
        "enabled": settings.active("capture.enabled"),
        "folder": settings.get("capture.folder"),
        "askAgent": settings.get("capture.ask_agent"),
        "prompts": settings.get("capture.prompts"),
        "hookLog": str(log),
        "hookLogLines": sum(1 for _ in log.open(encoding="utf-8", errors="replace")) if log.is_file() else 0,
    }


def doctor_report(env: Mapping[str, str] | None = None, *, show_secrets: bool = False) -> dict[str, Any]:
    """Everything ``kms doctor`` checks, as data (the command renders it)."""

    env = dict(os.environ if env is None else env)
    db_path = db.default_db_path(env)
    report: dict[str, Any] = {"python": sys.executable, "claude": _claude_report(env)}
    vaults: list[dict[str, Any]] = []
    active: list[dict[str, Any]] = []
    writes: dict[str, Any] = {}
    embeddings: dict[str, Any] = {}
    pending: list[dict[str, Any]] = []
    planted: list[dict[str, Any]] = []
    unfinished: list[dict[str, Any]] = []
    history: dict[str, Any] = {}
    git: list[dict[str, Any]] = []

    damage = check_database(db_path)  # also damage that opening alone does not reveal
    db_error = damage.message if damage is not None else None
    try:
        conn = db.connect(db_path)
        try:
            vaults = _index_report(conn)
            writes, embeddings = write_totals(conn), embed_stats(conn)
            pending = [
                {
                    "id": p.id,
                    "tool": p.tool,
                    "sessionId": p.session_id,
                    "createdAt": p.created_at,
                    "expiresAt": p.expires_at,
                    "files": [f["path"] for f in p.files],
                    "lines": p.lines,
                }
                for p in list_pending(conn)
            ]
            active = [{**s.to_json(), "process_alive": pid_alive(s.pid)} for s in list_sessions(conn, active=True)]
            unfinished = kept(lock_dir_for(conn))
            history = stats(conn)
            git = git_state.summary(conn)
            planted = [p.to_json() for p in planted_notes(conn)]
        finally:
            conn.close()
    except Exception as e:
        db_error = db_error or (e.message if isinstance(e, KmsError) else str(e))

    report["database"] = {
        "path": str(db_path),
        "ok": db_error is None,
        "error": db_error,
        "vaults": vaults,
        "room": room_report(db_path),
        "unfinishedUnits": unfinished,
        "backups": backup_report(db_path, now=time.time()),
    }
    report["git"] = git  # vaults in git mode, each with its problems (a failed commit, fetch, merge or push)
    report["active_sessions"] = active
    report["pending"] = pending
    report["planted"] = planted  # notes an agent reads whose text looks like instructions to it
    settings = load_settings(env=env, has_vault=bool(vaults))
    report["settings"] = {
        "path": str(settings.path),
        "exists": settings.path.exists(),
        "problems": settings.problems,
        "values": {e.key: e.value for e in settings.all_entries()},
    }
    if not show_secrets:
        report["settings"]["values"] = redact_settings(report["settings"]["values"])
    report["model"] = {**_model_report(settings), "download": settings.get("embed.download")}
    report["embeddings"] = embeddings
    report["tiers"] = {t.name: settings.active(t.key) for t in CHAIN}  # active: the key's parent= chain on
    report["agent"] = {
        "read": settings.active("agent.read"),
        "write": settings.active("agent.write"),
        "allowlist": list(settings.get("write.allowlist")),
        "perMinute": settings.get("write.per_minute"),
        "perSession": settings.get("write.per_session"),
        "writes": writes,
        "approval": settings.get("write.approval") or "off",
    }
    report["capture"] = _capture_report(settings, env)
    report["privacy"] = _privacy_report(db_path, settings) if db_error is None else None
    report["ownWritesHere"] = bool(settings.get("sync.own_writes_here"))
    report["history"] = history and {
        **history,
        "enabled": settings.get("history.enabled"),
        "capBytes": settings.get("history.max_mb") * 1024 * 1024,
    }
    report["warnings"] = doctor_warnings(settings)
    session = Session("preview", db_path.resolve(), Path.cwd(), tuple(Path(v["root"]) for v in vaults))
    servers = compose(settings, session)
    report["session_servers"] = (servers if show_secrets else redact(servers))["mcpServers"]
    git_ok = not any(g["problems"] for g in git)
    report["ok"] = bool(report["claude"]["ok"] and db_error is None and not settings.problems and git_ok)
    return report


PLANTED_SHOWN = 20  # the notes that look planted named on screen (all of them in --json)


def doctor_command(
    json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    show_secrets: Annotated[bool, typer.Option("--show-secrets", help="Print secrets in clear.")] = False,
) -> None:
    """Check claude, the index, the embedding model, settings, and what a session would get."""
    report, now = doctor_report(show_secrets=show_secrets), time.time()
    if json_output:
        print(json.dumps(report, indent=2, default=str))
        raise typer.Exit(0 if report["ok"] else 1)

    out = Console(highlight=False)
    _print_claude(out, report)
    _print_database(out, report, now)
    _print_git(out, report)
    _print_privacy(out, report)
    _print_model(out, report)
    _print_agent(out, report, now)
    _print_capture(out, report)
    _print_planted(out, report)
    _print_sessions(out, report, now)
    raise typer.Exit(0 if report["ok"] else 1)


OK, BAD, MEH = "[green]✓[/]", "[red]✗[/]", "[yellow]![/]"  # the marks of a line: fine, wrong, worth a look


def _print_claude(out: Console, report: dict[str, Any]) -> None:
    """Claude Code: found, and which version."""
    c = report["claude"]
    if c["ok"]:
        out.print(f"{OK} claude: {c['path']} ({c['version']})")
    else:
        out.print(f"{BAD} claude: {c['message'] or c['path']}")


def _print_database(out: Console, report: dict[str, Any], now: float) -> None:
    """The database, a unit a crash interrupted, and each vault."""
    d = report["database"]
    out.print(f"{OK if d['ok'] else BAD} database: {d['path']}" + (f" — {d['error']}" if d["error"] else ""))
    if d["room"]["warning"]:
        out.print(f"{MEH} {d['room']['warning']}")
    _print_backups(out, d["backups"], now)
    for unit in d["unfinishedUnits"]:  # a crash in mid-unit, and a person saved one of its notes before it was undone
        if unit["notes"]:
            out.print(
                f"{MEH} a change of several notes a crash interrupted was undone except where a note was "
                f"saved since ({', '.join(unit['notes'][:5])}); each note's earlier text is kept in "
                f"{unit['journal']}; once you have checked those notes, delete that file"
            )
        else:
            out.print(
                f"{MEH} a damaged journal of a change of several notes was kept at {unit['journal']}: "
                "check the notes the last rename or move touched, then delete that file"
            )
    if d["ok"] and not d["vaults"]:
        out.print(f"{MEH} no vault registered: kms vault add PATH")
    for v in d["vaults"]:
        mark = OK if v["root_exists"] and v["last_indexed_at"] else MEH
        extra = "" if v["root_exists"] else " [red](folder missing)[/]"
        out.print(
            f"{mark} vault {v['name']}: {v['root']}{extra} — {v['notes']} notes, {v['hidden']} hidden, "
            f"{v['frontmatter_errors']} frontmatter errors, indexed {ago(v['last_indexed_at'], now, NEVER)}"
            + ("" if v["last_indexed_at"] or not v["root_exists"] else f": kms index --vault {v['name']}")
        )
        _print_sync(out, v, own_writes_here=report["ownWritesHere"])


def _print_backups(out: Console, b: dict[str, Any], now: float) -> None:
    """The rolling copies of the database (docs/recovery.md): how many, how old, or why there are none."""
    if not b["enabled"]:
        out.print(f"{MEH} no copies of the database are made (backup.enabled is off)")
        return
    newest = f", the newest {ago(b['newestAt'], now)}" if b["newestAt"] is not None else ""
    out.print(
        f"{OK if not b['warning'] else MEH} backups: {b['copies']} of {b['keep']} in {escape(b['folder'])}{newest}"
    )
    if b["warning"]:
        out.print(f"{MEH} {b['warning']}")


def _print_git(out: Console, report: dict[str, Any]) -> None:
    """Each vault in git mode: its unpushed commits and a failed commit, fetch, merge or push."""
    for g in report["git"]:
        waiting = f", {g['unpushed']} commit(s) not pushed" if g["unpushed"] else ""
        out.print(f"{BAD if g['problems'] else OK} git {escape(g['vault'])} ({g['mode']}){waiting}")
        for p in g["problems"]:
            out.print(f"    git {p['what']} failed: {escape(' '.join(p['message'].split())[:300])}")


def _print_privacy(out: Console, report: dict[str, Any]) -> None:
    """What privacy rules hide, and the note history."""
    if report["privacy"]:
        hidden_by = report["privacy"]["hiddenBy"]
        out.print(f"{OK} privacy: " + (", ".join(f"{w} hides {n}" for w, n in hidden_by.items()) or "no note hidden"))
        if report["privacy"]["warning"]:
            out.print(f"{MEH} {report['privacy']['warning']}")
    if h := report["history"]:
        cap = f" of {h['capBytes'] / 1048576:.0f} MB" if h["capBytes"] else ""
        out.print(
            f"{OK if h['enabled'] else MEH} note history: {h['versions']} versions of {h['notes']} notes "
            f"({h['deletedNotes']} deleted), {h['storedBytes'] / 1048576:.1f} MB{cap}"
            + ("" if h["enabled"] else " — history.enabled is off: no new version is kept")
        )
        if h["missingBytes"]:
            out.print(f"{MEH} {h['missingBytes']} kept version(s) lost their text (a repaired database)")


def _print_model(out: Console, report: dict[str, Any]) -> None:
    """The embedding model and how much is embedded."""
    m = report["model"]
    mark = OK if m.get("ok") else BAD if m.get("error") else MEH  # a missing model only costs semantic search
    state = m.get("state") or ", ".join(f"{k}={v}" for k, v in m.items() if k != "ok")
    out.print(f"{mark} embedding model: {state}")
    out.print(f"    download when missing (embed.download): {'on' if m['download'] else 'off'}")
    e = report["embeddings"]
    if e:
        mark = OK if not e["pendingNotes"] else MEH
        out.print(
            f"{mark} embeddings: {e['embeddedNotes']} of {e['notes']} notes embedded ({e['chunks']} chunks)"
            + (f", {e['pendingNotes']} pending: kms embed" if e["pendingNotes"] else "")
        )


def _print_agent(out: Console, report: dict[str, Any], now: float) -> None:
    """The agent's tiers, allowlist and limits, its writes so far, what waits for approval."""
    a = report["agent"]
    w = a["writes"]
    tiers = " ".join(f"{tier} {'on' if on else 'off'}" for tier, on in report["tiers"].items())
    out.print(
        f"{OK} agent tiers: {tiers}; "
        f"allowlist {', '.join(a['allowlist']) or 'empty (every folder)'}; "
        f"limits {a['perMinute']}/min, {a['perSession']}/session"
    )
    if w:
        last = f", last {ago(w['lastAt'], now, NEVER)}" if w["lastAt"] else ""
        out.print(
            f"    agent writes so far: {w['calls']} calls ({w['succeeded']} succeeded, {w['refused']} refused) "
            f"in {w['sessions']} sessions{last} (kms log)"
        )
    if a["approval"] != "off":
        out.print(f"    writes wait for your approval: {a['approval']} (write.approval)")
    if report["pending"]:
        out.print(f"{MEH} {len(report['pending'])} write(s) wait for your approval (kms pending, or the dashboard):")
        for p in report["pending"]:
            out.print(
                f"    #{p['id']} {p['tool']} session {p['sessionId']} · {', '.join(p['files'])} · "
                f"{p['lines']} line(s), waiting {ago(p['createdAt'], now, NEVER).removesuffix(' ago')}"
            )


def _print_capture(out: Console, report: dict[str, Any]) -> None:
    """Session capture and its hooks."""
    c = report["capture"]
    if c["enabled"]:
        ask = f"asks the agent after {c['askAgent']} changed note(s)" if c["askAgent"] else "never asks the agent"
        out.print(
            f"{OK} session capture: the start brief, and a session note in {c['folder'] or '(no folder)'}; "
            f"{ask}; prompts {'kept' if c['prompts'] else 'never kept'} (capture.*)"
        )
        if c["installedHooks"]:
            out.print(
                f"    hooks: `kms claude` sessions run their own; kms's hooks in {', '.join(c['installedHooks'])} "
                "run in plain claude and stand aside in a `kms claude` session (each event runs once)"
            )
        else:
            out.print("    hooks: `kms claude` sessions run their own (plain claude: kms hooks install)")
        if c["hookLogLines"]:
            out.print(f"    {MEH} hooks that could not be taken: {c['hookLogLines']} line(s) in {c['hookLog']}")
    else:
        out.print(f"{MEH} session capture is off (capture.enabled): no start brief, no session notes")


def _print_planted(out: Console, report: dict[str, Any]) -> None:
    """Notes that look like they hold instructions for an agent, and the warnings."""
    if report["planted"]:
        out.print(
            f"{MEH} {len(report['planted'])} note(s) an agent can read look like they hold instructions for it "
            "(agents are told note text is data; check them, or hide them: kms hide):"
        )
        for p in report["planted"][:PLANTED_SHOWN]:
            out.print(f"    {p['vault']}:{p['path']} — {'; '.join(p['reasons'])}", markup=False)
        if len(report["planted"]) > PLANTED_SHOWN:
            out.print(f"    … and {len(report['planted']) - PLANTED_SHOWN} more (kms doctor --json)")
    for warning in report["warnings"]:
        out.print(f"{MEH} {warning}")


def _print_sessions(out: Console, report: dict[str, Any], now: float) -> None:
    """The settings file, the servers a session gets, and the sessions running now."""
    s = report["settings"]
    out.print(f"{OK if not s['problems'] else BAD} settings: {s['path']}" + ("" if s["exists"] else " (defaults)"))
    for p in s["problems"]:
        out.print(f"    {BAD} {p}")
    servers = report["session_servers"]
    if servers:
        out.print(f"{OK} `kms claude` sessions get: {', '.join(servers)}")
        for name, entry in servers.items():
            line = entry.get("url") or " ".join([entry.get("command", ""), *entry.get("args", [])])
            out.print(f"    {name}: {line}")
    else:
        out.print(
            f"{MEH} `kms claude` sessions get no MCP servers (kms.enabled or agent.read is off and nothing else is on)"
        )
    for a in report["active_sessions"]:
        state = "running" if a["process_alive"] else "[yellow]stale (process gone)[/]"
        out.print(
            f"  session {a['id']} ({a['kind']}, pid {a['pid']}) {state}, started {ago(a['started_at'], now, NEVER)}"
        )
