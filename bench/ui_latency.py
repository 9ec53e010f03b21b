"""Web UI latency: time from a node's phase change, written by the engine, to the execution
page in a browser showing it. The page polls its live fragment every second, so the figure is
dominated by the poll interval (expected mean about half a second, max about one second plus
the render).

A chain of N tasks, each pausing S seconds, runs on an in-process engine over SQLite while
Debian's Chromium (through Playwright) shows its page from a uvicorn server on 127.0.0.1. The
page records, after each live update (ui.js's `sluice:updated`), the wall time each node is
first shown in each phase; the engine's times are the node's `started_at` (RUNNING) and
`ended_at` (SUCCEEDED). Same machine, same clock.

Prints one JSON line.

    python bench/ui_latency.py [--tasks 8] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from ui_tasks import pause

import sluice
from sluice.config import load_config
from sluice.http.server import SHUTDOWN_GRACE
from sluice.runtime import Runtime
from sluice.service import Sluice

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
RECORD_SWAPS = """
window.__seen = {};
function record() {
  const now = Date.now() / 1000;
  document.querySelectorAll('table.nodes tr[data-node]').forEach(row => {
    const key = row.dataset.node + '|' + row.querySelector('.phase').textContent.trim();
    if (!(key in window.__seen)) window.__seen[key] = now;
  });
}
document.addEventListener('DOMContentLoaded', record);
document.addEventListener('sluice:updated', record);
"""


def chain(n: int, seconds: float) -> sluice.WorkflowDef:  # type: ignore[type-arg]
    @sluice.workflow(name=f"bench.ui_chain{n}")
    def wf() -> int:
        value = pause(i=0, seconds=seconds)
        for _ in range(n - 1):
            value = pause(i=value, seconds=seconds)
        return value

    return wf


@contextlib.asynccontextmanager
async def serving(sluice_: Sluice) -> AsyncIterator[str]:
    import uvicorn
    from fastapi import FastAPI

    from sluice.http.ui import mount_static, ui_router

    app = FastAPI()
    app.state.sluice = sluice_
    app.include_router(ui_router())
    mount_static(app)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=SHUTDOWN_GRACE
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    for _ in range(200):  # up to 10 s for start-up
        if server.started:
            break
        await asyncio.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        await task


async def measure(tasks: int, seconds: float, db: Path) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    runtime = await Runtime.open(load_config(database_url=f"sqlite:///{db}"))
    engine = await runtime.engine()
    await engine.start()
    try:
        async with serving(Sluice(runtime)) as url, async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = await browser.new_page(viewport={"width": 1280, "height": 800})
            await page.add_init_script(RECORD_SWAPS)
            record = await runtime.launch(chain(tasks, seconds), {})
            await page.goto(f"{url}/executions/{record.id}")
            loaded_at = time.time()
            await engine.wait(record.id)
            await asyncio.sleep(2.0)  # one more poll shows the last change
            seen: dict[str, float] = await page.evaluate("window.__seen")
            await browser.close()
        found = await Sluice(runtime).execution(record.id)
    finally:
        await engine.stop()
        await runtime.close()
    return latencies(found, seen, loaded_at)


def latencies(found: Any, seen: dict[str, float], loaded_at: float) -> dict[str, Any]:
    """Changes made before the page had loaded (a loaded machine starts Chromium and the
    workers at once) are counted apart: the page could not show them sooner."""
    values: list[float] = []
    missed: list[str] = []
    before_load = 0
    for node in found.nodes:
        for phase, at in (("RUNNING", node.started_at), ("SUCCEEDED", node.ended_at)):
            shown = seen.get(f"{node.node}|{phase}")
            if at is not None and at.timestamp() < loaded_at:
                before_load += 1
            elif shown is None or at is None:
                missed.append(f"{node.node} {phase}")
            else:
                values.append(shown - at.timestamp())
    values.sort()
    return {
        "changes": len(values),
        "missed": missed,
        "before_load": before_load,
        "mean_s": round(statistics.fmean(values), 3) if values else None,
        "p50_s": round(values[len(values) // 2], 3) if values else None,
        "p90_s": round(values[int(len(values) * 0.9)], 3) if values else None,
        "max_s": round(values[-1], 3) if values else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=8, help="tasks in the chain")
    parser.add_argument("--seconds", type=float, default=1.5, help="each task's run time")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        figures = asyncio.run(measure(args.tasks, args.seconds, Path(directory) / "ui.db"))
    print(json.dumps({"bench": "ui_latency", "poll_interval_s": 1.0, **figures}))


if __name__ == "__main__":
    main()
