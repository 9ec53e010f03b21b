"""sluice: a workflow engine whose concurrency control is correct under any load and crash.

The public API is exactly `__all__`; a test keeps it that way.
"""

from __future__ import annotations

from typing import Any

from sluice.errors import SluiceError
from sluice.sdk.launch_plan import LaunchPlan
from sluice.sdk.task import Cache, Locks, TaskDef, task
from sluice.sdk.workflow import WorkflowDef, workflow
from sluice.spec.models import ConcurrencyBehavior, ConcurrencyPolicy, Quota, Schedule
from sluice.spec.types import Directory, File

__version__ = "0.1.0"


def main(argv: list[str] | None = None) -> int:
    """Run the `sluice` command line with `argv`; returns the exit code."""
    from sluice.cli.main import main as cli_main

    return cli_main(argv)


def run(target: Any, **inputs: Any) -> dict[str, Any]:
    """Run a workflow, launch plan or task on the embedded default and return its outputs;
    raises SluiceError if it does not succeed."""
    from sluice.api import run_sync

    return run_sync(target, inputs)


__all__ = [
    "Cache",
    "ConcurrencyBehavior",
    "ConcurrencyPolicy",
    "Directory",
    "File",
    "LaunchPlan",
    "Locks",
    "Quota",
    "Schedule",
    "SluiceError",
    "TaskDef",
    "WorkflowDef",
    "__version__",
    "main",
    "run",
    "task",
    "workflow",
]
