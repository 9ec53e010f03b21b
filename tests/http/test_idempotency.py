"""`Idempotency-Key` on POST /api/v1/executions: 201 then 200 with the same execution, 409
naming the key for a different request, 422 for a malformed key."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from sluice.service import Sluice
from support.http_world import FLOWS, client_for


@pytest.fixture
async def api(sluice: Sluice) -> AsyncIterator[httpx.AsyncClient]:
    await sluice.register_launch_plan(FLOWS.plan, activate=True)
    async with client_for(sluice) as client:
        yield client


async def test_a_retried_create_answers_200_with_the_same_execution(
    api: httpx.AsyncClient,
) -> None:
    body = {"launch_plan": "echo_plan", "inputs": {"text": "once"}}
    headers = {"Idempotency-Key": "req-1"}
    first = await api.post("/api/v1/executions", json=body, headers=headers)
    again = await api.post("/api/v1/executions", json=body, headers=headers)
    assert (first.status_code, again.status_code) == (201, 200), again.text
    assert again.json()["id"] == first.json()["id"]
    assert again.json().keys() == first.json().keys()
    listed = (await api.get("/api/v1/executions")).json()["items"]
    assert [e["id"] for e in listed] == [first.json()["id"]]
    other = await api.post("/api/v1/executions", json=body)
    assert other.status_code == 201 and other.json()["id"] != first.json()["id"]


async def test_the_same_key_with_another_request_is_a_409_naming_it(
    api: httpx.AsyncClient,
) -> None:
    headers = {"Idempotency-Key": "req-2"}
    body = {"launch_plan": "echo_plan", "inputs": {"text": "a"}}
    assert (await api.post("/api/v1/executions", json=body, headers=headers)).status_code == 201
    body["inputs"] = {"text": "b"}
    conflict = await api.post("/api/v1/executions", json=body, headers=headers)
    assert conflict.status_code == 409
    assert conflict.headers["content-type"] == "application/problem+json"
    assert "idempotency key 'req-2'" in conflict.json()["detail"]
    too_long = await api.post(
        "/api/v1/executions", json=body, headers={"Idempotency-Key": "k" * 256}
    )
    assert too_long.status_code == 422
