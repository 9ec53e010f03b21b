"""Every page of the web UI rendered in process, against a real SQLite store and engine."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import httpx

from sluice.runtime import Runtime
from sluice.service import Sluice
from ui.ui_support import eventually, finished

FRAGMENT = {"X-Sluice-Fragment": "1"}


async def run_to_end(runtime: Runtime, target: object, **inputs: object) -> str:
    record = await runtime.launch(target, inputs)
    await eventually(lambda: finished(Sluice(runtime), record.id), f"{record.id} finishes")
    return record.id


async def test_the_executions_list_shows_each_execution_with_its_phase(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient
) -> None:
    done = await run_to_end(runtime, flows.pipeline, n=3)
    page = await client.get("/")
    assert page.status_code == 200
    assert done in page.text and "SUCCEEDED" in page.text and "ui_flows.pipeline" in page.text
    assert 'data-live-url="/"' in page.text and 'data-poll="1"' in page.text  # live
    fragment = await client.get("/", headers=FRAGMENT)
    assert done in fragment.text and "<html" not in fragment.text
    filtered = await client.get("/", params={"phase": "failed"})
    assert done not in filtered.text and "No executions match" in filtered.text


async def test_an_execution_page_draws_the_graph_timeline_and_selected_node(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient
) -> None:
    done = await run_to_end(runtime, flows.pipeline, n=3)
    page = await client.get(f"/executions/{done}", params={"node": "square_all"})
    assert page.status_code == 200, page.text
    text = page.text
    assert text.count('class="node ph-succeeded') == 3  # three nodes in the graph
    assert (
        text.count('<path class="edge') == 3
    )  # extract->square_all, extract->total, square_all->total
    assert 'class="bar ph-' in text  # a timeline of attempts
    assert 'data-selected="square_all"' in text and "ui_flows.square_all" in text
    ended = await client.get(f"/executions/{done}", headers=FRAGMENT)
    assert ended.headers["X-Sluice-Final"] == "1"  # the page stops polling: it will not change
    again = await client.get(
        f"/executions/{done}", headers={**FRAGMENT, "If-None-Match": ended.headers["ETag"]}
    )
    assert again.status_code == 304 and again.content == b""


async def test_a_failed_node_shows_its_error_as_text(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient
) -> None:
    failed = await run_to_end(runtime, flows.broken)
    page = await client.get(f"/executions/{failed}")
    assert "FAILED" in page.text
    assert "cannot load 3 rows: the table is locked" in page.text
    shown = page.text.split('id="attempt-error-1"')[1].split("</details>")[0]
    assert "ValueError" in shown.split("</summary>")[0]  # the error's head, folded
    assert shown.count("Traceback (most recent call last)") == 1  # shown once
    assert "\\n" not in shown[:300]


async def test_an_unknown_execution_is_a_404_page_naming_it(client: httpx.AsyncClient) -> None:
    page = await client.get("/executions/nope-nope")
    assert page.status_code == 404
    assert "nope-nope" in page.text and "<html" in page.text


async def test_a_quota_wait_shows_its_reason_and_position_then_clears(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    gates = [tmp_path / f"{name}.gate" for name in flows.LOADS]
    for gate in gates:
        gate.touch()
    record = await runtime.launch(flows.warehouse_loads, {"directory": str(tmp_path)})
    url = f"/executions/{record.id}"

    async def waiting_line() -> str | None:
        answer = await client.get(url, headers=FRAGMENT)
        assert answer.status_code == 200  # polled on while it runs
        return answer.text if "waiting for warehouse: 1/1 in use" in answer.text else None

    text = await eventually(waiting_line, "a node waits for the warehouse quota")
    assert "position 1" in text and "position 2" in text
    assert 'class="bar ph-waiting"' in text  # the timeline draws the waits
    details = [(await client.get(url, params={"node": n})).text for n in flows.NODES]
    waits = [t.split('class="wait-reason quota-wait"')[1] for t in details if "quota-wait" in t]
    assert len(waits) == 2  # the holder does not wait; each waiter names the holder
    assert all("1/1 in use (held by" in w and f"{record.id}/load" in w for w in waits)
    assert sorted(w.split("position ")[1][0] for w in waits) == ["1", "2"]
    quotas = await client.get("/quotas")
    assert "warehouse" in quotas.text and "1 / 1 in use" in quotas.text
    assert record.id in quotas.text  # as a holder and as waiters
    for gate in gates:
        gate.unlink()
    await eventually(lambda: finished(Sluice(runtime), record.id), "the loads finish")
    after = await client.get(url, headers=FRAGMENT)
    assert "waiting for warehouse" not in after.text
    assert after.text.count("phase ph-succeeded") >= 4  # the execution and its three nodes


async def test_a_cache_wait_names_the_reservation_owner(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    gate = tmp_path / "cache.gate"
    gate.touch()
    first = await runtime.launch(flows.cached_report, {"directory": str(tmp_path)})
    await eventually(lambda: _started(tmp_path, "expensive-21"), "the first computes")
    second = await runtime.launch(flows.cached_report, {"directory": str(tmp_path)})

    async def waiting() -> str | None:
        text = (await client.get(f"/executions/{second.id}", params={"node": "expensive"})).text
        return text if 'id="node-state">waiting for cache' in text else None

    text = await eventually(waiting, "the second execution waits for the cache")
    assert "Reservation owner" in text and first.id in text
    cache = await client.get("/cache")
    assert first.id in cache.text and second.id in cache.text
    gate.unlink()
    for record in (first, second):
        await eventually(lambda r=record: finished(Sluice(runtime), r.id), "both finish")
    assert "ui_flows.expensive" in (await client.get("/cache")).text


async def _started(directory: Path, name: str) -> bool:
    return name + ".started" in os.listdir(directory)


async def test_the_locks_page_shows_holders_and_waiters(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient, tmp_path: Path
) -> None:
    gate = tmp_path / "locks.gate"
    gate.touch()
    record = await runtime.launch(flows.partition_writes, {"directory": str(tmp_path)})

    async def a_waiter() -> str | None:
        text = (await client.get("/locks", headers=FRAGMENT)).text
        return text if 'data-lock="db/partition/2"' in text and "waiting" in text else None

    text = await eventually(a_waiter, "one writer waits for partition 2")
    row = text.split('data-lock="db/partition/2"')[1].split("</tr>")[0]
    holders, waiters = row.split("</td>")[2], row.split("</td>")[3]
    assert f"{record.id}/write_partitions" in holders
    assert "waiting for lock db/partition/2 (held by" in waiters
    gate.unlink()
    await eventually(lambda: finished(Sluice(runtime), record.id), "both writers finish")
    assert "No lock is held" in (await client.get("/locks")).text


async def test_locks_and_launch_plans_pages_render_when_empty(client: httpx.AsyncClient) -> None:
    locks = await client.get("/locks")
    assert locks.status_code == 200 and "No lock is held" in locks.text
    plans = await client.get("/launch-plans")
    assert plans.status_code == 200 and "No launch plan is registered" in plans.text
    assert "No execution is pending" in plans.text


async def test_the_static_files_are_served(client: httpx.AsyncClient) -> None:
    for asset in ("ui.css", "ui.js", "log.js", "favicon.svg"):
        assert (await client.get(f"/static/ui/{asset}")).status_code == 200, asset


async def test_the_served_app_includes_the_pages_and_their_assets(runtime: Runtime) -> None:
    from sluice.http.app import create_app
    from sluice.http.deps import open_scope

    app = create_app(Sluice(runtime), authorize=open_scope)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        for path in ("/", "/quotas", "/locks", "/cache", "/launch-plans"):
            page = await client.get(path)
            assert page.status_code == 200 and "<h1>" in page.text, path
        assert (await client.get("/static/ui/ui.js")).status_code == 200
        missing = await client.get("/executions/x1nothere")
        assert missing.status_code == 404 and "x1nothere" in missing.text


async def test_bad_values_in_a_page_url_are_errors_naming_them(client: httpx.AsyncClient) -> None:
    phase = await client.get("/", params={"phase": "sleeping"})
    assert phase.status_code == 422 and "sleeping" in phase.text
    project = await client.get("/launch-plans", params={"project": "No Such/Project"})
    assert project.status_code == 422 and "No Such/Project" in project.text
    cursor = await client.get("/", params={"cursor": "garbage"})
    assert cursor.status_code == 422 and "garbage" in cursor.text


async def test_a_big_input_is_cut_on_the_page_with_a_link_to_the_whole(
    runtime: Runtime, engine: object, flows: ModuleType, client: httpx.AsyncClient
) -> None:
    """Issue 26: a 1 MB string input made a 16-18 MB page that froze the browser."""
    done = await run_to_end(runtime, flows.shouting, text="x" * 1_000_000)
    page = await client.get(f"/executions/{done}", params={"node": "shout"})
    assert page.status_code == 200
    assert len(page.content) < 100_000, len(page.content)
    assert page.text.count("The whole value (JSON)") == 4  # the run's and the node's, each side
    whole = await client.get(f"/api/v1/executions/{done}/nodes/shout/values/outputs")
    assert whole.json() == {"o0": "X" * 1_000_000}
