"""Finding executions (issue 26): text search by id, workflow, launch plan and input values,
a launch plan prefix, cursor pages both ways with the total, over SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from sluice.service import Sluice
from support.http_world import FLOWS, client_for, open_sluice


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    if request.param == "sqlite":
        return sqlite_url
    request.getfixturevalue("pg_upgraded_url")
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
async def api(url: str) -> AsyncIterator[httpx.AsyncClient]:
    sluice: Sluice = await open_sluice(url)
    await sluice.register_launch_plan(FLOWS.plan, activate=True)
    for text in ("apple", "banana", "cherry", "apple pie", "dates"):
        await sluice.create("echo_plan", {"text": text})
    async with client_for(sluice) as client:
        yield client
    await sluice.close()


async def _ids(api: httpx.AsyncClient, **params: Any) -> list[str]:
    response = await api.get("/api/v1/executions", params=params)
    assert response.status_code == 200, response.text
    return [e["id"] for e in response.json()["items"]]


async def test_search_by_input_value_name_and_id(api: httpx.AsyncClient) -> None:
    every = await _ids(api)
    assert len(every) == 5
    assert len(await _ids(api, q="APPLE")) == 2  # case-insensitive, inside the inputs' JSON
    assert await _ids(api, q="banana") == [every[3]]
    assert await _ids(api, q=every[2][:14]) == [every[2]]  # an id prefix
    assert len(await _ids(api, q="echoing")) == 5  # the workflow's name
    assert len(await _ids(api, q="echo_pl")) == 5  # the launch plan's
    assert await _ids(api, q="100%_") == []  # LIKE's wildcards are taken literally
    assert len(await _ids(api, launch_plan_prefix="echo")) == 5
    assert await _ids(api, launch_plan_prefix="nope") == []


async def test_cursor_pages_go_both_ways_and_count_the_whole(api: httpx.AsyncClient) -> None:
    every = await _ids(api)
    first = (await api.get("/api/v1/executions", params={"limit": 2})).json()
    assert first["total"] == 5 and first["prev_cursor"] is None
    second = (
        await api.get("/api/v1/executions", params={"limit": 2, "cursor": first["next_cursor"]})
    ).json()
    third = (
        await api.get("/api/v1/executions", params={"limit": 2, "cursor": second["next_cursor"]})
    ).json()
    assert [e["id"] for p in (first, second, third) for e in p["items"]] == every
    assert third["next_cursor"] is None and third["total"] == 5
    back = (
        await api.get("/api/v1/executions", params={"limit": 2, "cursor": third["prev_cursor"]})
    ).json()
    assert back["items"] == second["items"]
    start = (
        await api.get("/api/v1/executions", params={"limit": 2, "cursor": back["prev_cursor"]})
    ).json()
    assert start["items"] == first["items"] and start["prev_cursor"] is None
    narrowed = (await api.get("/api/v1/executions", params={"limit": 1, "q": "apple"})).json()
    assert narrowed["total"] == 2 and narrowed["next_cursor"] is not None
