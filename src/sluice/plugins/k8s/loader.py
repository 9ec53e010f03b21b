"""How a Kubernetes plugin becomes a registry entry: config checked, client chosen, the
plugin wrapped in a PluginManager."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.plugin import PluginEntry
from sluice.plugins.k8s.client import KubeClient, LazyKubeClient
from sluice.plugins.k8s.config import KubePluginConfig, parse_config
from sluice.plugins.k8s.manager import PluginManager
from sluice.plugins.k8s.plugin import K8sPlugin

ConfigT = TypeVar("ConfigT", bound=KubePluginConfig)


def kube_client_for(setup: SetupContext, config: KubePluginConfig) -> tuple[KubeClient, bool]:
    """The engine's client when it configured one, else a client of our own made from the
    plugin config on first use (so loading never needs a cluster). True: we own it."""
    if setup.kube_client is not None:
        return setup.kube_client, False

    async def connect() -> KubeClient:
        from sluice.plugins.k8s.kube_asyncio import connect as connect_cluster

        return await connect_cluster(config.kubeconfig, config.context, config.in_cluster)

    return LazyKubeClient(connect), True


def k8s_plugin_entry(
    plugin_id: str,
    task_types: tuple[str, ...],
    build: Callable[[SetupContext, ConfigT], K8sPlugin],
    config_model: type[ConfigT],
    *,
    is_default: bool = False,
    default_for_task_types: tuple[str, ...] = (),
) -> PluginEntry:
    """A PluginEntry whose loader checks `plugins.config.<id>` against `config_model`, builds
    the K8sPlugin and wraps it in a PluginManager. A plugin that would make its own client
    without kubernetes_asyncio installed loads as unavailable: its tasks are refused at launch
    with the install hint instead of failing, retried, at their first call."""

    def load(setup: SetupContext) -> PluginManager:
        from sluice.plugins.k8s.kube_asyncio import driver_missing

        config = parse_config(config_model, setup.plugin_id, setup.config)
        client, owned = kube_client_for(setup, config)
        plugin = build(setup, config)
        return PluginManager(
            setup.plugin_id,
            plugin,
            client,
            config,
            clock=setup.clock,
            owns_client=owned,
            unavailable=driver_missing() if owned else None,
        )

    return PluginEntry(plugin_id, task_types, load, is_default, default_for_task_types)
