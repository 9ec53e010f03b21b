"""Fixtures of the Kubernetes plugin tests: an in-memory API, a clock whose sleeps return at
once (and are recorded), container tasks, and PluginManagers closed after each test."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from tests.plugins.k8s.helpers import InstantClock, task_context

from sluice.plugins.builtin.pod import PodPlugin
from sluice.plugins.k8s import KubePluginConfig, PluginManager
from sluice.plugins.k8s.plugin import K8sPlugin
from sluice.plugins.k8s.testing import FakeKubeClient
from sluice.plugins.testing import FakeTaskContext
from sluice.spec.models import TaskSpec


@pytest.fixture
def clock() -> InstantClock:
    return InstantClock()


@pytest.fixture
def kube(clock: InstantClock) -> FakeKubeClient:
    return FakeKubeClient(clock)


@pytest.fixture
def make_ctx(clock: InstantClock) -> Callable[..., FakeTaskContext]:
    def make(task: TaskSpec | None = None, **metadata: Any) -> FakeTaskContext:
        return task_context(clock, task, **metadata)

    return make


ManagerFactory = Callable[..., PluginManager]


@pytest.fixture
async def make_manager(kube: FakeKubeClient, clock: InstantClock) -> AsyncIterator[ManagerFactory]:
    """PluginManagers over the fake API (a PodPlugin unless told), closed after the test."""
    made: list[PluginManager] = []

    def make(plugin: K8sPlugin | None = None, **config: Any) -> PluginManager:
        manager = PluginManager(
            "pod",
            plugin or PodPlugin(),
            kube,
            KubePluginConfig(**config),
            clock=clock,
            rng=random.Random(7),
        )
        made.append(manager)
        return manager

    yield make
    for manager in made:
        await manager.close()
