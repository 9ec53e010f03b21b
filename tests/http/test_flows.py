"""The API's main flows, over SQLite and PostgreSQL: create from a launch plan (QUEUED,
PENDING with its position), list with filters and cursor pages, detail with nodes, attempts
and events, abort (at once and waiting), launch plan versions, quotas, caps and cache."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from sluice.service import RunRequest, Sluice
from support.http_world import FLOWS, client_for, open_sluice


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """A SQLite file, or the session's PostgreSQL database upgraded and emptied."""
    if request.param == "sqlite":
        return sqlite_url
    request.getfixturevalue("pg_upgraded_url")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def store(url: str) -> AsyncIterator[Sluice]:
    opened = await open_sluice(url)
    await opened.register_launch_plan(FLOWS.plan, activate=True)
    await opened.register_launch_plan(FLOWS.waiting, activate=True)
    yield opened
    await opened.close()


@pytest.fixture
async def api(store: Sluice) -> AsyncIterator[httpx.AsyncClient]:
    async with client_for(store) as client:
        yield client


def _ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


async def _create(api: httpx.AsyncClient, launch_plan: str, **inputs: Any) -> Any:
    body = {"launch_plan": launch_plan, "inputs": inputs}
    return _ok(await api.post("/api/v1/executions", json=body), 201)


async def test_create_list_and_page(api: httpx.AsyncClient) -> None:
    queued = await _create(api, "echo_plan", text="yo")
    assert queued["phase"] == "QUEUED"
    first = await _create(api, "waiting_plan")
    second = await _create(api, "waiting_plan")
    assert first["phase"] == "QUEUED"
    assert (second["phase"], second["position"]) == ("PENDING", 1)
    (pending,) = _ok(await api.get("/api/v1/pending"))
    assert (pending["id"], pending["reason"]) == (second["id"], second["reason"])
    listed = _ok(await api.get("/api/v1/executions", params={"phase": ["pending", "QUEUED"]}))
    assert [e["id"] for e in listed["items"]] == [second["id"], first["id"], queued["id"]]
    by_plan = _ok(await api.get("/api/v1/executions", params={"launch_plan": "echo_plan"}))
    assert [e["id"] for e in by_plan["items"]] == [queued["id"]]
    later = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
    none = _ok(await api.get("/api/v1/executions", params={"created_after": later}))
    assert none["items"] == []
    before = _ok(await api.get("/api/v1/executions", params={"created_before": later}))
    assert len(before["items"]) == 3
    assert await _pages(api) == [e["id"] for e in listed["items"]]


async def _pages(api: httpx.AsyncClient) -> list[str]:
    """Every execution id, one page of one at a time, following next_cursor."""
    seen: list[str] = []
    params: dict[str, Any] = {"limit": 1}
    while True:
        page = _ok(await api.get("/api/v1/executions", params=params))
        seen += [e["id"] for e in page["items"]]
        if page["next_cursor"] is None:
            return seen
        params["cursor"] = page["next_cursor"]


async def test_bad_creates_name_what_is_wrong(api: httpx.AsyncClient) -> None:
    body = {"launch_plan": "echo_plan", "inputs": {"nope": 1}}
    response = await api.post("/api/v1/executions", json=body)
    assert response.status_code == 422
    assert "nope" in response.json()["detail"]
    response = await api.post("/api/v1/executions", json={"launch_plan": "missing_plan"})
    assert response.status_code == 404
    assert "missing_plan" in response.json()["detail"]
    response = await api.get("/api/v1/executions", params={"cursor": "garbage"})
    assert response.status_code == 422
    assert "garbage" in response.json()["detail"]


