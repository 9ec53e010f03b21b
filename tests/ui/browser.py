"""Driving Debian's Chromium with Playwright against a real uvicorn server: never a browser
download. Skips on a laptop without Chromium or Playwright, fails under CI."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI

from sluice.http.server import SHUTDOWN_GRACE
from ui.ui_support import eventually

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
SCREENSHOTS = Path(
    os.environ.get("SLUICE_UI_SCREENSHOTS") or Path(tempfile.gettempdir()) / "sluice-ui-screenshots"
)
"""Where the older browser tests save their screenshots: `SLUICE_UI_SCREENSHOTS=docs/screenshots`
refreshes the README's; by default a temporary directory, so a test run leaves git clean."""
AXE = Path(__file__).parent / "vendor" / "axe.min.js"
BLOCKING_IMPACTS = ("serious", "critical")
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


def require_browser() -> None:
    """Skip (laptop) or fail (CI) without Chromium or the playwright package."""
    missing = []
    if not Path(CHROMIUM).exists():
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    try:
        import playwright  # noqa: F401
    except ImportError:
        missing.append("the playwright package (pip install -e '.[test]')")
    if not missing:
        return
    message = "browser tests need " + " and ".join(missing)
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@contextlib.asynccontextmanager
async def serving(app: FastAPI) -> AsyncIterator[str]:
    """`app` served by uvicorn on a free port of 127.0.0.1 in this event loop; its base URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=SHUTDOWN_GRACE
        )
    )
    task = asyncio.create_task(server.serve(sockets=[sock]))
    await eventually(_started(server), "uvicorn starts", within=10.0)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
        sock.close()


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True
        )
        try:
            yield browser
        finally:
            await browser.close()


def _started(server: uvicorn.Server) -> Callable[[], Awaitable[bool]]:
    async def started() -> bool:
        return server.started

    return started


class ConsoleErrors:
    """Every console error and uncaught exception of the pages it watches."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def watch(self, page: Any) -> Any:
        page.on("console", lambda m: m.type == "error" and self.seen.append(m.text))
        page.on("pageerror", lambda e: self.seen.append(str(e)))
        return page


def shot_path(name: str) -> str:
    os.makedirs(SCREENSHOTS, exist_ok=True)
    return str(SCREENSHOTS / f"{name}.png")


async def screenshot(page: Any, name: str) -> None:
    await page.screenshot(path=shot_path(name))


async def accessibility_violations(page: Any) -> list[str]:
    """axe-core's serious and critical violations on the page as it is (WCAG A and AA rules
    and best practices), one line each: rule, impact, and where."""
    if not await page.evaluate("typeof window.axe !== 'undefined'"):
        await page.add_script_tag(path=str(AXE))
    found = await page.evaluate(
        "axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map("
        "v => ({id: v.id, impact: v.impact, help: v.help,"
        " nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes']}"
        for v in found
        if v["impact"] in BLOCKING_IMPACTS
    ]
