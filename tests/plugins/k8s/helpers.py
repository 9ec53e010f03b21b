"""Helpers of the Kubernetes plugin tests: a clock whose sleeps return at once (and are
recorded), container task specs, task contexts, and small readers of the fake API."""

from __future__ import annotations

import asyncio
from typing import Any

from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.core.phase import PhaseInfo
from sluice.plugins.k8s import ObjectRef, PluginManager
from sluice.plugins.k8s.testing import FakeKubeClient
from sluice.plugins.testing import FakeTaskContext
from sluice.spec.models import TaskSpec


class InstantClock:
    """Time moves only by the sleeps taken, which return at once and are recorded."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.current = start
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.current

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.current += max(0.0, seconds)
        await asyncio.sleep(0)


def container_task(**custom: Any) -> TaskSpec:
    values = {"image": "busybox:1.36", "command": ["sh", "-c", "echo hi"], **custom}
    return TaskSpec(name="train", version="1", type="container", custom=values)


def task_context(
    clock: InstantClock, task: TaskSpec | None = None, **metadata: Any
) -> FakeTaskContext:
    values: dict[str, Any] = {
        "execution_id": "xabc123",
        "project": "flights",
        "domain": "dev",
        "node_id": "n0",
        "attempt": 0,
        "task_name": "train",
        **metadata,
    }
    return FakeTaskContext(
        task=task or container_task(), metadata=TaskExecutionMetadata(**values), clock=clock
    )


def the_pod_ref(kube: FakeKubeClient) -> ObjectRef:
    (ref,) = [ref for ref in kube.objects if ref.kind == "Pod"]
    return ref


def calls(kube: FakeKubeClient, operation: str) -> int:
    return sum(1 for op, _ in kube.calls if op == operation)


async def phase(manager: PluginManager, ctx: Any) -> PhaseInfo:
    return (await manager.handle(ctx)).info