async def test_abort_at_once_and_waiting(api: httpx.AsyncClient) -> None:
    queued = await _create(api, "echo_plan")
    await _create(api, "waiting_plan")
    pending = await _create(api, "waiting_plan")
    aborted = _ok(await api.post(f"/api/v1/executions/{pending['id']}/abort"))
    assert aborted["phase"] in ("ABORTING", "ABORTED")
    path = f"/api/v1/executions/{queued['id']}/abort"
    ended = _ok(await api.post(path, params={"wait": 30}))
    assert ended["phase"] == "ABORTED"
    events = _ok(await api.get(f"/api/v1/executions/{queued['id']}/events"))
    assert events
    after = events[-1]["id"]
    assert _ok(await api.get(f"/api/v1/executions/{queued['id']}/events?after={after}")) == []
    missing = await api.post("/api/v1/executions/nope/abort")
    assert missing.json()["detail"] == "execution 'nope' does not exist"


async def test_a_run_shows_its_nodes_attempts_and_events(
    store: Sluice, api: httpx.AsyncClient
) -> None:
    done = await store.run_to_end(RunRequest.of(FLOWS.echoing, {"text": "hello"}))
    detail = _ok(await api.get(f"/api/v1/executions/{done.id[:10]}", params={"events": True}))
    assert (detail["id"], detail["phase"]) == (done.id, "SUCCEEDED")
    assert detail["outputs"] == {"o0": "hello"}
    assert detail["events"]
    (node,) = _ok(await api.get(f"/api/v1/executions/{done.id}/nodes"))
    attempts = _ok(await api.get(f"/api/v1/executions/{done.id}/nodes/{node['node']}/attempts"))
    assert [(a["attempt"], a["phase"]) for a in attempts] == [(1, "SUCCESS")]
    missing = await api.get(f"/api/v1/executions/{done.id}/nodes/nowhere/attempts")
    assert missing.status_code == 404
    assert "nowhere" in missing.json()["detail"]


async def test_a_runs_task_logs_by_execution_and_by_node_page(
    store: Sluice, api: httpx.AsyncClient
) -> None:
    done = await store.run_to_end(RunRequest.of(FLOWS.printing, {"lines": 5}))
    assert store.runtime.task_logs is not None
    await store.runtime.task_logs.flush()
    merged = _ok(await api.get(f"/api/v1/executions/{done.id[:10]}/logs"))
    assert [(x["node"], x["text"]) for x in merged] == [("printer", f"line {i}") for i in range(5)]
    assert merged[0]["attempt"] == 1 and merged[0]["stream"] == "stdout"
    base = f"/api/v1/executions/{done.id}/nodes/printer/logs"
    first = _ok(await api.get(base, params={"limit": 3}))
    assert [x["text"] for x in first["lines"]] == ["line 0", "line 1", "line 2"] and first["more"]
    rest = _ok(await api.get(base, params={"after": first["after"], "attempt": 1}))
    assert [x["text"] for x in rest["lines"]] == ["line 3", "line 4"] and not rest["more"]
    errors = _ok(await api.get(base, params={"stream": "stderr"}))
    assert errors["lines"] == []
    bad = await api.get(base, params={"after": "nowhere"})
    assert bad.status_code in (400, 422) and "nowhere" in bad.text
    missing = await api.get(f"/api/v1/executions/{done.id}/nodes/nowhere/logs")
    assert missing.status_code == 404 and "nowhere" in missing.json()["detail"]


async def test_launch_plan_versions_activate_and_deactivate(api: httpx.AsyncClient) -> None:
    (version,) = _ok(await api.get("/api/v1/launch-plans/echo_plan"))
    assert version["state"] == "ACTIVE"
    names = {p["name"] for p in _ok(await api.get("/api/v1/launch-plans"))}
    assert names == {"echo_plan", "waiting_plan"}
    was = _ok(await api.post("/api/v1/launch-plans/echo_plan/deactivate"))
    assert was["version"] == version["version"]
    assert _ok(await api.post("/api/v1/launch-plans/echo_plan/deactivate")) is None
    assert _ok(await api.get("/api/v1/launch-plans", params={"active_only": True}))[0]["name"] == (
        "waiting_plan"
    )
    body = {"version": version["version"]}
    active = _ok(await api.post("/api/v1/launch-plans/echo_plan/activate", json=body))
    assert active["state"] == "ACTIVE"
    unknown = await api.post("/api/v1/launch-plans/echo_plan/activate", json={"version": "v9"})
    assert unknown.status_code == 404


