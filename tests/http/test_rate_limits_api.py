"""The rate limit routes: set, list, clear; a bad limit is a 422 naming the value."""

from __future__ import annotations

import httpx


async def test_set_list_and_clear_a_rate_limit(client: httpx.AsyncClient) -> None:
    bad = await client.put("/api/v1/ratelimits/openai", json={"rate": "5/fortnight"})
    assert bad.status_code == 422, bad.text
    assert "'fortnight'" in bad.json()["detail"]
    zero = await client.put("/api/v1/ratelimits/openai", json={"rate": "0/min"})
    assert zero.status_code == 422 and "'0/min'" in zero.json()["detail"]
    put = await client.put("/api/v1/ratelimits/openai", json={"rate": "100/min", "burst": 10})
    assert put.status_code == 200, put.text
    assert (put.json()["rate"], put.json()["source"], put.json()["burst"]) == (
        "100/min, burst 10",
        "operator",
        10,
    )
    listed = (await client.get("/api/v1/ratelimits")).json()
    assert [(limit["name"], limit["rate"]) for limit in listed] == [("openai", "100/min, burst 10")]
    cleared = await client.delete("/api/v1/ratelimits/openai")
    assert (cleared.status_code, cleared.json()["rate"]) == (200, None)
    assert (await client.get("/api/v1/ratelimits")).json() == []
