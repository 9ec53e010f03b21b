"""Bounded payloads (issue 26, defect 8): a body over the configured size is a 413 before it
is parsed, inputs over theirs a 422 at launch, and a big value is cut in views (with a route
to the whole of it): a 1 MB string input once made an 18 MB API answer."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from sluice.config import load_config
from sluice.service import RunRequest, Sluice
from support.http_world import FLOWS, client_for

MEGABYTE = 1024 * 1024


@pytest.fixture
async def sluice(sqlite_url: str) -> AsyncIterator[Sluice]:
    payloads = {"max_request_bytes": 2 * MEGABYTE, "max_inputs_bytes": 512 * 1024}
    settings = load_config(None, database_url=sqlite_url, project="alpha", payloads=payloads)
    opened = await Sluice.open(settings)
    await opened.register_launch_plan(FLOWS.plan, activate=True)
    yield opened
    await opened.close()


async def test_a_body_over_the_limit_is_413_naming_it(sluice: Sluice) -> None:
    body = {"launch_plan": "echo_plan", "inputs": {"text": "x" * (3 * MEGABYTE)}}
    async with client_for(sluice) as api:
        response = await api.post("/api/v1/executions", json=body)
    assert response.status_code == 413, response.text[:300]
    problem = response.json()
    assert problem["type"].endswith("/too-large")
    assert "2,097,152 bytes (payloads.max_request_bytes)" in problem["detail"]


async def test_inputs_over_the_limit_are_422_naming_the_input(sluice: Sluice) -> None:
    body = {"launch_plan": "echo_plan", "inputs": {"text": "x" * MEGABYTE}}
    async with client_for(sluice) as api:
        response = await api.post("/api/v1/executions", json=body)
        assert response.status_code == 422, response.text[:300]
        assert "'text'" in response.json()["detail"]
        assert "payloads.max_inputs_bytes" in response.json()["detail"]
        assert (await api.get("/api/v1/executions")).json()["total"] == 0  # nothing written


async def test_a_big_value_is_cut_in_views_and_whole_on_its_route(sluice: Sluice) -> None:
    big = "y" * MEGABYTE  # launched from Python, where no HTTP limit applies
    done = await sluice.run_to_end(RunRequest.of(FLOWS.echoing, {"text": big}))
    async with client_for(sluice) as api:
        response = await api.get(f"/api/v1/executions/{done.id}")
        assert response.status_code == 200
        assert len(response.content) < 64 * 1024, len(response.content)
        view = response.json()
        assert view["truncated"] == ["inputs", "outputs"]
        assert (
            view["inputs"]["text"].startswith("yyyy")
            and "1,048,576 characters" in (view["inputs"]["text"])
        )
        (node,) = view["nodes"]
        assert node["truncated"] == ["inputs", "outputs"]
        whole = (await api.get(f"/api/v1/executions/{done.id}/values/inputs")).json()
        assert whole == {"text": big}
        path = f"/api/v1/executions/{done.id}/nodes/{node['node']}/values/outputs"
        assert (await api.get(path)).json() == {"o0": big}
        nodes = await api.get(f"/api/v1/executions/{done.id}/nodes")
        assert len(nodes.content) < 64 * 1024


async def test_a_chunked_body_is_cut_off_at_the_limit(sluice: Sluice) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        yield b'{"launch_plan": "echo_plan", "inputs": {"text": "'
        for _ in range(3):
            yield b"z" * MEGABYTE
        yield b'"}}'

    async with client_for(sluice) as api:
        headers = {"content-type": "application/json"}
        response = await api.post("/api/v1/executions", content=chunks(), headers=headers)
    assert response.status_code == 413, response.text[:300]
    assert response.json()["type"].endswith("/too-large")
