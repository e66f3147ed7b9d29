"""The person's live controls: ``kms pending|approve|reject`` and ``kms session list|pause|resume|revoke|undo``.

Thin adapters: the rules live in ``server.writes.review`` (a decision), ``server.activity.approvals``,
``server.activity.control`` and ``server.writes.undo.undo_session``; a running ``kms mcp`` sees every decision
through the database.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.markup import escape

from kmscli.output import (
    EXIT_FOR_KIND,
    JsonOpt,
    Table,
    cli_errors,
    console,
    open_db,
    print_json,
    print_verbatim,
    say_error,
)
from server.activity import landed
from server.activity.approvals import list_pending
from server.activity.control import revoked_note, set_state
from server.activity.feed import session_overview
from server.activity.session_registry import session_counts
from server.humanize import ago
from server.writes.review import decide_all
from server.writes.undo import undo_session

session_app = typer.Typer(
    help="Agent sessions: list them, pause, resume or revoke their writes, undo one.", no_args_is_help=True
)

SidArg = Annotated[str, typer.Argument(help="The session id (`kms session list`, the dashboard).")]
ReasonOpt = Annotated[str | None, typer.Option("--reason", help="Why (the agent is told).")]


def _show_pending(p: Any, now: float) -> None:
    left = max(0, int(p.expires_at - now))
    nobody = " · nobody waits: applied when you approve" if p.detached else ""  # a remote grant's
    console.print(
        f"[bold]#{p.id}[/] {escape(p.tool)} · session {escape(p.session_id)} · {ago(p.created_at, now, '?')} · "
        f"{p.lines} line(s) in {len(p.files)} file(s) · {left} s left{nobody}",
        highlight=False,
    )
    console.print(f"  input: {p.input_summary}", markup=False, highlight=False)
    if p.why:  # held although write.approval did not ask: its text looks like instructions to an agent
        console.print(
            f"  held: looks like instructions to an agent ({'; '.join(p.why)})", markup=False, highlight=False
        )
    for f in p.files:
        where = f"{f['path']} → {f['newPath']}" if f.get("newPath") else f["path"]
        console.print(f"  [cyan]{escape(f['vault'] + ':' + where)}[/] +{f['added']} -{f['removed']}", highlight=False)
        print_verbatim(f["diff"])


def pending_cmd(
    json_out: JsonOpt = False,
    after: Annotated[
        bool, typer.Option("--after", help="Writes that landed under review.mode = after, newest first.")
    ] = False,
    keep: Annotated[
        list[int] | None,
        typer.Option("--keep", help="Mark a landed write (its call id) reviewed: no longer listed. Repeatable."),
    ] = None,
) -> None:
    """Write calls waiting for your approval, oldest first, each with the exact diff it would apply; with
    `--after`, the writes that landed for review after (undo one with `kms revert ID`)."""
    if after or keep:
        _landed(keep or [], json_out)
        return

    with cli_errors():
        items = list_pending(open_db())
    if json_out:
        print_json([p.to_json() for p in items])
        return
    if not items:
        console.print("Nothing waits for your approval.")
        return
    now = time.time()
    for p in items:
        _show_pending(p, now)
    console.print("[dim]approve with `kms approve ID`, reject with `kms reject ID --reason TEXT`[/]")


def _landed(keep: list[int], json_out: bool) -> None:

    with cli_errors():
        conn = open_db()
        if keep:
            kept = landed.keep(conn, keep)
            if not json_out:
                console.print(f"kept {kept} landed write(s): no longer listed", highlight=False)
        items = landed.listed(conn)
    if json_out:
        print_json(items)
        return
    if not items:
        console.print("No landed write waits for your look.")
        return
    now = time.time()
    for i in items:
        where = f"{i['vault']}:{i['path']}" if i["path"] else "(no note)"
        console.print(
            f"#{i['invocationId']} {i['tool']} · session {i['sessionId']} · {ago(i['at'], now, '?')} · {where}",
            markup=False,
            highlight=False,
        )
    console.print("[dim]undo one with `kms revert ID`, keep it with `kms pending --keep ID`[/]")


def _decide(pending_ids: list[int], approve: bool, reason: str | None, json_out: bool) -> None:
    """One decision per id through the one decider (``server.writes.review``); each id answered in turn, a
    refused one on stderr, the exit code the first refusal's."""
    # deferred: the MCP layer (its write tools apply a detached call here: server.writes.appliers), for a decision only
    import server.mcp.tools  # noqa: F401

    with cli_errors():
        results = decide_all(open_db(), pending_ids, approve, channel="cli", reason=reason or "")
    if json_out:
        print_json(results[0] if len(results) == 1 else results)
    failed = next((r for r in results if "error" in r), None)
    for done in [] if json_out else results:
        if "error" in done:
            say_error(done["error"], done["message"])
            continue
        verb = "[green]approved[/]" if approve else "[yellow]rejected[/]"
        if done["detached"]:
            then = "applied now" if approve else "the agent can see it (kms_pending)"
        else:
            then = f"the waiting call now {'applies it' if approve else 'tells the agent'}"
        console.print(
            f"{verb} #{done['id']} ({escape(done['tool'])}, session {escape(done['sessionId'])}); {then}",
            highlight=False,
        )
    if failed is not None:
        raise typer.Exit(EXIT_FOR_KIND.get(failed["error"], 1))


