"""The `flyte` plugin: runs flytekit `python-task` templates through flytekit's own entrypoint.

It is the `python` plugin's pool with another job: each worker imports flytekit once (at its
first flyte task) and runs every task in process (flyte_exec), so a task costs milliseconds,
not the seconds of a fresh `pyflyte-execute`. Raw outputs (files, directories, datasets) are
written under the store's data directory (`<data_dir>/<hash of the attempt>/raw`).

A task's `custom` is {"template": <flyteidl TaskTemplate as JSON>, "source_root": <directory
its modules import from>}. Flytekit reports a task's exception in `error.pb` rather than by
failing: a RECOVERABLE error is retryable (the task's retries apply), a NON_RECOVERABLE one
(any exception but FlyteRecoverableException, as in Flyte) fails the task at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sluice.errors import InvalidPluginConfigError, PluginError
from sluice.fencing import LeaseFence
from sluice.plugins.builtin.pool import Job
from sluice.plugins.builtin.python import PythonPlugin, with_stderr_tail
from sluice.plugins.core.context import SetupContext, TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, PhaseInfo
from sluice.plugins.core.plugin import PluginEntry
from sluice.spec.models import TaskSpec

PLUGIN_ID = "flyte"
TASK_TYPES = ("python-task",)
INSTALL_HINT = "pip install 'sluice[flyte]'"


class FlytePlugin(PythonPlugin):
    def __init__(
        self,
        workers: int,
        instance: str,
        data_dir: str,
        now: Callable[[], float] | None = None,
        fence: LeaseFence | None = None,
    ) -> None:
        super().__init__(workers, instance, now, fence)
        self._data_dir = data_dir

    @property
    def id(self) -> str:
        return PLUGIN_ID

    @property
    def unavailable(self) -> str | None:
        """Why flytekit tasks cannot run here: flytekit is not installed."""
        import importlib.util

        if importlib.util.find_spec("flytekit") is None:
            return f"flytekit is not installed ({INSTALL_HINT})"
        return None

    async def warm_up(self) -> None:
        """Nothing: an engine that runs no flytekit task starts no flyte worker (the first
        flyte task starts them)."""

    def validate_task(self, task: TaskSpec) -> None:
        template = task.custom.get("template")
        if not isinstance(template, dict) or "container" not in template:
            raise InvalidPluginConfigError(
                f"task {task.name!r}: custom.template must be a flytekit task template with a "
                f"container (a python-task), got {str(template)[:80]!r}"
            )

    def payload(self, ctx: TaskExecutionContext) -> dict[str, Any] | PhaseInfo:
        custom = ctx.task.custom
        return {
            "runner": "flyte",
            "template": custom["template"],
            "source_root": custom.get("source_root", ""),
            "module_file": custom.get("module_file", ""),
            "work_dir": self._data_dir,
            "inputs": dict(ctx.inputs),
            "dynamic_builder": custom.get("dynamic_builder", ""),
            "node_key": ctx.metadata.unique_node_id,  # checkpoints are the node's, not the try's
            "attempt": ctx.metadata.attempt,
        }

    def failure(self, failure: dict[str, Any], job: Job) -> PhaseInfo:
        if "recoverable" not in failure:  # raised by sluice's runner, not reported by flytekit
            return super().failure(failure, job)
        kind = ErrorKind.USER if failure.get("user") else ErrorKind.SYSTEM
        message = with_stderr_tail(job, failure["message"].rstrip())
        if failure["recoverable"]:
            return PhaseInfo.retryable_failure(failure["type"], message, kind)
        return PhaseInfo.permanent_failure(failure["type"], message, kind)


def _load(ctx: SetupContext) -> FlytePlugin:
    workers = ctx.config.get("workers", 2)
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise PluginError(f"plugin 'flyte': workers must be an int >= 1, got {workers!r}")
    data_dir = ctx.config.get("data_dir", ".sluice/flyte")
    if not isinstance(data_dir, str) or not data_dir:
        raise PluginError(f"plugin 'flyte': data_dir must be a directory path, got {data_dir!r}")
    instance = str(ctx.config.get("instance", ""))
    return FlytePlugin(workers, instance, data_dir, ctx.clock.now, ctx.fence)


ENTRY = PluginEntry(id=PLUGIN_ID, task_types=TASK_TYPES, load=_load)
