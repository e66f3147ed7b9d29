"""``kms demo`` and ``kms tui``: the commands that open the dashboard."""

from __future__ import annotations

import shutil
import threading
from typing import Annotated, Any

import anyio
import typer
from rich.text import Text

from kmscli.demo import DemoWorkspace, prepare, run_story
from kmscli.output import console
from server.store.db import default_db_path
from tui.app import create_app


def demo_cmd(
    headless: Annotated[
        bool, typer.Option("--headless", help="Print the story as text instead of the dashboard.")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Keep the demo's temporary workspace (its path is printed).")
    ] = False,
    step_timeout: Annotated[
        float,
        typer.Option(
            "--step-timeout",
            metavar="SECONDS",
            min=0.1,
            help="How long one step of the story may take before the demo calls it failed (and exits 1).",
        ),
    ] = 60.0,
) -> None:
    """Zero-setup demo: a scripted agent works on a copy of the sample vault while you watch."""
    ws = prepare()
    try:
        code = _run_demo(ws, headless, step_timeout)
    finally:
        if keep:
            console.print(f"[dim]demo workspace kept: {ws.root}[/]", highlight=False)
        else:
            shutil.rmtree(ws.root, ignore_errors=True)
    raise typer.Exit(code)


def _run_demo(ws: DemoWorkspace, headless: bool, step_timeout: float) -> int:
    """The story as text, or live in the dashboard (its lines printed after it). Exit 1 when a step failed or
    stalled past ``step_timeout`` (the failed step is shown as it happens and in the text after), or when the
    story did not show every guard."""
    styles = {"step": "bold", "ok": "green", "denied": "yellow", "info": "cyan", "failed": "bold red"}
    marks = {"step": "▶ ", "failed": "✗ "}
    if headless:

        def emit(kind: str, text: str) -> None:  # the story's text holds note titles: never read as markup
            console.print(Text(marks.get(kind, "") + text, style=styles[kind]), highlight=False)

        summary = anyio.run(run_story, ws, emit, 0.0, step_timeout)
        return _demo_code(summary)

    dashboard = create_app(ws.db_path, settings_path=ws.config_path)
    lines: list[str] = []
    outcome: dict[str, Any] = {}

    def narrate(kind: str, text: str) -> None:
        lines.append(f"{marks.get(kind, '')}{text}")
        try:
            dashboard.call_from_thread(dashboard.narrate, kind, text)
        except RuntimeError:  # the dashboard is not running (yet, or any more): the text is printed after
            pass

    def run_agent() -> None:
        try:
            outcome["summary"] = anyio.run(run_story, ws, narrate, 1.0, step_timeout)
        except Exception as e:  # run_story reports its steps' failures; this is one outside them
            narrate("failed", f"step failed: the demo itself: {type(e).__name__}: {e}")
        failed = outcome.get("summary", {}).get("failed", "the demo itself")
        end = "The demo is over: press q to quit." if failed is None else f"The demo stopped: {failed}. Press q."
        try:
            dashboard.call_from_thread(dashboard.narrate, "end" if failed is None else "failed-end", end)
        except RuntimeError:
            pass

    threading.Thread(target=run_agent, name="kms-demo-agent", daemon=True).start()
    dashboard.run()
    for line in lines:
        console.print(line, highlight=False)
    if "summary" not in outcome:  # quit before the story ended, or it broke: not a demo that worked
        return 1 if any(line.startswith(marks["failed"]) for line in lines) else 0
    return _demo_code(outcome["summary"])


def _demo_code(summary: dict[str, Any]) -> int:
    """0 only when every step went as told and the story showed each guard (a write, a refusal, the limit)."""
    if summary["failed"] is not None:
        return 1
    return 0 if summary["writes"] >= 3 and summary["denied"] >= 1 and summary["rate_limited"] >= 1 else 1


def tui_cmd() -> None:
    """Live dashboard: agent sessions, writes (with review and revert), reads and settings."""
    create_app(default_db_path()).run()
