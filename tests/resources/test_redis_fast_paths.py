"""The Redis scripts' uncontended fast paths (the part of allocate.lua and release.lua before
their GENERAL PATH line) must leave exactly the keys the general path leaves: the same
holders, leases, counters, stored defaults and namespace list, and give the same answers.
A random workload runs on two backends side by side, one with the scripts as shipped and
one with their fast paths cut off, and the two key spaces are compared after every step."""

from __future__ import annotations

import json
import random
from typing import Any

import pytest

from sluice.resources import Claim, Holder, ResourceConstraintsSpec
from sluice.resources.backends import redis as redis_backend
from sluice.resources.backends.base import AllocationRequest
from sluice.resources.backends.redis import RedisBackend

pytestmark = pytest.mark.redis
LEASE = 30.0


def general_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Makes the backends opened after it run every operation through the general path."""
    original = redis_backend._lua

    def lua(name: str) -> str:
        text = original(name)
        if name in ("allocate", "release"):
            return text[text.index(redis_backend._GENERAL) :]
        return text

    monkeypatch.setattr(redis_backend, "_lua", lua)


async def key_space(client: Any, prefix: str) -> dict[str, Any]:
    """Every key under `prefix`, by name relative to it, with its decoded value."""
    state: dict[str, Any] = {}
    async for key in client.scan_iter(match=f"{prefix}:*"):
        kind, name = await client.type(key), key[len(prefix) :]
        if kind == "hash":
            fields = await client.hgetall(key)
            if ":holders:" in name or ":waiters:" in name:
                fields = {k: json.loads(v) for k, v in fields.items()}
            state[name] = fields
        elif kind == "zset":
            state[name] = await client.zrange(key, 0, -1, withscores=True)
        elif kind == "set":
            state[name] = sorted(await client.smembers(key))
    return state


def random_claims(rng: random.Random) -> tuple[Claim, ...]:
    claims = []
    for namespace in rng.sample(["a", "b", "lock"], rng.choice([1, 1, 2])):
        if namespace == "lock":
            claims.append(Claim("lock", units=1, default_quota=1))
            continue
        caps = None
        if rng.random() < 0.4:
            caps = ResourceConstraintsSpec(
                project_scope=rng.choice([None, 2, 3]), namespace_scope=rng.choice([None, 1, 2])
            )
        default = rng.choice([None, None, 4])
        claims.append(
            Claim(namespace, units=rng.choice([1, 1, 2]), constraints=caps, default_quota=default)
        )
    return tuple(claims)


@pytest.mark.parametrize("seed", range(6))
async def test_the_fast_paths_leave_what_the_general_path_leaves(
    redis_server_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    import redis.asyncio as aioredis

    fast = RedisBackend(redis_server_url, key_prefix=f"{redis_prefix}-f")
    await fast.open()
    general_only(monkeypatch)
    general = RedisBackend(redis_server_url, key_prefix=f"{redis_prefix}-g")
    await general.open()
    client = aioredis.Redis.from_url(redis_server_url, decode_responses=True)
    answered_fast: list[str] = []
    run = fast._run

    async def spy(script: str, *args: str) -> Any:
        answer = await run(script, *args)
        if isinstance(answer, list):
            answered_fast.append(script)
        return answer

    monkeypatch.setattr(fast, "_run", spy)
    rng = random.Random(seed)
    now, held = 1_000.0, set[str]()
    try:
        for backend in (fast, general):
            await backend.set_quotas("config", {"a": 3, "b": 2}, now)
        for _ in range(120):
            now += rng.choice([0.5, 1.0, 1.0, LEASE + 1])  # sometimes every lease lapses
            token = f"t{rng.randrange(6)}"
            if token in held and rng.random() < 0.6:
                namespaces = rng.sample(["a", "b", "lock"], rng.choice([1, 2, 3]))
                answers = [await b.release(token, namespaces, now) for b in (fast, general)]
                held.discard(token)
            else:
                holder = Holder(rng.choice(["p1", "p2"]), rng.choice(["dev", "prod"]), "e", "n")
                request = AllocationRequest(token, random_claims(rng), holder, now, LEASE)
                answers = [await b.allocate(request) for b in (fast, general)]  # type: ignore[misc]
                if answers[0].result.granted:
                    held.add(token)
            assert answers[0] == answers[1]
            assert await key_space(client, f"{redis_prefix}-f") == await key_space(
                client, f"{redis_prefix}-g"
            )
    finally:
        await fast.close()
        await general.close()
        await client.aclose()
    assert "allocate" in answered_fast and "release" in answered_fast


PACKED = [
    ("EVALSHA", "a" * 40, 0, "s:{resources}", "1000.25", "é", b"\x00\r\n", "", -12),
    ("PING",),
    ("SCRIPT LOAD", "return 1"),  # a command name with a space: redis-py splits it
    ("SET", "k", 1.5),  # floats: redis-py's repr
    ("SET", "k", memoryview(b"v")),
]


@pytest.mark.parametrize("pure_python", [False, True])
def test_fast_packing_gives_redis_py_bytes(
    monkeypatch: pytest.MonkeyPatch, pure_python: bool
) -> None:
    from redis.asyncio.connection import Connection

    if pure_python:
        monkeypatch.setitem(__import__("sys").modules, "hiredis", None)
        monkeypatch.setattr(redis_backend, "_PACK", redis_backend._fast_packer())
    fast, plain = redis_backend._with_fast_packing(Connection)(), Connection()
    for args in PACKED:
        assert b"".join(fast.pack_command(*args)) == b"".join(plain.pack_command(*args))
    with pytest.raises(Exception, match="bool"):
        fast.pack_command("SET", "k", True)


async def test_a_command_that_hangs_is_bounded_by_the_urls_socket_timeout(
    redis_server_url: str, redis_prefix: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py's socket timeout is left unset on our client; `_run` bounds each script
    itself (with the URL's socket_timeout, else redis-py's default of 5 s)."""
    import asyncio
    import time

    from sluice.errors import BackendUnavailableError

    backend = RedisBackend(f"{redis_server_url}?socket_timeout=0.2", key_prefix=redis_prefix)
    await backend.open()
    try:
        assert backend._timeout() == 0.2

        async def hang(*args: Any) -> Any:
            await asyncio.sleep(60)

        monkeypatch.setattr(backend, "_evalsha", hang)
        started = time.monotonic()
        with pytest.raises(BackendUnavailableError):
            await backend.sweep(1_000.0)
        assert time.monotonic() - started < 5
    finally:
        await backend.close()
    default = RedisBackend(redis_server_url, key_prefix=redis_prefix)
    await default.open()
    try:
        assert default._timeout() == redis_backend._TIMEOUT
    finally:
        await default.close()


