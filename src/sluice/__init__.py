"""sluice: a workflow engine whose concurrency control is correct under any load and crash.

The public API is exactly `__all__`; a test keeps it that way. Its names are imported on
first use, so `sluice --help` and other commands that never define a task start fast.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sluice.errors import SluiceError
    from sluice.sdk.dynamic import DynamicDef, dynamic
    from sluice.sdk.launch_plan import LaunchPlan
    from sluice.sdk.map import MapTask, map
    from sluice.sdk.task import Cache, Locks, TaskDef, task
    from sluice.sdk.workflow import WorkflowDef, workflow
    from sluice.spec.models import (
        ConcurrencyBehavior,
        ConcurrencyPolicy,
        Quota,
        RateLimit,
        Schedule,
    )
    from sluice.spec.types import Directory, File

__version__ = "0.1.0"

_LAZY = {
    "SluiceError": "sluice.errors",
    "LaunchPlan": "sluice.sdk.launch_plan",
    "DynamicDef": "sluice.sdk.dynamic",
    "dynamic": "sluice.sdk.dynamic",
    "MapTask": "sluice.sdk.map",
    "map": "sluice.sdk.map",
    "Cache": "sluice.sdk.task",
    "Locks": "sluice.sdk.task",
    "TaskDef": "sluice.sdk.task",
    "task": "sluice.sdk.task",
    "WorkflowDef": "sluice.sdk.workflow",
    "workflow": "sluice.sdk.workflow",
    "ConcurrencyBehavior": "sluice.spec.models",
    "ConcurrencyPolicy": "sluice.spec.models",
    "Quota": "sluice.spec.models",
    "RateLimit": "sluice.spec.models",
    "Schedule": "sluice.spec.models",
    "Directory": "sluice.spec.types",
    "File": "sluice.spec.types",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'sluice' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def main(argv: list[str] | None = None) -> int:
    """Run the `sluice` command line with `argv`; returns the exit code."""
    from sluice.cli.main import main as cli_main

    return cli_main(argv)


def current_fencing_token() -> str | None:
    """Inside a task body run by sluice's local workers: the attempt's fencing token,
    `<execution>/<node>@<epoch>`, whose epoch grows with every takeover of the execution. Hand
    it to an external system that refuses writes from an older holder; None elsewhere."""
    import os

    return os.environ.get("SLUICE_FENCING_TOKEN") or None


def run(target: Any, /, *, idempotency_key: str | None = None, **inputs: Any) -> dict[str, Any]:
    """Run a workflow, launch plan or task on the embedded default and return its outputs;
    raises SluiceError if it does not succeed. A run retried with the same `idempotency_key`
    (within `concurrency.idempotency_retention`) follows the execution the first one created
    instead of starting another. (A workflow input named `idempotency_key` goes through
    `sluice.api.run_async(target, inputs)`.)"""
    from sluice.api import run_sync

    return run_sync(target, inputs, idempotency_key)


__all__ = [
    "Cache",
    "ConcurrencyBehavior",
    "ConcurrencyPolicy",
    "Directory",
    "DynamicDef",
    "File",
    "LaunchPlan",
    "Locks",
    "MapTask",
    "Quota",
    "RateLimit",
    "Schedule",
    "SluiceError",
    "TaskDef",
    "WorkflowDef",
    "__version__",
    "current_fencing_token",
    "dynamic",
    "main",
    "map",
    "run",
    "task",
    "workflow",
]
