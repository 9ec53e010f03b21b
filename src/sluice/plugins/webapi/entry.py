"""Loading a web-API plugin: its config checked, its quotas registered, wrapped in an adapter."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from sluice.errors import InvalidPluginConfigError, PluginError
from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.plugin import Plugin, PluginEntry
from sluice.plugins.webapi.adapter import AsyncPluginAdapter
from sluice.plugins.webapi.config import MACHINERY_KEYS, PluginConfig
from sluice.plugins.webapi.interfaces import AsyncPlugin, SyncPlugin
from sluice.plugins.webapi.metrics import WebApiMetrics
from sluice.plugins.webapi.sync import SyncPluginAdapter

WebApiPlugin = AsyncPlugin | SyncPlugin
WebApiLoader = Callable[[SetupContext], "WebApiPlugin | Awaitable[WebApiPlugin]"]


def webapi_entry(
    id: str,
    task_types: Iterable[str],
    loader: WebApiLoader,
    *,
    is_default: bool = False,
    default_for_task_types: Iterable[str] = (),
    plugin_config_keys: Iterable[str] = (),
) -> PluginEntry:
    """A PluginEntry whose loader builds the web-API plugin and wraps it in its adapter.

    `plugin_config_keys` are the keys of the plugin's config section that the plugin itself
    reads (from `SetupContext.config`); any other key not known to the machinery is an error.
    """
    own_keys = frozenset(plugin_config_keys)

    async def load(setup: SetupContext) -> Plugin:
        return await load_webapi_plugin(setup, loader, own_keys)

    return PluginEntry(id, tuple(task_types), load, is_default, tuple(default_for_task_types))


async def load_webapi_plugin(
    setup: SetupContext, loader: WebApiLoader, plugin_config_keys: frozenset[str] = frozenset()
) -> AsyncPluginAdapter | SyncPluginAdapter:
    """Check the config section, build the plugin, register its quotas, wrap it."""
    section = f"plugins.config.{setup.plugin_id}"
    overrides = _machinery_section(section, setup.config, plugin_config_keys)
    plugin = await _build(section, setup, loader)
    try:
        config = plugin.config.with_overrides(overrides)
    except InvalidPluginConfigError as exc:
        raise InvalidPluginConfigError(f"{section}: {exc}") from None
    for namespace, quota in config.resource_quotas.items():
        setup.registrar.register_resource_quota(namespace, quota)
    metrics = WebApiMetrics(setup.metrics, setup.plugin_id)
    shared = setup.rate_limits  # the engine's: read and write limits hold across engines
    if isinstance(plugin, AsyncPlugin):
        return AsyncPluginAdapter(setup.plugin_id, plugin, config, metrics, setup.clock, shared)
    return SyncPluginAdapter(setup.plugin_id, plugin, config, metrics, setup.clock, shared)


def _machinery_section(
    section: str, config: Mapping[str, Any], plugin_keys: frozenset[str]
) -> dict[str, Any]:
    unknown = sorted(set(config) - MACHINERY_KEYS - plugin_keys)
    if unknown:
        expected = sorted(MACHINERY_KEYS | plugin_keys)
        raise InvalidPluginConfigError(
            f"unknown config key {section}.{unknown[0]}; expected one of {expected}"
        )
    return {key: value for key, value in config.items() if key in MACHINERY_KEYS}


async def _build(section: str, setup: SetupContext, loader: WebApiLoader) -> WebApiPlugin:
    try:
        built = loader(setup)
        plugin = await built if inspect.isawaitable(built) else built
    except InvalidPluginConfigError as exc:
        raise InvalidPluginConfigError(f"{section}: {exc}") from None
    if not isinstance(plugin, AsyncPlugin | SyncPlugin) or not isinstance(
        getattr(plugin, "config", None), PluginConfig
    ):
        raise PluginError(
            f"plugin {setup.plugin_id!r}: the loader returned {plugin!r}, which is neither an "
            "AsyncPlugin nor a SyncPlugin with a PluginConfig"
        )
    return plugin
