"""Project isolation, endpoint by endpoint: a token for alpha asks about beta and finds
nothing (404 for beta's things, lists without them, 403 for deployment-wide writes). The
table must name every API route, so a new route cannot ship without its isolation case."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx
import pytest

from sluice.http.app import API_PREFIX, create_app
from sluice.http.auth import token_auth
from sluice.http.deps import open_scope
from sluice.service import Sluice
from support.http_world import Project, client_for

Check = Callable[[httpx.AsyncClient, Project, Project], Awaitable[None]]
CASES: dict[tuple[str, str], Check] = {}


def case(method: str, path: str) -> Callable[[Check], Check]:
    def register(check: Check) -> Check:
        CASES[(method, API_PREFIX + path)] = check
        return check

    return register


def _json(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def _not_found(response: httpx.Response) -> None:
    assert response.status_code == 404, response.text
    assert response.headers["content-type"] == "application/problem+json"


def _forbidden(response: httpx.Response) -> None:
    assert response.status_code == 403, response.text


@case("GET", "/health")
async def _health(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    assert _json(await c.get("/api/v1/health")) == {"ok": True}  # nothing of any project


@case("GET", "/ready")
async def _ready(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    assert theirs.name not in (await c.get("/api/v1/ready")).text


@case("GET", "/executions")
async def _executions(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    listed = _json(await c.get("/api/v1/executions"))["items"]
    assert {e["project"] for e in listed} == {mine.name}
    asked = _json(await c.get("/api/v1/executions", params={"project": theirs.name}))
    assert asked["items"] == []


@case("POST", "/executions")
async def _create(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    body = {"launch_plan": "echo_plan", "project": theirs.name}
    _not_found(await c.post("/api/v1/executions", json=body))


@case("GET", "/executions/{execution_id}")
async def _execution(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}"))
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution[:12]}"))  # a prefix too
    assert _json(await c.get(f"/api/v1/executions/{mine.execution}"))["id"] == mine.execution


@case("GET", "/executions/{execution_id}/nodes")
async def _nodes(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/nodes"))


@case("GET", "/executions/{execution_id}/nodes/{node_id}/attempts")
async def _attempts(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/nodes/n0/attempts"))


@case("GET", "/executions/{execution_id}/events")
async def _events(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/events"))


@case("GET", "/executions/{execution_id}/logs")
async def _execution_logs(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/logs"))
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution[:12]}/logs"))
    assert _json(await c.get(f"/api/v1/executions/{mine.execution}/logs")) == []


@case("GET", "/executions/{execution_id}/nodes/{node_id}/logs")
async def _log_page(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/nodes/n0/logs"))


@case("GET", "/executions/{execution_id}/logs/follow")
async def _follow(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/logs/follow"))


@case("POST", "/executions/{execution_id}/abort")
async def _abort(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.post(f"/api/v1/executions/{theirs.execution}/abort"))


@case("POST", "/executions/{execution_id}/nodes/{node_id}/signal")
async def _signal(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    url = "/api/v1/executions/{}/nodes/n0/signal"
    _not_found(await c.post(url.format(theirs.execution), json={"value": 1}))
    refused = await c.post(url.format(mine.execution), json={"value": 1})
    assert "has no node 'n0'" in refused.text  # its own execution is found (it has no gate)


@case("GET", "/pending")
async def _pending(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    listed = _json(await c.get("/api/v1/pending"))
    assert mine.pending in {e["id"] for e in listed}
    assert {e["project"] for e in listed} == {mine.name}


@case("GET", "/launch-plans")
async def _launch_plans(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get("/api/v1/launch-plans", params={"project": theirs.name}))
    assert _json(await c.get("/api/v1/launch-plans", params={"project": mine.name}))


@case("GET", "/launch-plans/{name}")
async def _launch_plan(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get("/api/v1/launch-plans/echo_plan", params={"project": theirs.name}))


@case("POST", "/launch-plans/{name}/activate")
async def _activate(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    path = "/api/v1/launch-plans/echo_plan/activate"
    _not_found(await c.post(path, params={"project": theirs.name}))


@case("POST", "/launch-plans/{name}/deactivate")
async def _deactivate(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    path = "/api/v1/launch-plans/echo_plan/deactivate"
    _not_found(await c.post(path, params={"project": theirs.name}))


@case("GET", "/quotas")
async def _quotas(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    (hive,) = _json(await c.get("/api/v1/quotas", params={"namespace": "hive"}))
    assert [h["execution_id"] for h in hive["holders"]] == [mine.execution]
    assert hive["in_use"] == 2  # the deployment's total, which the caller's wait depends on


@case("PUT", "/quotas/{namespace}")
async def _set_quota(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _forbidden(await c.put("/api/v1/quotas/hive", json={"quota": 1}))


@case("GET", "/ratelimits")
async def _rate_limits(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    (api,) = _json(await c.get("/api/v1/ratelimits", params={"name": "api"}))
    assert api["rate"] == "1/hour"  # the deployment's rule, which the caller's wait depends on
    keys = [(k["key"], [w["execution_id"] for w in k["waiters"]]) for k in api["keys"]]
    assert keys == [(mine.name, [mine.execution])]  # keys come from inputs, like lock names


@case("PUT", "/ratelimits/{name}")
async def _set_rate_limit(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _forbidden(await c.put("/api/v1/ratelimits/api", json={"rate": "5/s"}))


@case("DELETE", "/ratelimits/{name}")
async def _clear_rate_limit(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _forbidden(await c.delete("/api/v1/ratelimits/api"))


@case("GET", "/locks")
async def _locks(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    listed = _json(await c.get("/api/v1/locks"))
    assert [(lock["lock"], lock["holders"]) for lock in listed] == [
        (f"db/{mine.name}", [f"{mine.execution}/n0"])
    ]


@case("GET", "/cache")
async def _cache(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    listed = _json(await c.get("/api/v1/cache"))
    assert [e["key"] for e in listed] == [f"key{mine.name}"]


@case("DELETE", "/cache")
async def _cache_rm(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _forbidden(await c.delete("/api/v1/cache", params={"key": f"key{theirs.name}"}))


@case("GET", "/reservations")
async def _reservations(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    listed = _json(await c.get("/api/v1/reservations"))
    assert [r["owner"] for r in listed] == [f"{mine.execution}/n0"]


@case("GET", "/concurrency/caps")
async def _caps(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    assert [cap["scope"] for cap in _json(await c.get("/api/v1/concurrency/caps"))] == [mine.name]


@case("PUT", "/concurrency/caps")
async def _set_cap(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _forbidden(await c.put("/api/v1/concurrency/caps", json={"scope": theirs.name, "max": 1}))


@case("GET", "/concurrency/controller")
async def _controller(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    pending = _json(await c.get("/api/v1/concurrency/controller"))["pending"]
    assert {p["project"] for p in pending} == {mine.name}


@case("GET", "/plugins")
async def _plugins(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    assert theirs.name not in (await c.get("/api/v1/plugins")).text


@case("GET", "/backfills")
async def _backfills(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    listed = _json(await c.get("/api/v1/backfills"))
    assert [(b["id"], b["project"]) for b in listed] == [(mine.backfill, mine.name)]


@case("POST", "/backfills")
async def _create_backfill(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    body = {
        "launch_plan": "hourly_plan",
        "start": "2026-01-01T00:00:00Z",
        "end": "2026-01-01T02:00:00Z",
        "project": theirs.name,
    }
    _not_found(await c.post("/api/v1/backfills", json=body))


@case("GET", "/backfills/{backfill_id}")
async def _backfill(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/backfills/{theirs.backfill}"))
    assert _json(await c.get(f"/api/v1/backfills/{mine.backfill}"))["slots"] == 3


@case("POST", "/backfills/{backfill_id}/pause")
async def _pause_backfill(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.post(f"/api/v1/backfills/{theirs.backfill}/pause"))


@case("POST", "/backfills/{backfill_id}/resume")
async def _resume_backfill(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.post(f"/api/v1/backfills/{theirs.backfill}/resume"))


@case("POST", "/backfills/{backfill_id}/cancel")
async def _cancel_backfill(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.post(f"/api/v1/backfills/{theirs.backfill}/cancel"))


@case("GET", "/executions/{execution_id}/values/{side}")
async def _execution_value(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/values/inputs"))
    assert _json(await c.get(f"/api/v1/executions/{mine.execution}/values/inputs")) == {
        "text": "hi"
    }


@case("GET", "/executions/{execution_id}/nodes/{node_id}/values/{side}")
async def _node_value(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get(f"/api/v1/executions/{theirs.execution}/nodes/echo/values/inputs"))


@case("GET", "/whoami")
async def _whoami(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    caller = _json(await c.get("/api/v1/whoami"))
    assert caller["projects"] == [mine.name] and caller["who"].startswith("token ")


@case("POST", "/executions/{execution_id}/relaunch")
async def _relaunch(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.post(f"/api/v1/executions/{theirs.execution}/relaunch"))


@case("POST", "/executions/{execution_id}/retry")
async def _retry(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.post(f"/api/v1/executions/{theirs.execution}/retry"))


@case("POST", "/executions/bulk-abort")
async def _bulk_abort(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    body = {"ids": [mine.pending, theirs.pending]}
    _not_found(await c.post("/api/v1/executions/bulk-abort", json=body))
    assert _json(await c.get(f"/api/v1/executions/{mine.pending}"))["phase"] == "PENDING"


@case("GET", "/launch-plans/{name}/form")
async def _form(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    path = "/api/v1/launch-plans/echo_plan/form"
    _not_found(await c.get(path, params={"project": theirs.name}))
    assert [f["name"] for f in _json(await c.get(path))["fields"]] == ["text"]


@case("GET", "/catalogue")
async def _catalogue(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    _not_found(await c.get("/api/v1/catalogue", params={"project": theirs.name}))
    assert _json(await c.get("/api/v1/catalogue"))["project"] == mine.name


@case("GET", "/workflows/{name}")
async def _workflow(c: httpx.AsyncClient, mine: Project, theirs: Project) -> None:
    path = "/api/v1/workflows/http_flows.echoing"
    _not_found(await c.get(path, params={"project": theirs.name}))


def _api_routes(sluice: Sluice) -> set[tuple[str, str]]:
    """Every documented operation (the UI's pages and /metrics are not in the schema)."""
    paths = create_app(sluice, authorize=open_scope).openapi()["paths"]
    return {(method.upper(), path) for path, ops in paths.items() for method in ops}


async def test_every_api_route_has_an_isolation_case(sluice: Sluice) -> None:
    assert _api_routes(sluice) == set(CASES)


@pytest.fixture
async def alpha_client(
    two_projects: tuple[Sluice, Project, Project],
) -> AsyncIterator[tuple[httpx.AsyncClient, Project, Project]]:
    sluice, mine, theirs = two_projects
    issued = await sluice.tokens.create([mine.name])
    async with client_for(sluice, token_auth(sluice, required=True)) as client:
        client.headers["Authorization"] = f"Bearer {issued.secret}"
        yield client, mine, theirs


@pytest.mark.parametrize("route", sorted(CASES), ids=" ".join)
async def test_a_token_sees_only_its_projects(
    alpha_client: tuple[httpx.AsyncClient, Project, Project], route: tuple[str, str]
) -> None:
    client, mine, theirs = alpha_client
    await CASES[route](client, mine, theirs)
