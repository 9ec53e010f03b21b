"""Two projects' worth of state in one store, so every endpoint can be asked, with a token
of one, about the other: executions (one PENDING behind a WAIT policy), launch plans, quota
and lock holders, cache entries and reservations, caps, rate limit waiters."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from sluice.cache.models import CacheEntry, CacheSource
from sluice.config import load_config
from sluice.http.app import create_app
from sluice.http.deps import Authorize, open_scope
from sluice.modules import load_module
from sluice.resources.models import Claim, Holder
from sluice.resources.ratelimit import Asker, RateClaim, RateLimitRule
from sluice.service import Sluice
from sluice.spec.phases import ExecutionPhase

DOMAIN = "development"
FLOWS = load_module("http_flows", str(Path(__file__).with_name("http_flows.py")))
"""Loaded from its file, as the engine's worker processes load it."""
BASE = "http://127.0.0.1:8080"


async def open_sluice(url: str, project: str = "alpha") -> Sluice:
    return await Sluice.open(load_config(None, database_url=url, project=project))


def client_for(sluice: Sluice, authorize: Authorize = open_scope) -> httpx.AsyncClient:
    """A client of an app over `sluice`, in process, on the caller's event loop."""
    app = create_app(sluice, authorize=authorize)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url=BASE)


@dataclass(frozen=True)
class Project:
    name: str
    execution: str
    pending: str
    node: str = "n0"
    backfill: str = ""


async def _register(sluice: Sluice) -> None:
    await sluice.register_launch_plan(FLOWS.plan, activate=True)
    await sluice.register_launch_plan(FLOWS.waiting, activate=True)
    await sluice.register_launch_plan(FLOWS.hourly, activate=True)


async def _backfill(sluice: Sluice) -> str:
    """A backfill of the last three hourly slots (nothing runs it here: it stays RUNNING)."""
    end = datetime.now(UTC) - timedelta(minutes=1)
    found = await sluice.backfills.create("hourly_plan", end - timedelta(hours=3), end)
    return found.id


async def _holdings(sluice: Sluice, project: str, execution: str, node: str) -> None:
    """A quota token, a lock, a cache entry and a reservation owned by `execution/node`."""
    runtime = sluice.runtime
    await runtime.resources.start()
    holder = Holder(project, DOMAIN, execution, node)
    token = f"ex:{project}:{DOMAIN}:{execution}-{node}"
    claims = [Claim("hive"), Claim(f"lock:db/{project}", default_quota=1)]
    assert (await runtime.resources.allocate(token, claims, holder)).granted
    catalog = await runtime.open_catalog()
    entry = CacheEntry({"o0": 1}, f"task_{project}", "1", CacheSource(execution, node))
    assert await catalog.put(f"key{project}", entry)
    await catalog.get_or_extend_reservation(f"res{project}", f"{execution}/{node}", 10.0)
    await sluice.set_cap(project, 7)
    limits = runtime.rate_limits  # the slot of key `project` taken, and the node waits for it
    await limits.start()
    await limits.set_rule("api", RateLimitRule.parse("1/hour"))
    assert (await limits.admit([RateClaim("api", project)], f"{execution}-before")).granted
    asker = Asker(execution, node)
    assert not (
        await limits.admit([RateClaim("api", project)], f"{execution}-{node}", asker)
    ).granted


async def populate(sluice: Sluice, project: str) -> Project:
    """`sluice` must be configured for `project` (launch plans register under it)."""
    await _register(sluice)
    await sluice.runtime.resources.start()
    await sluice.runtime.resources.set_quota("hive", 10)
    execution = await sluice.runtime.launch(FLOWS.echoing, {}, project=project)
    first = await sluice.runtime.launch(FLOWS.waiting, {}, project=project)
    second = await sluice.runtime.launch(FLOWS.waiting, {}, project=project)
    pending = second if second.phase is ExecutionPhase.PENDING else first
    await _holdings(sluice, project, execution.id, "n0")
    return Project(project, execution.id, pending.id, backfill=await _backfill(sluice))
