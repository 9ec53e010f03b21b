"""The ray plugin's entry, listed by sluice.plugins.builtin."""

from __future__ import annotations

from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.plugin import PluginEntry
from sluice.plugins.ray.config import parse_plugin_config
from sluice.plugins.ray.plugin import PLUGIN_ID, RayPlugin


def _load(setup: SetupContext) -> RayPlugin:
    return RayPlugin(parse_plugin_config(dict(setup.config)))


ENTRY = PluginEntry(id=PLUGIN_ID, task_types=("ray",), load=_load)
"""Config section `plugins.config.ray` (RayPluginConfig)."""
