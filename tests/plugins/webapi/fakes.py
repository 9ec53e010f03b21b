"""Test doubles for the web-API tests: a scripted remote plugin, a quota manager, contexts."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from sluice.clock import FakeClock
from sluice.errors import UnknownNamespaceError
from sluice.plugins.core.context import SetupContext, TaskExecutionContext, TaskExecutionMetadata
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.core.plugin import Plugin, PluginEntry
from sluice.plugins.testing import FakeTaskContext, setup_context
from sluice.plugins.webapi import (
    AsyncPluginAdapter,
    DeleteContext,
    GetContext,
    PluginConfig,
    ResourceMeta,
    StatusContext,
    webapi_entry,
)
from sluice.resources.models import AllocationStatus, ResourceConstraintsSpec
from sluice.spec.models import TaskSpec


@dataclass
class ScriptedRemote:
    """An AsyncPlugin over an in-memory "service": jobs are dicts the test edits."""

    config: PluginConfig = field(default_factory=PluginConfig)
    namespace: str = "default"
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    created: int = 0
    gets: int = 0
    deletes: list[str] = field(default_factory=list)
    create_error: BaseException | None = None
    get_error: Callable[[], BaseException | None] = lambda: None
    return_resource: bool = False

    async def resource_requirements(
        self, ctx: TaskExecutionContext
    ) -> tuple[str, ResourceConstraintsSpec | None]:
        return self.namespace, None

    async def create(self, ctx: TaskExecutionContext) -> tuple[ResourceMeta, Any]:
        if self.create_error is not None:
            raise self.create_error
        self.created += 1
        job_id = f"job-{self.created}"
        self.jobs[job_id] = {"state": "running"}
        return {"job": job_id}, dict(self.jobs[job_id]) if self.return_resource else None

    async def get(self, ctx: GetContext) -> Any:
        self.gets += 1
        error = self.get_error()
        if error is not None:
            raise error
        return dict(self.jobs[ctx.resource_meta["job"]])

    async def delete(self, ctx: DeleteContext) -> None:
        self.deletes.append(ctx.resource_meta["job"])

    async def status(self, ctx: StatusContext) -> PhaseInfo:
        state = ctx.resource["state"]
        if state == "done":
            ctx.task.outputs.put({"out": ctx.resource.get("out")})
            return PhaseInfo.success()
        if state == "failed":
            return PhaseInfo.permanent_failure("Failed", "it failed")
        return PhaseInfo.running(0, state)


@dataclass
class FakeQuota:
    """A ResourceManager over one in-memory counter per namespace, FIFO among waiters."""

    quotas: dict[str, int]
    holders: dict[str, set[str]] = field(default_factory=dict)
    waiters: dict[str, list[str]] = field(default_factory=dict)
    force: AllocationStatus | None = None
    """When set, every allocation answers this (to script NAMESPACE_QUOTA_EXCEEDED)."""
    max_held: int = 0
    released: list[str] = field(default_factory=list)

    async def allocate_resource(
        self,
        namespace: str,
        token: str,
        constraints: ResourceConstraintsSpec | None = None,
        units: int = 1,
    ) -> AllocationStatus:
        if namespace not in self.quotas:
            raise UnknownNamespaceError(f"resource namespace {namespace!r} has no quota")
        held = self.holders.setdefault(namespace, set())
        queue = self.waiters.setdefault(namespace, [])
        if token in held:
            return AllocationStatus.GRANTED
        if self.force is not None:
            return self.force
        if len(held) < self.quotas[namespace] and (not queue or queue[0] == token):
            held.add(token)
            if token in queue:
                queue.remove(token)
            self.max_held = max(self.max_held, len(held))
            return AllocationStatus.GRANTED
        if token not in queue:
            queue.append(token)
        return AllocationStatus.EXHAUSTED

    async def release_resource(self, namespace: str, token: str) -> None:
        self.holders.get(namespace, set()).discard(token)
        if token in self.waiters.get(namespace, []):
            self.waiters[namespace].remove(token)
        self.released.append(token)

    async def explain(self, namespace: str, token: str) -> str:
        held = self.holders.get(namespace, set())
        if token in held:
            return ""
        queue = self.waiters.get(namespace, [])
        position = queue.index(token) + 1 if token in queue else 0
        return (
            f"waiting for {namespace}: {len(held)}/{self.quotas[namespace]} in use, "
            f"position {position}"
        )


def task_context(
    name: str = "t",
    *,
    custom: dict[str, Any] | None = None,
    inputs: dict[str, Any] | None = None,
    quota: Any = None,
    clock: FakeClock | None = None,
    task_type: str = "scripted",
) -> FakeTaskContext:
    spec = TaskSpec(name="t", version="1", type=task_type, custom=custom or {})
    meta = TaskExecutionMetadata(
        execution_id=f"x{name}", project="p", domain="d", node_id="n0", attempt=0, task_name="t"
    )
    ctx = FakeTaskContext(spec, inputs or {}, meta)
    if quota is not None:
        ctx.resource_manager = quota
    if clock is not None:
        ctx.clock = clock
    return ctx


async def eventually(condition: Callable[[], bool], what: str, within: float = 5.0) -> None:
    """Wait (real time, generously) for `condition`; fail naming `what` if it never holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.002)


async def tick_until(
    clock: FakeClock, step: float, condition: Callable[[], bool], what: str, within: float = 5.0
) -> None:
    """Advance the fake clock by `step` repeatedly until `condition` holds."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        clock.advance(step)
        for _ in range(20):
            await asyncio.sleep(0)
            if condition():
                return
        await asyncio.sleep(0.002)


async def settle() -> None:
    """Let every ready task run (no real waiting)."""
    for _ in range(50):
        await asyncio.sleep(0)


RESYNC = 30.0


async def load_entry(entry: PluginEntry, setup: SetupContext) -> Plugin:
    """What the registry does: call the loader, awaiting it if it is async."""
    loaded = entry.load(setup)
    return await loaded if inspect.isawaitable(loaded) else loaded


async def load(
    remote: ScriptedRemote, clock: FakeClock, config: dict[str, Any] | None = None
) -> AsyncPluginAdapter:
    entry = webapi_entry("remote", ("scripted",), lambda setup: remote)
    setup, _ = setup_context("remote", config, clock)
    plugin = await load_entry(entry, setup)
    assert isinstance(plugin, AsyncPluginAdapter)
    return plugin


async def step(plugin: AsyncPluginAdapter, ctx: FakeTaskContext) -> PhaseInfo:
    return (await plugin.handle(ctx)).info


def metric(plugin: AsyncPluginAdapter, name: str, **labels: str) -> float:
    found = plugin.metrics.registry.get_sample_value(f"{plugin.metrics.prefix}_{name}", labels)
    return float(found or 0.0)


def same(a: PhaseInfo, b: PhaseInfo) -> bool:
    """Equal as the engine sees them: one event, not two."""
    return (a.phase, a.version, a.reason, a.error) == (b.phase, b.version, b.reason, b.error)
