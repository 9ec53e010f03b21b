"""A day's work in the web UI, in Debian's Chromium against a real server, store and engine
(issue 26): launch from a form (errors by field), watch it live, keep a text selection
through the polls, follow a log, search and page, relaunch, retry from the failure, abort
with a confirmation (one and many), and a read-only token's view. One server and one browser
for the module; no console error on any page."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from ui.browser import accessibility_violations, require_browser
from ui.ui_support import eventually
from ui.workday import LIVE, World, world

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]
EXECUTION_URL = re.compile(r".*/executions/(x[0-9a-z]+)$")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def day(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    require_browser()
    directory = tmp_path_factory.mktemp("workday")
    async with world(directory, tmp_path_factory.mktemp("screenshots")) as opened:
        yield opened
    assert opened.errors.seen == [], opened.errors.seen


def forget(day: World, status: str) -> None:
    """Chromium logs a page answered with an error status as a console error: forget the one
    the test asked for, keep any other."""
    day.errors.seen[:] = [e for e in day.errors.seen if f"status of {status}" not in e]


async def dismiss(dialog: Any) -> None:
    await dialog.dismiss()


def execution_id_of(page: Any) -> str:
    found = EXECUTION_URL.match(page.url)
    assert found, page.url
    return found.group(1)


async def test_launch_from_a_form_watch_it_live_and_follow_its_log(day: World) -> None:
    day.gate("chatty.gate").touch()
    page = await day.page()
    await page.goto(f"{day.base}/launch-plans/chatter_plan/launch")
    assert await page.locator("#f-strict").is_disabled()  # fixed by the launch plan
    assert await page.locator("#f-directory").input_value() == str(day.directory)  # default
    await page.fill("#f-lines", "many")
    await page.fill("#f-label", "monthly")
    await page.click("#launch-button")
    error = page.locator("#e-lines")
    await error.wait_for()
    assert "many" in await error.inner_text()
    assert await page.get_attribute("#f-lines", "aria-invalid") == "true"
    forget(day, "422")  # the refused form is answered 422, which Chromium logs
    assert await page.input_value("#f-label") == "monthly"  # what was typed stays
    assert await page.locator("#e-label").count() == 0

    await page.fill("#f-lines", "3")
    await page.click("#launch-button")
    await page.wait_for_url(EXECUTION_URL)
    launched = execution_id_of(page)
    assert (await day.sluice.execution(launched)).inputs["label"] == "monthly"

    log = page.locator("#node-log")
    await page.wait_for_function(
        "document.getElementById('node-log').innerText.includes('chatty tick 8')", timeout=LIVE
    )
    first = log.locator(".log-line").first
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3}", await first.locator(".log-time").inner_text())
    assert await first.locator(".log-stream").inner_text() == "out"
    warning = log.locator(".log-line.stderr")
    assert "ValueError" in await warning.inner_text()
    await page.fill("#log-search", "chatty line")
    assert await log.locator("mark").count() == 3
    assert "3 matching lines" in await page.locator(".log-matches").inner_text()
    await page.click("#log-next-error")
    assert "ValueError" in await log.locator(".log-line.current").inner_text()

    download = await page.request.get(day.base + await page.get_attribute("#log-download", "href"))
    text = await download.text()
    assert download.status == 200 and "attempt 1 stdout chatty line 0" in text
    assert "attempt 1 stderr ValueError" in text

    scroller = "document.querySelector('#log-panel .log-scroll')"
    await page.evaluate(f"{scroller}.scrollTop = 0")  # the reader scrolls back
    lines = await log.locator(".log-line").count()
    await page.wait_for_function(
        f"document.querySelectorAll('#node-log .log-line').length > {lines + 2}", timeout=LIVE
    )
    assert await page.evaluate(f"{scroller}.scrollTop") == 0, "the log jumped to its end"

    day.gate("chatty.gate").unlink()
    await page.wait_for_selector("#execution-phase:text('SUCCEEDED')", timeout=LIVE)  # no reload
    await page.wait_for_function(
        "document.getElementById('node-log').innerText.includes('chatty done')", timeout=LIVE
    )
    full = await page.get_attribute("#log-full", "href")
    await page.goto(day.base + full)
    await page.wait_for_function(
        "document.getElementById('node-log').innerText.includes('chatty done')", timeout=LIVE
    )


async def test_a_text_selection_survives_the_polls(day: World) -> None:
    """Issue 26: a selection in the list or the log was wiped at every poll. Updates wait
    while the reader selects; then they touch only what changed."""
    day.gate("chatty.gate").touch()
    running = await day.sluice.create("chatter_plan", {"lines": 1})
    page = await day.page()
    await page.goto(f"{day.base}/")
    row = f'tr[data-execution="{running.id}"]'
    await page.wait_for_selector(row)
    await page.evaluate(
        """(row) => {
            const cell = document.querySelector(row + ' td:nth-child(4)');
            window.kept = cell;
            const range = document.createRange();
            range.selectNodeContents(cell);
            getSelection().removeAllRanges();
            getSelection().addRange(range);
        }""",
        row,
    )
    selected = await page.evaluate("getSelection().toString()")
    await page.wait_for_selector("#live-status:text('paused while you select text')")
    before = await page.inner_text(f"{row} td.num")
    await page.wait_for_timeout(2500)  # two polls' time: the duration changed meanwhile
    assert await page.evaluate("getSelection().toString()") == selected
    assert await page.inner_text(f"{row} td.num") == before, "an update landed"

    await page.evaluate(
        "window.updates = 0; document.addEventListener('sluice:updated', () => window.updates++);"
        " getSelection().removeAllRanges()"
    )
    await page.wait_for_function("window.updates >= 1", timeout=LIVE)
    await page.wait_for_function(
        f"document.querySelector('{row} td.num').innerText !== {before!r}", timeout=LIVE
    )
    same = f"window.kept === document.querySelector('{row} td:nth-child(4)')"
    assert await page.evaluate(same), "an unchanged cell was replaced"
    day.gate("chatty.gate").unlink()
    await day.until_phase(running.id, "SUCCEEDED")


async def test_search_and_page_both_ways(day: World) -> None:
    marker = "needle-4711"
    wanted = await day.sluice.create("chatter_plan", {"lines": 1, "label": marker})
    for _ in range(3):
        await day.sluice.create("chatter_plan", {"lines": 1})
    page = await day.page()
    await page.goto(f"{day.base}/")
    await page.fill("input[name=q]", marker)
    await page.click("form.filters button[type=submit]")
    await page.wait_for_url(f"**q={marker}*")
    rows = page.locator("tr[data-execution]")
    assert await rows.count() == 1 and await rows.first.get_attribute("data-execution") == wanted.id
    assert (await page.inner_text("#total")).startswith("1 execution")

    await page.goto(f"{day.base}/?limit=2")
    total = int((await page.inner_text("#total")).split()[0].replace(",", ""))
    assert total >= 4
    first = await rows.evaluate_all("rows => rows.map(r => r.dataset.execution)")
    await page.click("#older")
    await page.wait_for_selector("#newer")
    second = await rows.evaluate_all("rows => rows.map(r => r.dataset.execution)")
    assert len(second) == 2 and not set(first) & set(second)
    await page.click("#newer")
    await page.wait_for_selector("#older")
    assert await rows.evaluate_all("rows => rows.map(r => r.dataset.execution)") == first
    created = page.locator(f'tr[data-execution="{first[0]}"] time').first
    assert await created.get_attribute("title")  # the absolute time, on hover
    assert "ago" in await created.inner_text() or "just now" in await created.inner_text()


async def test_retry_from_the_failure_then_relaunch(day: World) -> None:
    day.gate("broken").touch()
    failed = await day.runtime.launch(day.flows.two_steps, {"directory": str(day.directory)})
    await day.until_phase(failed.id, "FAILED")
    day.gate("broken").unlink()
    page = await day.page()
    await page.goto(f"{day.base}/executions/{failed.id}?node=fragile")
    errors = page.locator(".attempt-error")
    assert "RuntimeError" in await errors.first.locator("summary").inner_text()
    await page.click("#retry-button")
    await page.wait_for_url(EXECUTION_URL)
    retried = execution_id_of(page)
    assert retried != failed.id
    await page.wait_for_selector("#execution-phase:text('SUCCEEDED')", timeout=LIVE)
    assert await page.inner_text("#retry-of") == failed.id
    assert (day.directory / "prepare.runs").read_text() == "1"  # reused, not run again
    await page.goto(f"{day.base}/executions/{retried}?node=prepare")
    assert f"reused from {failed.id}/prepare" in await page.inner_text(".node-detail")

    await page.click("#relaunch-button")
    assert await page.input_value("#f-n") == "4"
    await page.fill("#f-n", "5")
    await page.click("#launch-button")
    await page.wait_for_url(EXECUTION_URL)
    again = execution_id_of(page)
    await page.wait_for_selector("#execution-phase:text('SUCCEEDED')", timeout=LIVE)
    assert await page.inner_text("#relaunch-of") == retried
    assert (await day.sluice.execution(again)).outputs == {"o0": 10}


async def test_abort_asks_first_one_or_many(day: World) -> None:
    day.gate("report.gate").touch()
    inputs = {"directory": str(day.directory)}
    running = await day.sluice.create("nightly", inputs)
    pending = await day.sluice.create("nightly", inputs)
    other = await day.sluice.create("nightly", inputs)
    page = await day.page()
    await page.goto(f"{day.base}/executions/{running.id}")
    page.once("dialog", dismiss)
    await page.click("#abort-button")
    await page.wait_for_timeout(300)
    assert await day.phase(running.id) == "RUNNING" and page.url.endswith(running.id)
    asked: list[str] = []

    async def accept(dialog: Any) -> None:
        asked.append(dialog.message)
        await dialog.accept()

    page.once("dialog", accept)
    await page.click("#abort-button")
    await page.wait_for_selector("#execution-phase:text('ABORTED')", timeout=30_000)
    assert "Abort execution" in asked[0]
    events = await day.sluice.events(running.id)
    assert any("aborted from the web UI by a local user" in e.reason for e in events)

    await page.goto(f"{day.base}/?phase=pending")
    for execution in (pending, other):
        await page.check(f'input[name=execution][value="{execution.id}"]')
    page.once("dialog", accept)
    async with page.expect_navigation():
        await page.click("#bulk-abort")
    assert "Abort 2 selected" in asked[-1]
    for execution in (pending, other):
        await day.until_phase(execution.id, "ABORTED")
    day.gate("report.gate").unlink()


async def test_a_read_only_token_sees_no_write_control(day: World) -> None:
    issued = await day.sluice.tokens.create(["default"], read_only=True, name="viewer")
    some = (await day.sluice.executions()).items[0]
    page = await day.page()
    await page.goto(f"{day.base}/sign-in")
    assert "you do not need to sign in" in await page.inner_text("#sign-in-optional")
    await page.fill("#token", issued.secret)
    await page.click("form.sign-in button")
    await page.wait_for_url(f"{day.base}/")
    assert "token viewer" in await page.inner_text("#whoami")
    assert "read-only" in await page.inner_text("#whoami")
    assert await page.locator("#bulk-abort, input[name=execution]").count() == 0
    await page.goto(f"{day.base}/executions/{some.id}")
    assert await page.locator("#abort-button, #relaunch-button, #retry-button").count() == 0
    await page.goto(f"{day.base}/launch-plans")
    assert await page.locator("[id^=launch-], [id^=deactivate-], [id^=activate-]").count() == 0
    await page.goto(f"{day.base}/launch-plans/chatter_plan/launch")
    assert "read-only" in await page.inner_text("#read-only-note")
    token = await page.get_attribute("input[name=csrf_token]", "value")
    answer = await page.evaluate(
        """([id, token]) => fetch('/executions/' + id + '/abort', {method: 'POST',
             headers: {'Content-Type': 'application/x-www-form-urlencoded'},
             body: 'csrf_token=' + encodeURIComponent(token)})
             .then(async r => [r.status, await r.text()])""",
        [some.id, token],
    )
    assert answer[0] == 403 and "this token is read-only" in answer[1]
    forget(day, "403")


async def test_an_unknown_page_is_an_html_404(day: World) -> None:
    page = await day.page()
    response = await page.goto(f"{day.base}/no/such/page")
    assert response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    assert "there is no page at /no/such/page" in await page.inner_text("main")
    forget(day, "404")
    api = await page.request.get(f"{day.base}/api/v1/no-such-thing")
    assert api.headers["content-type"] == "application/problem+json"


async def _state_of_a_busy_day(day: World) -> dict[str, str]:
    """Something of every kind on the pages: a failure, a run with a live log, quota waits,
    a pending execution; the paths of the pages that show them."""
    day.gate("broken").touch()
    failed = await day.runtime.launch(day.flows.two_steps, {"directory": str(day.directory)})
    await day.until_phase(failed.id, "FAILED")
    day.gate("broken").unlink()
    for name in [*day.flows.LOADS, "chatty", "report"]:
        day.gate(f"{name}.gate").touch()
    loads = await day.runtime.launch(day.flows.warehouse_loads, {"directory": str(day.directory)})
    chatter = await day.sluice.create("chatter_plan", {"lines": 3})
    inputs = {"directory": str(day.directory)}
    await day.sluice.create("nightly", inputs)
    await day.sluice.create("nightly", inputs)

    async def waiting() -> bool:
        nodes = (await day.sluice.execution(loads.id)).nodes
        return sum(1 for n in nodes if n.waiting_for) == 2

    await eventually(waiting, "two loads wait for the warehouse")
    waiter = next(n.node for n in (await day.sluice.execution(loads.id)).nodes if n.waiting_for)
    workflow = failed.workflow_key.replace("@", "?version=")
    return {
        "executions": "/",
        "execution-failed": f"/executions/{failed.id}?node=fragile",
        "execution-waiting": f"/executions/{loads.id}?node={waiter}",
        "execution-running": f"/executions/{chatter.id}",
        "log-full-view": f"/executions/{chatter.id}/logs?node=chatty",
        "launch-plans": "/launch-plans",
        "launch-plan": "/launch-plans/nightly",
        "launch-form": "/launch-plans/chatter_plan/launch",
        "relaunch-form": f"/executions/{failed.id}/relaunch",
        "workflows": "/workflows",
        "workflow": f"/workflows/{workflow}",
        "quotas": "/quotas",
        "locks": "/locks",
        "cache": "/cache",
        "sign-in": "/sign-in",
        "not-found": "/no/such/page",
    }


async def test_every_page_in_light_and_dark_is_accessible(day: World) -> None:
    """Screenshots of every page in both themes (into the pytest tmp dir, never committed),
    each checked by axe-core for serious and critical violations (contrast included)."""
    pages = await _state_of_a_busy_day(day)
    problems: list[str] = []
    for scheme in ("light", "dark"):
        page = await day.page(color_scheme=scheme)
        for name, path in pages.items():
            await page.goto(day.base + path)
            found = await accessibility_violations(page)
            problems += [f"{name} ({scheme}): {v}" for v in found]
            await page.screenshot(path=str(day.shots / f"{name}-{scheme}.png"), full_page=True)
        await page.context.close()
    forget(day, "404")
    for gate in [*day.flows.LOADS, "chatty", "report"]:
        day.gate(f"{gate}.gate").unlink(missing_ok=True)
    print(f"screenshots in {day.shots}")
    assert len(list(day.shots.glob("*.png"))) == 2 * len(pages)
    assert not problems, "\n".join(problems)


async def test_an_open_version_list_stays_open_through_updates(day: World) -> None:
    """Issue 26: an opened version list closed at the next poll."""
    day.gate("report.gate").touch()
    inputs = {"directory": str(day.directory)}
    first = await day.sluice.create("nightly", inputs)
    page = await day.page()
    await page.goto(f"{day.base}/launch-plans")
    versions = page.locator('[data-plan="nightly"] details')
    await versions.locator("summary").click()
    await page.evaluate(
        "window.updates = 0; document.addEventListener('sluice:updated', () => window.updates++)"
    )
    queued = await day.sluice.create("nightly", inputs)  # the page's queue changes
    await page.wait_for_selector(f'tr[data-execution="{queued.id}"]', timeout=LIVE)
    assert await page.evaluate("window.updates") >= 1
    assert await versions.get_attribute("open") is not None, "the version list closed"
    await day.sluice.abort_many([queued.id, first.id])
    day.gate("report.gate").unlink()
    await day.until_phase(first.id, "ABORTED", "SUCCEEDED")