async def test_a_kept_connection_the_server_closed_is_replaced_and_the_script_runs_once(
    redis_server_url: str, redis_prefix: str
) -> None:
    """`_evalsha` keeps its connections between scripts; one the server dropped meanwhile
    fails on its next use, goes back to the pool, and the script runs again through
    redis-py (once: the dropped connection never delivered it)."""
    import redis.asyncio as aioredis

    backend = RedisBackend(redis_server_url, key_prefix=redis_prefix)
    await backend.open()
    raw = aioredis.Redis.from_url(redis_server_url, decode_responses=True)
    try:
        for quota in (2, 3):  # the first may load the script (NOSCRIPT: no keeping)
            await backend.set_quotas("config", {"a": quota}, 1_000.0)
        [kept] = backend._idle
        host, port = kept._writer.get_extra_info("sockname")[:2]
        assert await raw.client_kill(f"{host}:{port}")
        await raw.script_flush()  # as after a restart: the scripts must be loaded again too
        holder = Holder("p", "dev", "e", "n")
        request = AllocationRequest("t", (Claim("a", units=1),), holder, 1_001.0, LEASE)
        outcome = await backend.allocate(request)
        assert backend._idle == []  # it failed, went back to the pool, redis-py ran it again
        assert outcome.result.granted
        assert [u.in_use for u in outcome.usage] == [1]
        assert (await backend.snapshot("a", 1_002.0))[0].in_use == 1
    finally:
        await backend.close()
        await raw.aclose()


async def test_kept_connections_are_not_reused_after_a_fork(
    redis_server_url: str, redis_prefix: str
) -> None:
    backend = RedisBackend(redis_server_url, key_prefix=redis_prefix)
    await backend.open()
    try:
        for now in (1_000.0, 1_000.5):  # the first may load the script (NOSCRIPT: no keeping)
            await backend.sweep(now)
        [parents] = backend._idle
        backend._idle_pid = -1  # as a forked child sees it
        await backend.sweep(1_001.0)
        assert parents not in backend._idle  # the child took its own from the pool
        await parents.disconnect()
    finally:
        await backend.close()
