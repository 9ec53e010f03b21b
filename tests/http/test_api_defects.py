"""What the API refuses, and how (issue 26, defect 9): numbers past what the store holds are
a 422 naming the parameter, never a 500; an unknown body field is refused, never ignored; an
unreadable body is a 422 invalid-argument; numbers are numbers, not strings; a project's token
does not read the deployment's metrics."""

from __future__ import annotations

import httpx
import pytest

from sluice.http.auth import token_auth
from sluice.service import Sluice
from support.http_world import Project, client_for

BIGGER_THAN_INT64 = "9223372036854775808"


def _invalid(response: httpx.Response, *words: str) -> None:
    assert response.status_code == 422, response.text
    body = response.json()
    assert body["type"].endswith("/invalid-argument"), body
    for word in words:
        assert word in body["detail"], body


async def test_numbers_past_the_store_are_422_not_500(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, mine, _ = two_projects
    async with client_for(sluice) as api:
        events = f"/api/v1/executions/{mine.execution}/events?after={BIGGER_THAN_INT64}"
        _invalid(await api.get(events), "after")
        logs = f"/api/v1/executions/{mine.execution}/nodes/echo/logs?attempt={'9' * 23}"
        _invalid(await api.get(logs), "attempt")
        page = f"/api/v1/executions/{mine.execution}/nodes/echo/logs?after=1:{'9' * 30}:0"
        _invalid(await api.get(page), "after")


async def test_an_unknown_body_field_is_refused_not_ignored(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, _, _ = two_projects
    async with client_for(sluice) as api:
        body = {"launch_plan": "echo_plan", "input": {"text": "5"}}
        _invalid(await api.post("/api/v1/executions", json=body), "input")
        _invalid(await api.put("/api/v1/quotas/hive", json={"quota": 3, "qouta": 4}), "qouta")


@pytest.mark.parametrize("body", [b"{not json", b"[" * 100_000, b"\xff\xfe"])
async def test_an_unreadable_body_is_422_invalid_argument(
    two_projects: tuple[Sluice, Project, Project], body: bytes
) -> None:
    sluice, _, _ = two_projects
    async with client_for(sluice) as api:
        headers = {"content-type": "application/json"}
        response = await api.post("/api/v1/executions", content=body, headers=headers)
    _invalid(response)
    assert response.json()["title"] == "Invalid argument"


async def test_a_number_sent_as_a_string_is_refused(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, _, _ = two_projects
    async with client_for(sluice) as api:
        _invalid(await api.put("/api/v1/quotas/hive", json={"quota": "5"}), "quota")
        cap = {"scope": "alpha", "max": "3"}
        _invalid(await api.put("/api/v1/concurrency/caps", json=cap), "max")
        assert (await api.get("/api/v1/quotas", params={"namespace": "hive"})).json()[0][
            "quota"
        ] == 10


async def test_the_schema_states_the_limits_the_server_applies(sluice: Sluice) -> None:
    async with client_for(sluice) as api:
        schema = (await api.get("/api/v1/openapi.json")).json()
    quota = schema["components"]["schemas"]["QuotaValue"]["properties"]["quota"]
    assert quota["maximum"] == sluice.settings.resources.max_quota
    create = schema["components"]["schemas"]["CreateExecution"]
    assert create["additionalProperties"] is False
    assert create["properties"]["launch_plan"]["pattern"].startswith("^[A-Za-z0-9_]")
    events = schema["paths"]["/api/v1/executions/{execution_id}/events"]["get"]
    (after,) = [p for p in events["parameters"] if p["name"] == "after"]
    assert after["schema"]["maximum"] == 2**63 - 1


async def test_a_projects_token_cannot_read_the_deployments_metrics(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, mine, theirs = two_projects
    issued = await sluice.tokens.create([mine.name], read_only=True)
    async with client_for(sluice, token_auth(sluice, required=True)) as api:
        response = await api.get("/metrics", headers={"Authorization": f"Bearer {issued.secret}"})
    assert response.status_code == 403, response.text
    assert theirs.name not in response.text and "db/beta" not in response.text


async def test_setting_a_locks_capacity_answers_the_lock(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    """Found by the schema test: PUT /quotas/lock:<name> set the capacity, then answered 500
    (it looked the namespace up among quotas, which leave locks out)."""
    sluice, _, _ = two_projects
    async with client_for(sluice) as api:
        response = await api.put("/api/v1/quotas/lock:db/alpha", json={"quota": 3})
    assert response.status_code == 200, response.text
    assert (response.json()["namespace"], response.json()["quota"]) == ("lock:db/alpha", 3)