IdsArg = Annotated[list[int], typer.Argument(help="The pending id(s) (`kms pending`); each one is decided in turn.")]


def approve_cmd(pending_ids: IdsArg, json_out: JsonOpt = False) -> None:
    """Approve waiting writes: the agent's call applies each, or, staged by a session that does not wait
    (remote), it is applied now (conflict if the note changed since: nothing written)."""
    _decide(pending_ids, True, None, json_out)


def reject_cmd(pending_ids: IdsArg, reason: ReasonOpt = None, json_out: JsonOpt = False) -> None:
    """Reject waiting writes: nothing is written, the agent is told (with your reason)."""
    _decide(pending_ids, False, reason, json_out)


@session_app.command("list")
def session_list(
    limit: Annotated[int, typer.Option("--limit", "-n", help="At most this many sessions.")] = 50,
    json_out: JsonOpt = False,
) -> None:
    """Sessions, live ones first: connection state, your control, write gauges and counts."""

    now = time.time()
    with cli_errors():
        conn = open_db()
        items = session_overview(conn, now, limit=limit)
        counts = session_counts(conn)
    none = {"calls": 0, "refused": 0, "reads": 0}
    if json_out:
        print_json(
            [
                {
                    "id": s.id,
                    "kind": s.kind,
                    "label": s.label,
                    "state": s.state,
                    "control": s.control,
                    "vault": s.vault,
                    "startedAt": s.started_at,
                    "lastSeenAt": s.last_seen_at,
                    "endedAt": s.ended_at,
                    "exitCode": s.exit_code,
                    "pending": s.pending,
                    **counts.get(s.id, none),
                    "writes": {
                        "thisMinute": s.gauge.window_count,
                        "perMinute": s.gauge.per_minute,
                        "total": s.gauge.total,
                        "perSession": s.gauge.per_session,
                    },
                }
                for s in items
            ]
        )
        return
    if not items:
        console.print("No sessions recorded yet.")
        return
    # fits 80 columns with every header whole (issue 32): no box, the control only when it is not the usual
    headers = ("session", "kind", "state", "writes\n/min", "writes\ntotal", "calls", "reads", "pending", "started")
    table = Table(box=None, pad_edge=False, header_style="bold underline")
    for name in headers:
        table.add_column(name, no_wrap=name in ("session", "started"), min_width=max(map(len, name.split("\n"))))
    for s in items:
        c = counts.get(s.id, none)
        table.add_row(
            s.id,
            s.who,
            s.state + (f" {s.control}" if s.control != "active" else ""),
            s.gauge.minute_text,
            s.gauge.total_text,
            f"{c['calls']}" + (f" ({c['refused']} refused)" if c["refused"] else ""),
            str(c["reads"]),
            str(s.pending),
            ago(s.started_at, now, "?") if s.started_at else "?",
        )
    console.print(table)


def _set(session_id: str, state: str, reason: str | None, json_out: bool, said: str) -> None:

    with cli_errors():
        conn = open_db()
        before = set_state(conn, session_id, state, reason=reason)
        if state == "revoked":
            said = revoked_note(conn, session_id)
    if json_out:
        print_json({"sessionId": session_id, "control": state, "was": before})
        return
    console.print(f"session {session_id}: {said}", markup=False, highlight=False)


@session_app.command("pause")
def session_pause(session_id: SidArg, reason: ReasonOpt = None, json_out: JsonOpt = False) -> None:
    """Pause a session's writes: its next write call answers `paused` until you resume it."""
    _set(session_id, "paused", reason, json_out, "paused (its writes answer `paused`; `kms session resume` undoes it)")


