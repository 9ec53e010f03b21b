"""Idempotency keys: a retry returns the execution the key created, a different request with
the key is a conflict naming it, the key expires after its retention; concurrent creates
from several real processes create one execution per key; a SIGKILL between the key's write
and the execution's leaves neither."""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from concurrency.cc_support import load_flows, open_runtime, read_until, register, spawn
from sluice.clock import FakeClock
from sluice.config import load_config
from sluice.errors import ConflictError, InvalidArgumentError
from sluice.runtime import Runtime
from sluice.service import Sluice
from sluice.store import schema
from sluice.store.idempotency import IdempotencyRepository

flows = load_flows()


async def executions_count(rt: Runtime) -> int:
    async with rt.store.read() as repos:
        count = await repos.conn.execute(sa.select(sa.func.count()).select_from(schema.executions))
        return int(count.scalar_one())


async def test_a_retry_gets_the_same_execution_and_another_request_a_conflict(
    store_url: str,
) -> None:
    async with open_runtime(store_url) as rt:
        await register(rt, flows.roomy)
        service = Sluice(rt)
        first = await service.create_launched("roomy", {"tag": "a"}, idempotency_key="order-17")
        again = await service.create_launched("roomy", {"tag": "a"}, idempotency_key="order-17")
        assert (first.replayed, again.replayed) == (False, True)
        assert again.execution.id == first.execution.id
        assert await executions_count(rt) == 1
        with pytest.raises(ConflictError, match="idempotency key 'order-17'"):
            await service.create_launched("roomy", {"tag": "b"}, idempotency_key="order-17")
        other = await service.create("roomy", {"tag": "b"}, idempotency_key="order-18")
        plain = await service.create("roomy", {"tag": "a"})
        elsewhere = await rt.launch(  # keys are per project
            flows.roomy, {"tag": "a"}, project="other", idempotency_key="order-17"
        )
        assert len({first.execution.id, other.id, plain.id, elsewhere.id}) == 4
        assert await executions_count(rt) == 4
        with pytest.raises(InvalidArgumentError, match="idempotency key"):
            await service.create("roomy", {}, idempotency_key="x" * 256)


async def test_a_key_is_free_again_after_its_retention(sqlite_url: str) -> None:
    clock = FakeClock()
    settings = load_config(database_url=sqlite_url, concurrency={"idempotency_retention": 60.0})
    rt = await Runtime.open(settings, clock=clock)
    try:
        first = await rt.launch(flows.napping, {"tag": "x"}, idempotency_key="k")
        clock.advance(59.0)
        assert (await rt.launch(flows.napping, {"tag": "x"}, idempotency_key="k")).id == first.id
        clock.advance(2.0)
        later = await rt.launch(flows.napping, {"tag": "y"}, idempotency_key="k")
        async with rt.store.read() as repos:
            held = await IdempotencyRepository(repos.conn).get("default", "k")
    finally:
        await rt.close()
    assert later.id != first.id, "an expired key creates a new execution, for any request"
    assert held is not None and held.execution_id == later.id


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[str]]]:
    started: list[subprocess.Popen[str]] = []
    yield started
    for proc in started:
        if proc.stdin is not None and proc.poll() is None:
            proc.stdin.close()
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def creators(
    url: str, count: int, processes: list[subprocess.Popen[str]], crash: str = ""
) -> list[subprocess.Popen[str]]:
    made = [spawn("once", url, *([crash] if crash else [])) for _ in range(count)]
    processes.extend(made)
    for proc in made:
        read_until(proc, "ready")
    return made


KEYS = [f"retry-{i}" for i in range(8)]


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)]
)
async def test_concurrent_creates_with_one_key_from_several_processes_make_one_execution(
    backend: str, request: pytest.FixtureRequest, processes: list[subprocess.Popen[str]]
) -> None:
    url = str(request.getfixturevalue("sqlite_url" if backend == "sqlite" else "pg_url"))
    async with open_runtime(url) as rt:
        racing = creators(url, 4, processes)
        for proc in racing:  # every process asks for every key, at the same moment
            assert proc.stdin is not None
            proc.stdin.write(" ".join(KEYS) + "\n")
            proc.stdin.flush()
        seen = await asyncio.gather(*(asyncio.to_thread(read_until, p, "done") for p in racing))
        assert await executions_count(rt) == len(KEYS)
    assert all(ids == seen[0] for ids in seen), "every process got the key's one execution"
    assert len(set(seen[0])) == len(KEYS)


async def test_a_sigkill_between_the_key_and_the_execution_leaves_neither(
    sqlite_url: str, processes: list[subprocess.Popen[str]]
) -> None:
    async with open_runtime(sqlite_url) as rt:
        (crashing,) = creators(sqlite_url, 1, processes, "launch.after_idempotency_key:2")
        assert crashing.stdin is not None
        crashing.stdin.write("kept lost\n")  # the first key's create commits, the second dies
        crashing.stdin.flush()
        assert await asyncio.to_thread(crashing.wait, 60) == -signal.SIGKILL
        async with rt.store.read() as repos:
            keys = IdempotencyRepository(repos.conn)
            kept, lost = await keys.get("default", "kept"), await keys.get("default", "lost")
            assert kept is not None and await repos.executions.get(kept.execution_id)
        assert lost is None
        assert await executions_count(rt) == 1, "the killed create wrote no execution"
        retried = await rt.launch(flows.napping, {"tag": "once"}, idempotency_key="lost")
        assert await executions_count(rt) == 2
        assert (await rt.launch(flows.napping, {"tag": "once"}, idempotency_key="lost")).id == (
            retried.id
        )
