"""Web UI figures in Debian's Chromium (not a test): page load and time to first byte of the
executions list over a store of 10,000 executions and of the page of an execution whose map
node ran 1,000 items (1,001 nodes), the biggest page's size, and the time from a task's print
to its line in the browser's log panel.

The 10,000 executions are written straight through the store's repositories (the figure is
about showing them, not running them); the map runs for real on an in-process engine. The
pages are served by `sluice serve`'s HTTP server (uvicorn on 127.0.0.1) in this process and
loaded `--loads` times each, alternating the two pages; load is navigation start to the load
event, TTFB request start to the first byte (the Navigation Timing API). For the log, a task
prints `STAMP <wall time>` every 0.25 s while its page follows the log live (server-sent
events); the page notes when each line appears. Same machine, same clock. Prints one JSON line.

    python bench/ui.py [--executions 10000] [--items 1000] [--loads 7] [--flush 0.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from ui_tasks import item, stamper

import sluice
from sluice.config import load_config
from sluice.http.server import http_server
from sluice.ids import new_execution_id
from sluice.runtime import Runtime
from sluice.service import Sluice
from sluice.spec.phases import ExecutionPhase
from sluice.store.records import ExecutionRecord

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
BATCH = 500
PHASES = [*[ExecutionPhase.SUCCEEDED] * 6, ExecutionPhase.FAILED, ExecutionPhase.ABORTED]
NAVIGATION = """() => { const n = performance.getEntriesByType('navigation')[0];
  return {ttfb: n.responseStart - n.requestStart, load: n.loadEventEnd - n.startTime,
          bytes: n.decodedBodySize}; }"""
WATCH_LOG = """() => { window.__late = [];
  new MutationObserver(records => { const now = Date.now() / 1000;
    for (const r of records) for (const node of r.addedNodes) {
      const m = (node.textContent || '').match(/STAMP (\\d+\\.\\d+)/);
      if (m) window.__late.push(now - parseFloat(m[1])); } })
  .observe(document.getElementById('node-log'), {childList: true}); }"""
STAMPS, STAMP_EVERY = 20, 0.25


async def _fill(runtime: Runtime, total: int) -> None:
    now = time.time()
    for start in range(0, total, BATCH):
        async with runtime.store.write() as repos:
            for i in range(start, min(start + BATCH, total)):
                created = now - 86_400 * (total - i) / total
                await repos.executions.insert(
                    ExecutionRecord(
                        id=new_execution_id(),
                        project="default",
                        domain="development",
                        workflow_name="bench.flow",
                        workflow_version="v1",
                        phase=PHASES[i % len(PHASES)],
                        inputs={"i": i, "label": f"run {i}"},
                        created_at=created,
                        updated_at=created,
                        started_at=created,
                        ended_at=created + 1.5,
                        launch_plan="nightly" if i % 2 else None,
                        launch_plan_version="v1" if i % 2 else None,
                    )
                )


def _map_workflow(items: int) -> Any:
    @sluice.workflow(name=f"bench.ui_map{items}")
    def wf() -> list[int]:
        return sluice.map(item, concurrency=64)(items=list(range(items)))  # type: ignore[no-any-return]

    return wf


@sluice.workflow(name="bench.ui_stamps")
def stamps() -> int:
    return stamper(lines=STAMPS, interval=STAMP_EVERY)  # type: ignore[no-any-return]


async def _run(runtime: Runtime, target: Any) -> str:
    record = await runtime.launch(target, {})
    engine = await runtime.engine(only=[record.id])
    await engine.start()
    try:
        await engine.wait(record.id)
    finally:
        await engine.stop()
    return record.id


def _ms(values: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(values), 1), "max_ms": round(max(values), 1)}


async def _loads(browser: Any, pages: dict[str, str], loads: int) -> dict[str, Any]:
    timings: dict[str, list[dict[str, float]]] = {name: [] for name in pages}
    page = await browser.new_page()
    for _ in range(loads):
        for name, url in pages.items():  # alternating, so drift hits both alike
            await page.goto(url, wait_until="load")
            timings[name].append(await page.evaluate(NAVIGATION))
    await page.close()
    return {
        name: {
            "load": _ms([t["load"] for t in found]),
            "ttfb": _ms([t["ttfb"] for t in found]),
            "bytes": int(found[-1]["bytes"]),
        }
        for name, found in timings.items()
    }


async def _print_to_browser(browser: Any, runtime: Runtime, base: str) -> dict[str, float]:
    record = await runtime.launch(stamps, {})
    engine = await runtime.engine(only=[record.id])
    page = await browser.new_page()
    await page.goto(f"{base}/executions/{record.id}?node=stamper")
    await page.evaluate(WATCH_LOG)
    await engine.start()
    try:
        await page.wait_for_function(f"window.__late.length >= {STAMPS}", timeout=120_000)
        late = [1000 * x for x in await page.evaluate("window.__late")]
        await engine.wait(record.id)
    finally:
        await engine.stop()
        await page.close()
    return _ms(late)


async def main(args: argparse.Namespace) -> dict[str, Any]:
    from playwright.async_api import async_playwright

    with tempfile.TemporaryDirectory() as directory:
        settings = load_config(
            database_url=f"sqlite:///{directory}/ui.db", logs={"flush_interval": args.flush}
        )
        runtime = await Runtime.open(settings)
        try:
            await _fill(runtime, args.executions)
            started = time.perf_counter()
            mapped = await _run(runtime, _map_workflow(args.items))
            map_seconds = time.perf_counter() - started
            service = Sluice(runtime)
            nodes = len((await service.execution(mapped)).nodes)
            async with (
                http_server(service, "127.0.0.1", 0) as listening,
                async_playwright() as playwright,
            ):
                browser = await playwright.chromium.launch(
                    executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
                )
                pages = {
                    "executions_list": f"{listening.url}/",
                    "map_execution": f"{listening.url}/executions/{mapped}",
                }
                figures = await _loads(browser, pages, args.loads)
                late = await _print_to_browser(browser, runtime, listening.url)
                await browser.close()
        finally:
            await runtime.close()
    return {
        "bench": "ui",
        "executions": args.executions + 2,
        "map_items": args.items,
        "map_nodes_shown": nodes,
        "map_run_seconds": round(map_seconds, 1),
        "loads_each": args.loads,
        **figures,
        "biggest_page_bytes": max(f["bytes"] for f in figures.values()),
        "print_to_browser": late,
        "logs_flush_interval_s": args.flush,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--executions", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=7)
    parser.add_argument("--flush", type=float, default=0.5, help="logs.flush_interval (s)")
    print(json.dumps(asyncio.run(main(parser.parse_args()))))
