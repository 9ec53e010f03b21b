"""The app's frame: health, readiness, the OpenAPI document, errors as problem details."""

from __future__ import annotations

import httpx


async def test_health_and_ready(client: httpx.AsyncClient) -> None:
    assert (await client.get("/api/v1/health")).json() == {"ok": True}
    ready = (await client.get("/api/v1/ready")).json()
    assert ready["ok"] is True
    assert ready["database"] == "sqlite"
    assert ready["schema_revision"]


async def test_the_schema_is_openapi_3_1_under_api_v1(client: httpx.AsyncClient) -> None:
    schema = (await client.get("/api/v1/openapi.json")).json()
    assert schema["openapi"].startswith("3.1")
    assert all(path.startswith("/api/v1/") for path in schema["paths"])
    assert "/api/v1/executions" in schema["paths"]
    assert schema["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"
    assert schema["security"] == [{"bearer": []}, {}]  # optional: loopback needs none


async def test_an_unknown_execution_is_a_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/executions/nope")
    assert response.status_code == 404
    assert response.headers["content-type"] == "application/problem+json"
    assert response.json() == {
        "type": "https://sluice.dev/problems/not-found",
        "title": "Not Found",
        "status": 404,
        "detail": "execution 'nope' does not exist",
    }


async def test_a_bad_query_value_is_a_422_naming_it(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/executions", params={"limit": "0"})
    assert response.status_code == 422
    assert "query.limit" in response.json()["detail"]
    response = await client.get("/api/v1/executions", params={"phase": "sleepy"})
    assert response.status_code == 422
    assert "sleepy" in response.json()["detail"]


async def test_an_unknown_path_is_a_404_problem(client: httpx.AsyncClient) -> None:
    response = await client.get("/api/v1/nothing-here")
    assert response.status_code == 404
    assert response.json()["status"] == 404
