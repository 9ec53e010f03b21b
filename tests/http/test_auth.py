"""Who may call: tokens (hashed, scoped, read-only, revoked), the loopback exception and its
Host check, cross-site writes, and what an unexpected error tells a client (nothing)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import httpx
import pytest
import sqlalchemy as sa

from sluice.errors import StoreUnavailableError
from sluice.http.auth import authorization, is_loopback, token_auth
from sluice.service import Sluice
from sluice.store import schema
from support.http_world import Project, client_for


@pytest.fixture
async def guarded(sluice: Sluice) -> AsyncIterator[httpx.AsyncClient]:
    """The app as served on a non-loopback address: every request needs a token."""
    async with client_for(sluice, authorization(sluice, bind_host="0.0.0.0")) as client:
        yield client


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("192.168.1.4", False),
        ("example.com", False),
        ("localhost.example.com", False),
    ],
)
def test_which_binds_are_loopback(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


async def test_only_a_hash_of_the_secret_is_stored(sluice: Sluice) -> None:
    issued = await sluice.tokens.create(["alpha"], name="ci")
    assert issued.secret.startswith(f"sluice_{issued.token.id}_")
    async with sluice.runtime.store.read() as repos:
        rows = (await repos.conn.execute(sa.select(schema.api_tokens))).all()
    assert len(rows) == 1
    assert all(issued.secret.split("_", 2)[2] not in str(v) for v in rows[0])
    assert [t.name for t in await sluice.tokens.list()] == ["ci"]


async def test_without_a_token_a_public_server_answers_401(guarded: httpx.AsyncClient) -> None:
    response = await guarded.get("/api/v1/executions")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert "sluice tokens create" in response.json()["detail"]
    assert (await guarded.get("/api/v1/health")).status_code == 200  # probes need no token
    assert (await guarded.get("/metrics")).status_code == 401


@pytest.mark.parametrize(
    "header",
    ["Bearer sluice_nope_nope", "Bearer ", "Basic dXNlcjpwdw==", "sluice_x_y", "Bearer x y"],
)
async def test_a_bad_token_is_401(guarded: httpx.AsyncClient, header: str) -> None:
    response = await guarded.get("/api/v1/executions", headers={"Authorization": header})
    assert response.status_code == 401, header
    assert response.json()["status"] == 401


async def test_a_token_works_until_revoked(sluice: Sluice, guarded: httpx.AsyncClient) -> None:
    issued = await sluice.tokens.create(["alpha"])
    assert (await guarded.get("/api/v1/executions", headers=_bearer(issued.secret))).is_success
    assert (await guarded.get("/metrics", headers=_bearer(issued.secret))).status_code == 403
    await sluice.tokens.revoke(issued.token.id)
    response = await guarded.get("/api/v1/executions", headers=_bearer(issued.secret))
    assert response.status_code == 401


async def test_a_right_id_with_a_wrong_secret_is_401(
    sluice: Sluice, guarded: httpx.AsyncClient
) -> None:
    issued = await sluice.tokens.create(["alpha"])
    forged = f"sluice_{issued.token.id}_{'A' * 43}"
    assert (await guarded.get("/api/v1/executions", headers=_bearer(forged))).status_code == 401


async def test_the_cookie_carries_a_token_too(sluice: Sluice, guarded: httpx.AsyncClient) -> None:
    issued = await sluice.tokens.create(["alpha"])
    guarded.cookies.set("sluice_token", issued.secret)
    assert (await guarded.get("/api/v1/executions")).is_success


async def test_a_read_only_token_cannot_write(sluice: Sluice, guarded: httpx.AsyncClient) -> None:
    issued = await sluice.tokens.create(["alpha"], read_only=True)
    headers = _bearer(issued.secret)
    body = {"launch_plan": "echo_plan", "project": "alpha"}
    response = await guarded.post("/api/v1/executions", json=body, headers=headers)
    assert response.status_code == 403
    assert response.json()["detail"] == "this token is read-only"


async def test_a_scoped_token_cannot_change_deployment_settings(
    sluice: Sluice, guarded: httpx.AsyncClient
) -> None:
    issued = await sluice.tokens.create(["alpha"])
    response = await guarded.put(
        "/api/v1/quotas/hive", json={"quota": 3}, headers=_bearer(issued.secret)
    )
    assert response.status_code == 403
    assert "unscoped" in response.json()["detail"]


async def test_loopback_without_a_token_answers_only_loopback_hosts(sluice: Sluice) -> None:
    async with client_for(sluice, token_auth(sluice, required=False)) as client:
        assert (await client.get("/api/v1/executions")).is_success
        for host in ("localhost:8080", "[::1]:8080", "127.0.0.1"):
            assert (await client.get("/api/v1/executions", headers={"Host": host})).is_success
        rebound = await client.get("/api/v1/executions", headers={"Host": "evil.example"})
        assert rebound.status_code == 403
        assert "evil.example" in rebound.json()["detail"]


@pytest.mark.parametrize(
    "headers",
    [
        {"Sec-Fetch-Site": "cross-site"},
        {"Sec-Fetch-Site": "same-site"},
        {"Origin": "http://evil.example"},
    ],
)
async def test_a_write_from_another_site_is_refused(
    sluice: Sluice, headers: dict[str, str]
) -> None:
    async with client_for(sluice, token_auth(sluice, required=False)) as client:
        response = await client.post("/api/v1/executions/nope/abort", headers=headers)
        assert response.status_code == 403, response.text
        own = {"Origin": "http://127.0.0.1:8080", "Sec-Fetch-Site": "same-origin"}
        response = await client.post("/api/v1/executions/nope/abort", headers=own)
        assert response.status_code == 404  # allowed through: the execution does not exist


async def test_a_bearer_header_is_not_subject_to_the_site_check(
    sluice: Sluice, guarded: httpx.AsyncClient
) -> None:
    issued = await sluice.tokens.create(["alpha"])
    headers = {**_bearer(issued.secret), "Origin": "http://tool.example"}
    response = await guarded.post("/api/v1/executions/nope/abort", headers=headers)
    assert response.status_code == 404


async def test_an_unexpected_error_is_a_500_without_details(
    sluice: Sluice, client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(_: Sluice) -> None:
        raise RuntimeError("postgresql://admin:hunter2@db/prod exploded")

    monkeypatch.setattr(Sluice, "plugins", broken)
    response = await client.get("/api/v1/plugins")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/problem+json"
    assert "hunter2" not in response.text
    assert "Traceback" not in response.text
    assert response.json()["detail"] == "the server failed to handle this request; see its log"


async def test_a_store_outage_is_a_503(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def down(_: Sluice) -> None:
        raise StoreUnavailableError("cannot connect to the database at sqlite:///x.db")

    monkeypatch.setattr(Sluice, "locks", down)
    response = await client.get("/api/v1/locks")
    assert response.status_code == 503
    assert response.json()["detail"] == "cannot connect to the database at sqlite:///x.db"


async def test_requests_are_counted_and_logged(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG, logger="sluice.http.access"):
        await client.get("/api/v1/executions/nope")
    assert any("GET /api/v1/executions/nope 404" in r.getMessage() for r in caplog.records)
    page = (await client.get("/metrics")).text
    assert (
        'sluice_http_requests_total{method="GET",route="/api/v1/executions/{execution_id}",'
        'status="404"} 1.0'
    ) in page
    assert "sluice_http_request_duration_seconds_bucket" in page


async def test_a_one_project_token_works_in_its_project_by_default(
    two_projects: tuple[Sluice, Project, Project],
) -> None:
    sluice, _, theirs = two_projects
    issued = await sluice.tokens.create([theirs.name])  # the server is configured for alpha
    async with client_for(sluice, token_auth(sluice, required=True)) as client:
        client.headers["Authorization"] = f"Bearer {issued.secret}"
        plans = (await client.get("/api/v1/launch-plans")).json()
        assert {p["project"] for p in plans} == {theirs.name}
        body = {"launch_plan": "echo_plan"}
        created = await client.post("/api/v1/executions", json=body)
        assert created.status_code == 201, created.text
        assert created.json()["project"] == theirs.name