async def test_quotas_caps_and_cache(api: httpx.AsyncClient) -> None:
    quota = _ok(await api.put("/api/v1/quotas/hive", json={"quota": 4}))
    assert (quota["namespace"], quota["quota"], quota["quota_source"]) == ("hive", 4, "operator")
    assert _ok(await api.get("/api/v1/quotas", params={"namespace": "hive"}))[0]["quota"] == 4
    bad = await api.put("/api/v1/quotas/hive", json={"quota": 0})
    assert bad.status_code == 422
    cap = {"scope": "alpha/development", "max": 3}
    assert (await api.put("/api/v1/concurrency/caps", json=cap)).status_code == 204
    caps = _ok(await api.get("/api/v1/concurrency/caps"))
    assert [(c["scope"], c["effective"]) for c in caps] == [("alpha/development", 3)]
    cap["max"] = None
    assert (await api.put("/api/v1/concurrency/caps", json=cap)).status_code == 204
    assert _ok(await api.get("/api/v1/concurrency/caps")) == []
    bad_scope = await api.put("/api/v1/concurrency/caps", json={"scope": "a/b/c", "max": 1})
    assert "a/b/c" in bad_scope.json()["detail"]
    assert (await api.delete("/api/v1/cache", params={"key": "nope"})).status_code == 404
    for path in ("cache", "reservations", "locks", "plugins", "concurrency/controller"):
        _ok(await api.get(f"/api/v1/{path}"))


async def test_a_node_log_by_page_and_followed(store: Sluice, api: httpx.AsyncClient) -> None:
    done = await store.run_to_end(RunRequest.of(FLOWS.echoing, {"text": "hello"}))
    await store.runtime.open_task_logs().flush()  # logs are stored in periodic batches
    (node,) = _ok(await api.get(f"/api/v1/executions/{done.id}/nodes"))
    path = f"/api/v1/executions/{done.id}/nodes/{node['node']}/logs"
    page = _ok(await api.get(path))
    assert "echo says hello" in [line["text"] for line in page["lines"]]
    first = _ok(await api.get(path, params={"limit": 1}))
    rest = _ok(await api.get(path, params={"after": first["after"]}))
    assert first["lines"] + rest["lines"] == page["lines"]
    followed = await api.get(f"/api/v1/executions/{done.id}/logs/follow")
    assert followed.headers["content-type"].startswith("text/event-stream")
    events = _sse(followed.text)
    assert events[-1] == ("end", "{}")
    texts = [json.loads(data)["text"] for name, data in events if name == "line"]
    assert "echo says hello" in texts
    bad = await api.get(f"/api/v1/executions/{done.id}/logs/follow", params={"node": "nowhere"})
    ((name, data),) = _sse(bad.text)
    assert (name, json.loads(data)["status"]) == ("error", 404)
    assert (await api.get("/api/v1/executions/nope/logs/follow")).status_code == 404


def _sse(text: str) -> list[tuple[str, str]]:
    """(event, data) of each server-sent event."""
    events = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["event"], fields["data"]))
    return events


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/executions?launch_plan=%00",
        "/api/v1/executions/x%00y",
        "/api/v1/executions?project=a%0A",
        "/api/v1/quotas?namespace=%00",
        "/api/v1/pending?launch_plan=%7F",
    ],
)
async def test_a_control_character_is_a_bad_request(api: httpx.AsyncClient, path: str) -> None:
    """PostgreSQL cannot compare text holding a NUL: without the guard this was a 503."""
    response = await api.get(path)
    assert response.status_code == 422, response.text
    assert "control character" in response.json()["detail"]
