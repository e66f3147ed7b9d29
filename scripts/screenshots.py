"""Save SVG screenshots of the dashboard to docs/screenshots/ (for the README and docs).

Uses the same deterministic world as the snapshot tests (``tests/support/dashboard.seed_fixed``:
real writes through ``WriteService``, a revert, fixed ids and times) and a frozen clock, so
re-running the script only changes the files when the UI changed.
Usage: python scripts/screenshots.py [--out docs/screenshots]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests"))

from support.dashboard import Seeded, seed_fixed, settled, wait_for  # type: ignore[import-not-found]  # noqa: E402

from tui.app import create_app  # noqa: E402
from tui.screens.invocation import InvocationScreen  # noqa: E402
from tui.screens.modals import ReviewScreen  # noqa: E402

# name -> (terminal size, story step to select, keys to press, screen to wait for)
SHOTS: dict[str, tuple[tuple[int, int], str, tuple[str, ...], type | None]] = {
    "dashboard": ((160, 48), "b_append3", (), None),
    "dashboard-80x24": ((80, 24), "b_append3", (), None),
    "detail": ((100, 32), "a_insert", ("enter",), InvocationScreen),
    "review": ((100, 32), "b_append2", ("u",), ReviewScreen),
}


async def shoot(world: Seeded, name: str, out: Path) -> Path:
    size, step, keys, screen_type = SHOTS[name]
    app = create_app(world.db_path, settings_path=world.db_path.parent / "config.toml", clock=lambda: world.now)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: settled(app), what="the dashboard")
        app.dashboard.feed.select(world.ids[step])
        await wait_for(pilot, lambda: settled(app) and app.dashboard.detail_id == world.ids[step], what="detail")
        for key in keys:
            await pilot.press(key)
        if screen_type is not None:
            await wait_for(pilot, lambda: isinstance(app.screen, screen_type), what=name)
        if isinstance(app.screen, InvocationScreen):
            await wait_for(pilot, lambda: app.screen.query_one("#detail-full").detail is not None)  # type: ignore[attr-defined]
        await pilot.pause(0.2)
        app.save_screenshot(f"{name}.svg", path=str(out))
    return out / f"{name}.svg"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", type=Path, default=REPO / "docs" / "screenshots")
    args = ap.parse_args()
    os.environ["TZ"] = "UTC"  # the fixed timestamps read the same everywhere
    time.tzset()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kms-shots-") as tmp:
        world = seed_fixed(Path(tmp))
        for name in SHOTS:
            print(asyncio.run(shoot(world, name, args.out.resolve())))


if __name__ == "__main__":
    main()
