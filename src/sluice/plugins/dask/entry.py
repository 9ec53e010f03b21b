"""The dask plugin's entry, listed by sluice.plugins.builtin."""

from __future__ import annotations

from sluice.plugins.core.context import SetupContext
from sluice.plugins.core.plugin import PluginEntry
from sluice.plugins.dask.config import parse_plugin_config
from sluice.plugins.dask.plugin import PLUGIN_ID, DaskPlugin


def _load(setup: SetupContext) -> DaskPlugin:
    return DaskPlugin(parse_plugin_config(dict(setup.config)))


ENTRY = PluginEntry(id=PLUGIN_ID, task_types=("dask",), load=_load)
"""Config section `plugins.config.dask` (DaskPluginConfig)."""