@session_app.command("resume")
def session_resume(session_id: SidArg, json_out: JsonOpt = False) -> None:
    """Let a paused session write again."""
    _set(session_id, "active", None, json_out, "resumed")


@session_app.command("revoke")
def session_revoke(session_id: SidArg, reason: ReasonOpt = None, json_out: JsonOpt = False) -> None:
    """Refuse a session's writes for the rest of it (reads keep working); its waiting calls are rejected."""
    _set(session_id, "revoked", reason, json_out, "revoked")


def _size(change: int) -> str:
    return f"{change:+d} bytes"


def _outside_line(item: dict[str, Any], now: float) -> str:
    """A note changed outside kms, as the undo lists it: what happens to it, or why it cannot."""
    does = {
        "restore": f"back to version {item.get('version')}",
        "recreate": f"created again (version {item.get('version')})",
        "trash": "to the trash (the session created it)",
    }.get(item.get("action") or "", "")
    covers = ", ".join(f"#{c['invocationId']}" for c in item.get("covers") or [])
    return (
        f"{item['vault']}:{item['path']} · {item['kind']} ({item['tool']}) · {ago(item['at'], now, '?')}"
        + (f" · {does}, {_size(item['sizeChange'])}" if does else "")
        + (f" · also takes back {covers}" if covers else "")
    )


def _show_undo(plan: dict[str, Any], now: float) -> None:
    for item in plan.get("outside", []):
        console.print(f"[green]✓[/] {escape(_outside_line(item, now))}", highlight=False)
    for item in plan["revert"]:
        note = f" [dim]({item['reason']})[/]" if item.get("reason") else ""
        console.print(
            f"[green]✓[/] #{item['invocationId']} {item['tool']} {item['vault']}:{item['path']} · "
            f"{ago(item['at'], now, '?')}{note}",
            highlight=False,
        )
    for item in plan.get("outsideSkip", []):
        console.print(f"[red]✗[/] {escape(_outside_line(item, now))}: {escape(item['reason'])}", highlight=False)
    for item in plan["skip"]:
        console.print(
            f"[red]✗[/] #{item['invocationId']} {item['tool']} {item['vault']}:{item['path']}: {item['reason']}",
            highlight=False,
        )


@session_app.command("undo")
def session_undo(
    session_id: SidArg,
    since: Annotated[
        str | None,
        typer.Option(
            "--since", help="Only changes since then: a duration (30m, 2h) or a date-time (2026-12-01 10:30)."
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Undo without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Revert every change a session made, newest first, and restore the notes it changed outside kms (its
    agent's own Edit/Write, reported by its hooks), after showing what can and cannot be undone."""

    now = time.time()
    with cli_errors():
        conn = open_db()
        start = undo_session.parse_since(since, now=now)
        plan = undo_session.preview(conn, session_id, since=start)
        if not json_out:
            _show_undo(plan, now)
        n, m = len(plan["revert"]), len(plan["outside"])
        if not n and not m:
            if json_out:
                print_json(
                    {
                        "sessionId": session_id,
                        "since": start,
                        "reverted": [],
                        "skipped": plan["skip"],
                        "restored": [],
                        "notRestored": plan["outsideSkip"],
                    }
                )
            else:
                console.print("Nothing to revert.")
            raise typer.Exit(0 if not plan["skip"] and not plan["outsideSkip"] else 1)
        asked = f"Revert {n} change(s)" + (f" and restore {m} note(s) changed outside kms" if m else "") + "?"
        if not yes and not typer.confirm(asked, default=False):
            console.print("nothing changed")
            raise typer.Exit(1)
        done = undo_session.undo(conn, session_id, since=start, shown=plan)
    if json_out:
        print_json(done)
        return
    console.print(
        f"[green]reverted {len(done['reverted'])} change(s)[/]"
        + (f", [green]restored {len(done['restored'])} note(s) changed outside kms[/]" if done["restored"] else "")
        + (f", skipped {len(done['skipped'])}" if done["skipped"] else "")
        + (f", not restored {len(done['notRestored'])}" if done["notRestored"] else ""),
        highlight=False,
    )
    for item in done["notRestored"]:
        console.print(
            f"  [red]✗[/] {escape(item['vault'] + ':' + item['path'])} ({item.get('errorKind', 'conflict')}): "
            + escape(item["reason"]),
            highlight=False,
        )
    for item in done["skipped"]:
        console.print(
            f"  [red]✗[/] #{item['invocationId']} {escape(item['path'])}: {escape(item['reason'])}", highlight=False
        )
