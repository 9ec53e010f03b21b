"""/api/v1/backfills: create (201), list and show with progress, pause, resume, cancel, and
bad values named in a 422."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from sluice.service import Sluice
from support.http_world import FLOWS, client_for

RANGE = {"start": "2026-01-01T00:00:00Z", "end": "2026-01-01T05:00:00Z"}


@pytest.fixture
async def api(sluice: Sluice) -> AsyncIterator[httpx.AsyncClient]:
    await sluice.register_launch_plan(FLOWS.hourly, activate=True)
    await sluice.register_launch_plan(FLOWS.plan, activate=True)
    async with client_for(sluice) as client:
        yield client


async def test_create_list_show_pause_resume_cancel(api: httpx.AsyncClient) -> None:
    body = {"launch_plan": "hourly_plan", **RANGE, "max_active": 2}
    created = await api.post("/api/v1/backfills", json=body)
    assert created.status_code == 201, created.text
    made = created.json()
    assert (made["state"], made["reprocess"], made["max_active"]) == ("RUNNING", "none", 2)
    assert made["progress"] == {"PLANNED": made["slots"]} and made["slots"] >= 5
    listed = (await api.get("/api/v1/backfills", params={"state": "RUNNING"})).json()
    assert [b["id"] for b in listed] == [made["id"]]
    path = f"/api/v1/backfills/{made['id']}"
    assert (await api.post(f"{path}/pause")).json()["state"] == "PAUSED"
    assert (await api.post(f"{path}/resume")).json()["state"] == "RUNNING"
    assert (await api.post(f"{path}/cancel")).json()["state"] == "CANCELLED"
    again = await api.post(f"{path}/resume")
    assert again.status_code == 422 and "is CANCELLED" in again.json()["detail"]
    assert (await api.get("/api/v1/backfills/bfnope")).status_code == 404


BAD = [
    ({"launch_plan": "echo_plan"}, "no schedule"),
    ({"end": "2999-01-01T00:00:00Z"}, "future"),
    ({"start": "2026-01-02T00:00:00Z"}, "start must not be after"),
    ({"reprocess": "some"}, "reprocess"),
    ({"start": "2000-01-01T00:00:00Z"}, "backfill_max_slots"),
]


async def test_bad_backfills_are_refused_naming_what_is_wrong(api: httpx.AsyncClient) -> None:
    for change, culprit in BAD:
        body = {"launch_plan": "hourly_plan", **RANGE, **change}
        refused = await api.post("/api/v1/backfills", json=body)
        assert refused.status_code == 422 and culprit in refused.json()["detail"], refused.text
    assert (await api.get("/api/v1/backfills")).json() == []
