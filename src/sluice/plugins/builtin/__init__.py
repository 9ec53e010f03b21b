"""Plugins shipped with sluice, listed explicitly (no import-time registration).

Imports happen inside `builtin_entries` so that the worker process, which lives in this
package, starts without loading every plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sluice.plugins.core.plugin import PluginEntry


def builtin_entries() -> list[PluginEntry]:
    from sluice.plugins.builtin import flyte, flyte_agent, http_job, pod, python, shell
    from sluice.plugins.dask import entry as dask
    from sluice.plugins.ray import entry as ray

    return [
        python.ENTRY,
        shell.ENTRY,
        http_job.ENTRY,
        pod.ENTRY,
        ray.ENTRY,
        dask.ENTRY,
        flyte.ENTRY,
        flyte_agent.ENTRY,
        flyte_agent.SYNC_ENTRY,
    ]
