"""What is specific to one backend: idle keys leave Redis by their TTL and the SQL tables by
the sweep (bounded key cardinality), and a URL picks the backend."""

from __future__ import annotations

import pytest

from sluice.clock import FakeClock
from sluice.errors import ConfigError
from sluice.resources.backends.ratelimit_memory import MemoryRateLimits
from sluice.resources.backends.ratelimit_redis import RedisRateLimits
from sluice.resources.backends.ratelimit_sql import SqlRateLimits
from sluice.resources.ratelimit import RateClaim, RateLimitRule, RateLimits, from_url


def test_a_url_picks_the_backend() -> None:
    assert isinstance(from_url("memory://"), MemoryRateLimits)
    assert isinstance(from_url("sqlite:///x.db"), SqlRateLimits)
    assert isinstance(from_url("postgresql://h/db"), SqlRateLimits)
    assert isinstance(from_url("redis://h:6379/0"), RedisRateLimits)
    with pytest.raises(ConfigError, match="'mysql'"):
        from_url("mysql://h/db")


@pytest.mark.redis
async def test_every_key_of_a_limit_expires_in_redis(
    redis_server_url: str, redis_prefix: str
) -> None:
    import redis.asyncio as aioredis

    limits = RateLimits(
        RedisRateLimits(redis_server_url, key_prefix=redis_prefix),
        config_rules={"api": RateLimitRule.parse("100/s")},
        remember=0,
    )
    client = aioredis.Redis.from_url(redis_server_url, decode_responses=True)
    async with limits:
        for n in range(20):
            await limits.admit([RateClaim("api", f"customer-{n}")], f"t{n}")
            await limits.admit([RateClaim("api", f"customer-{n}")], f"w{n}")  # one waiter each
        base = f"{redis_prefix}:{{ratelimits}}"
        permanent = {f"{base}:rules:api", f"{base}:names", f"{base}:active"}
        keys = {k async for k in client.scan_iter(match=f"{redis_prefix}*")}
        assert permanent <= keys
        per_key = keys - permanent
        # tat, line, wait, wexp for each of the 20 keys, and the limit's key index
        assert len(per_key) == 20 * 4 + 1
        for key in per_key:
            # the key is idle 10 ms after its admission (100/s); its waiter's place lasts until
            # its slot plus the grace (10 s); then a second more
            ttl = await client.pttl(key)
            assert 0 < ttl <= (0.01 + 10.0) * 1000 + 1000, (key, ttl)
    await client.aclose()


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def sql_url(request: pytest.FixtureRequest) -> str:
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    request.getfixturevalue("pg_upgraded_url")
    return str(request.getfixturevalue("pg_url"))


async def test_the_sweep_drops_idle_keys_and_lapsed_tickets_from_the_tables(sql_url: str) -> None:
    url = sql_url
    clock = FakeClock()
    sql = SqlRateLimits(url=url)
    limits = RateLimits(
        sql, clock=clock, config_rules={"api": RateLimitRule.parse("60/min")}, remember=30.0
    )
    async with limits:
        for n in range(30):
            await limits.admit([RateClaim("api", f"customer-{n}")], f"t{n}")
        assert await _count(sql, "rate_limit_state") == 30
        assert await _count(sql, "rate_limit_tickets") == 30  # remembered grants
        clock.advance(2.0)  # every key idle; grants still remembered
        assert await limits.sweep() == 30
        assert await _count(sql, "rate_limit_state") == 0
        clock.advance(30.0)
        assert await limits.sweep() == 30
        assert await _count(sql, "rate_limit_tickets") == 0


async def _count(sql: SqlRateLimits, table: str) -> int:
    import sqlalchemy as sa

    async with sql.db.read() as conn:
        return int((await conn.execute(sa.text(f"SELECT count(*) FROM {table}"))).scalar_one())
