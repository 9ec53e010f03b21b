"""What is specific to each backend: choosing one by URL, driver hints, where data lives."""

from __future__ import annotations

import sys

import pytest
import sqlalchemy as sa

from sluice.clock import FakeClock
from sluice.config import ResourcesConfig
from sluice.errors import BackendUnavailableError, ConfigError, MissingDependencyError
from sluice.resources import Claim, Holder, QuotaManager, from_url
from sluice.resources.backends.memory import MemoryBackend
from sluice.resources.backends.redis import RedisBackend
from sluice.resources.backends.sql import SqlBackend
from sluice.store import schema
from sluice.store.database import Database

TASK = Holder("foo", "dev", "x1", "n1")


@pytest.mark.parametrize(
    ("url", "kind"),
    [
        ("memory://", MemoryBackend),
        ("sqlite:///tmp/x.db", SqlBackend),
        ("postgresql://u@h/db", SqlBackend),
        ("redis://localhost:6379/0", RedisBackend),
    ],
)
def test_from_url_picks_the_backend_by_scheme(url: str, kind: type) -> None:
    assert isinstance(from_url(url), kind)


def test_from_url_rejects_an_unknown_scheme_naming_it() -> None:
    with pytest.raises(ConfigError, match=r"'mongodb'.*memory, postgres, postgresql, redis"):
        from_url("mongodb://localhost")


def test_a_missing_redis_driver_gives_the_install_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "redis.asyncio", None)

    with pytest.raises(MissingDependencyError, match=r"pip install 'sluice\[redis\]'"):
        from_url("redis://localhost:6379/0")


async def test_sql_backend_shares_the_store_database(sqlite_url: str, clock: FakeClock) -> None:
    db = await Database.open(sqlite_url)
    config = ResourcesConfig(quotas={"warehouse": 2})
    try:
        async with QuotaManager.from_config(config, store_db=db, clock=clock) as manager:
            await manager.allocate("t1", [Claim("warehouse", units=2)], TASK)
            async with db.read() as conn:
                holders = (await conn.execute(sa.select(schema.resource_holders))).all()
                usage = (await conn.execute(sa.select(schema.resource_usage))).all()
            await manager.release("t1", ["warehouse"])
            async with db.read() as conn:
                usage_after = (await conn.execute(sa.select(schema.resource_usage))).all()
    finally:
        await db.close()

    assert [(h.namespace, h.token, h.units) for h in holders] == [("warehouse", "t1", 2)]
    assert sorted((u.project, u.domain, u.in_use) for u in usage) == [
        ("", "", 2),
        ("foo", "", 2),
        ("foo", "dev", 2),
    ]
    # SQLite keeps a stored quota's counters at zero (rewriting their index on every grant
    # and release cost a WAL frame per commit); PostgreSQL deletes them.
    assert [u for u in usage_after if u.in_use != 0] == []


async def test_a_lock_name_leaves_no_rows_once_released(sqlite_url: str, clock: FakeClock) -> None:
    db = await Database.open(sqlite_url)
    config = ResourcesConfig(quotas={"warehouse": 2})
    try:
        async with QuotaManager.from_config(config, store_db=db, clock=clock) as manager:
            lock = Claim("db/partition/7", default_quota=1)
            assert (await manager.allocate("t1", [lock], TASK)).granted
            assert not (await manager.allocate("t2", [lock], TASK)).granted
            await manager.release("t1", [lock.namespace])
            assert (await manager.allocate("t2", [lock], TASK)).granted
            await manager.release("t2", [lock.namespace])
            await manager.allocate("t3", [Claim("warehouse")], TASK)
            await manager.release("t3", ["warehouse"])
            async with db.read() as conn:
                rows = {
                    table.name: (await conn.execute(sa.select(table))).all()
                    for table in (schema.resource_usage, schema.resource_quotas)
                }
    finally:
        await db.close()

    assert {u.namespace for u in rows["resource_usage"]} == {"warehouse"}
    assert [q.namespace for q in rows["resource_quotas"]] == ["warehouse"]


async def test_clearing_a_quota_drops_its_counters_at_zero(
    sqlite_url: str, clock: FakeClock
) -> None:
    db = await Database.open(sqlite_url)
    try:
        async with QuotaManager.from_config(ResourcesConfig(), store_db=db, clock=clock) as manager:
            await manager.set_quota("ops", 2)
            await manager.allocate("t1", [Claim("ops")], TASK)
            await manager.release("t1", ["ops"])
            async with db.read() as conn:
                kept = (await conn.execute(sa.select(schema.resource_usage))).all()
            await manager.clear_quota("ops")
            async with db.read() as conn:
                after = (await conn.execute(sa.select(schema.resource_usage))).all()
    finally:
        await db.close()

    assert sorted((u.project, u.domain, u.in_use) for u in kept) == [
        ("", "", 0),
        ("foo", "", 0),
        ("foo", "dev", 0),
    ]
    assert after == []


@pytest.mark.redis
async def test_redis_keys_live_under_the_prefix_and_one_hash_tag(
    redis_server_url: str, redis_prefix: str, clock: FakeClock
) -> None:
    import redis.asyncio as aioredis

    backend = from_url(redis_server_url, key_prefix=redis_prefix)
    async with QuotaManager(backend, clock=clock, config_quotas={"w": 1}) as manager:
        await manager.allocate("t1", [Claim("w")], TASK)
        await manager.allocate("t2", [Claim("w")], TASK)
        client = aioredis.Redis.from_url(redis_server_url, decode_responses=True)
        keys = [k async for k in client.scan_iter(match=f"{redis_prefix}*")]
        await client.aclose()

    assert keys
    assert all(k.startswith(f"{redis_prefix}:{{resources}}:") for k in keys)


async def test_an_unreachable_redis_is_backend_unavailable(clock: FakeClock) -> None:
    manager = QuotaManager(from_url("redis://127.0.0.1:1/0"), clock=clock)

    with pytest.raises(BackendUnavailableError, match=r"127\.0\.0\.1:1"):
        await manager.start()
