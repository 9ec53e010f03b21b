"""The web UI in Debian's Chromium against a real server and engine: a quota wait and a cache
wait appear with their reason and position and change live, abort works, pages fit a phone,
the graph is keyboard reachable, no console errors; screenshots of the main pages are saved
(`SLUICE_UI_SCREENSHOTS=docs/screenshots` refreshes the README's)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from fastapi import FastAPI

from sluice.runtime import Runtime
from sluice.service import Sluice
from ui.browser import (
    DESKTOP,
    PHONE,
    ConsoleErrors,
    chromium,
    require_browser,
    screenshot,
    serving,
    shot_path,
)
from ui.ui_support import eventually, finished

pytestmark = pytest.mark.slow
LIVE = 15_000
"""Milliseconds a page has to show a change (it polls every second)."""


@pytest.fixture
async def browser() -> AsyncIterator[Any]:
    require_browser()
    async with chromium() as running:
        yield running


@pytest.fixture
async def base_url(app: FastAPI) -> AsyncIterator[str]:
    async with serving(app) as url:
        yield url


async def accept(dialog: Any) -> None:
    """The confirmation a destructive action asks for: yes."""
    await dialog.accept()


def started(directory: Path) -> list[str]:
    return sorted(p.removesuffix(".started") for p in os.listdir(directory) if ".started" in p)


async def test_waits_change_live_and_abort_works(
    runtime: Runtime,
    engine: object,
    flows: ModuleType,
    browser: Any,
    base_url: str,
    tmp_path: Path,
) -> None:
    for name in flows.LOADS:
        (tmp_path / f"{name}.gate").touch()
    errors = ConsoleErrors()
    page = errors.watch(await browser.new_page(viewport=DESKTOP))
    await page.goto(f"{base_url}/")
    record = await runtime.launch(flows.warehouse_loads, {"directory": str(tmp_path)})
    await page.wait_for_selector(f'tr[data-execution="{record.id}"]', timeout=LIVE)  # no reload
    await page.goto(f"{base_url}/executions/{record.id}")

    nodes = page.locator("table.nodes")
    await page.wait_for_function(
        "document.querySelector('table.nodes').innerText.includes('position 2')", timeout=LIVE
    )
    text = await nodes.inner_text()
    assert "waiting for warehouse: 1/1 in use" in text and "position 1" in text
    await screenshot(page, "execution")
    await show_a_quota_wait(page, f"{base_url}/executions/{record.id}", flows.NODES)

    await see_the_holders_log_grow(page, f"{base_url}/executions/{record.id}", flows.NODES)
    holder = started(tmp_path)
    assert len(holder) == 1, holder
    (tmp_path / f"{holder[0]}.gate").unlink()  # the holder ends: a waiter takes the quota
    await page.wait_for_function(
        "!document.querySelector('table.nodes').innerText.includes('position 2')"
        " && document.querySelector('table.nodes').innerText.includes('position 1')",
        timeout=LIVE,
    )
    assert "succeeded" in await nodes.inner_text()

    await page.goto(f"{base_url}/quotas")
    await page.wait_for_selector("text=1 / 1 in use", timeout=LIVE)
    assert record.id in await page.locator("main").inner_text()
    await screenshot(page, "quotas")

    await page.goto(f"{base_url}/executions/{record.id}")
    await page.locator("#graph-node-0").focus()  # graph nodes are links: keyboard reachable
    await page.keyboard.press("Enter")
    await page.wait_for_url("**?node=*")
    assert await page.locator(".node-detail").count() == 1

    await page.locator("#node-link-2").focus()
    await page.evaluate(
        "window.swaps = 0; document.addEventListener('sluice:updated', () => window.swaps++); 0"
    )
    await page.wait_for_function("window.swaps >= 2", timeout=LIVE)
    focused = await page.evaluate("document.activeElement.id")
    assert focused == "node-link-2", f"a poll took the keyboard focus away (now on {focused!r})"

    page.once("dialog", accept)
    await page.locator("#abort-button").click()
    await page.wait_for_selector("#execution-phase:text-matches('ABORT')", timeout=LIVE)
    await page.wait_for_selector("#execution-phase:text('ABORTED')", timeout=30_000)
    assert (await Sluice(runtime).execution(record.id)).phase == "ABORTED"
    for name in flows.LOADS:
        (tmp_path / f"{name}.gate").unlink(missing_ok=True)
    assert errors.seen == []


async def see_the_holders_log_grow(page: Any, url: str, nodes: tuple[str, ...]) -> None:
    """The node holding the quota prints a line every half second: its log panel follows."""
    for name in nodes:
        await page.goto(f"{url}?node={name}")
        if await page.locator(".quota-wait").count() == 0:
            log = "document.getElementById('node-log').innerText"
            await page.wait_for_function(f"{log}.includes('still working (10)')", timeout=LIVE)
            await page.wait_for_function(f"{log}.includes('still working (30)')", timeout=LIVE)
            await page.locator(".node-detail").screenshot(path=shot_path("node-log"))
            await page.goto(url)
            return
    pytest.fail(f"no node of {url} holds the quota")


async def show_a_quota_wait(page: Any, url: str, nodes: tuple[str, ...]) -> None:
    """Select a waiting node: its detail names the holder and its position (screenshot)."""
    for name in nodes:
        await page.goto(f"{url}?node={name}")
        if await page.locator(".quota-wait").count():
            text = await page.locator(".quota-wait").inner_text()
            assert "1/1 in use (held by" in text and "position" in text
            await page.locator(".node-detail").screenshot(path=shot_path("node-wait"))
            await page.goto(url)
            return
    pytest.fail(f"no node of {url} shows a quota wait")


async def test_a_cache_wait_shows_its_owner_then_the_hit(
    runtime: Runtime,
    engine: object,
    flows: ModuleType,
    browser: Any,
    base_url: str,
    tmp_path: Path,
) -> None:
    gate = tmp_path / "cache.gate"
    gate.touch()
    sluice = Sluice(runtime)
    first = await runtime.launch(flows.cached_report, {"directory": str(tmp_path)})
    await eventually(lambda: _started(tmp_path), "the first execution computes")
    second = await runtime.launch(flows.cached_report, {"directory": str(tmp_path)})
    errors = ConsoleErrors()
    page = errors.watch(await browser.new_page(viewport=DESKTOP))
    await page.goto(f"{base_url}/executions/{second.id}?node=expensive")
    await page.wait_for_selector("dt:text-is('Reservation owner')", timeout=LIVE)
    detail = await page.locator(".node-detail").inner_text()
    assert first.id in detail and "waiting for cache" in detail
    await screenshot(page, "cache-wait")

    await page.goto(f"{base_url}/cache")
    await page.wait_for_selector(f"text={first.id}", timeout=LIVE)
    await screenshot(page, "cache")

    await page.goto(f"{base_url}/executions/{second.id}?node=expensive")
    gate.unlink()
    await page.wait_for_selector("#execution-phase:text('SUCCEEDED')", timeout=30_000)
    assert "hit" in await page.locator(".node-detail").inner_text()
    for record in (first, second):
        await eventually(lambda r=record: finished(sluice, r.id), "both executions end")

    phone = errors.watch(await browser.new_page(viewport=PHONE))
    for path in ("/", f"/executions/{second.id}", "/quotas", "/cache", "/launch-plans"):
        await phone.goto(base_url + path)
        width = await phone.evaluate("document.documentElement.scrollWidth")
        assert width <= PHONE["width"], f"{path} is {width}px wide on a phone"
    await phone.goto(f"{base_url}/executions/{second.id}")
    await screenshot(phone, "execution-phone")
    assert errors.seen == []


async def _started(directory: Path) -> bool:
    return bool(started(directory))


async def test_the_pending_queue_shows_positions_and_its_abort_button_works(
    runtime: Runtime,
    engine: object,
    flows: ModuleType,
    browser: Any,
    base_url: str,
    tmp_path: Path,
) -> None:
    gate = tmp_path / "report.gate"
    gate.touch()
    sluice = Sluice(runtime)
    await sluice.register_launch_plan(flows.nightly, activate=True)
    inputs = {"directory": str(tmp_path)}
    running = await sluice.create("nightly", inputs)
    queued = await sluice.create("nightly", inputs)
    errors = ConsoleErrors()
    page = errors.watch(await browser.new_page(viewport=DESKTOP))
    await page.goto(f"{base_url}/launch-plans")
    row = page.locator(f'tr[data-execution="{queued.id}"]')
    assert (await row.locator("td").first.inner_text()).strip() == "1"
    assert queued.reason in await row.inner_text()
    await screenshot(page, "launch-plans")
    await page.goto(f"{base_url}/")
    listed = page.locator(f'tr[data-execution="{queued.id}"]')
    assert "PENDING #1" in " ".join((await listed.inner_text()).split())
    await screenshot(page, "executions")
    await page.goto(f"{base_url}/launch-plans")

    page.once("dialog", accept)
    await page.locator(f"#abort-{queued.id}").click()
    await page.wait_for_url("**/launch-plans")
    await row.wait_for(state="detached", timeout=LIVE)
    assert (await sluice.execution(queued.id)).phase == "ABORTED"
    gate.unlink()
    await eventually(lambda: finished(sluice, running.id), "the running execution ends")
    assert errors.seen == []
