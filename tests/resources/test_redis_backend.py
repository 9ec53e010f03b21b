"""What only the Redis backend does: scripts the server forgot, cancellations in the middle of
a command, and wake-ups that nobody else would hear. (The contract suites run the rules on
every backend, Redis included.)"""

from __future__ import annotations

import asyncio
import json
import random
from collections.abc import AsyncIterator
from typing import Any

import pytest

from sluice.clock import FakeClock
from sluice.resources import Claim, Holder, QuotaManager, from_url

pytestmark = pytest.mark.redis
TASK = Holder("foo", "dev", "x1", "n1")


@pytest.fixture
async def raw(redis_server_url: str) -> AsyncIterator[Any]:
    import redis.asyncio as aioredis

    client = aioredis.Redis.from_url(redis_server_url, decode_responses=True)
    yield client
    await client.aclose()


def manager_on(url: str, prefix: str, clock: FakeClock) -> QuotaManager:
    return QuotaManager(
        from_url(url, key_prefix=prefix),
        clock=clock,
        config_quotas={"warehouse": 2},
        sweep_interval=1e6,
    )


async def test_scripts_the_server_forgot_are_loaded_again(
    redis_server_url: str, redis_prefix: str, clock: FakeClock, raw: Any
) -> None:
    async with manager_on(redis_server_url, redis_prefix, clock) as manager:
        assert (await manager.allocate("t1", [Claim("warehouse")], TASK)).granted
        await raw.script_flush()  # e.g. a restarted server

        assert (await manager.allocate("t2", [Claim("warehouse")], TASK)).granted
        await manager.release("t1", ["warehouse"])
        [snapshot] = await manager.describe("warehouse")

    assert [h.token for h in snapshot.holders] == ["t2"]


async def test_a_cancellation_is_never_lost_nor_mixes_up_answers(
    redis_server_url: str, redis_prefix: str, clock: FakeClock
) -> None:
    # Cancelled at random moments, some in the middle of a command: each call either ends
    # before its cancel or raises CancelledError, and the calls that go on get their own
    # answers on the connections left.
    rng = random.Random(7)
    async with manager_on(redis_server_url, redis_prefix, clock) as manager:
        for i in range(300):
            namespace = f"lock-{i % 5}"
            call = asyncio.create_task(
                manager.allocate(f"t{i}", [Claim(namespace, default_quota=3)], TASK)
                if i % 2
                else manager.release(f"t{i - 3}", [namespace])
            )
            await asyncio.sleep(rng.random() * 0.0006)
            if call.cancel():
                with pytest.raises(asyncio.CancelledError):
                    await call
            else:
                await call
            assert (
                await manager.allocate(f"mine{i}", [Claim(f"own-{i}", default_quota=1)], TASK)
            ).granted
            [own] = await manager.describe(f"own-{i}")
            assert [h.token for h in own.holders] == [f"mine{i}"]
        snapshots = await manager.describe()

    assert all(s.in_use == sum(h.units for h in s.holders) for s in snapshots)


async def test_a_wake_up_only_this_instance_would_hear_is_not_sent(
    redis_server_url: str, redis_prefix: str, clock: FakeClock, raw: Any
) -> None:
    # A pattern subscription sees every message without counting as a listener.
    channel = f"{redis_prefix}:{{resources}}:wake"
    watcher = raw.pubsub(ignore_subscribe_messages=True)
    await watcher.psubscribe(channel)
    marker = json.dumps({"o": "test", "w": []})

    async def next_message() -> str:
        while True:
            message = await watcher.get_message(timeout=5.0)
            if message is not None:
                return str(message["data"])

    try:
        async with manager_on(redis_server_url, redis_prefix, clock) as alone:
            await alone.allocate("t1", [Claim("warehouse")], TASK)
            await alone.release("t1", ["warehouse"])
            await raw.publish(channel, marker)
            assert await next_message() == marker  # nothing was sent before it

            async with manager_on(redis_server_url, redis_prefix, clock):
                await alone.allocate("t2", [Claim("warehouse")], TASK)
                await alone.release("t2", ["warehouse"])
                woken = json.loads(await next_message())
    finally:
        await watcher.aclose()

    assert woken["w"] == [["warehouse"]]
