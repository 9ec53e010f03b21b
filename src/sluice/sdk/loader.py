"""Load user code named as `path/to/file.py:name` or `package.module:name`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sluice.errors import NotFoundError
from sluice.modules import load_module, resolve_attribute

__all__ = ["load_module", "load_target", "resolve_attribute"]


def load_target(reference: str) -> Any:
    """`file.py:name` or `pkg.module:name` to the object it names; NotFoundError otherwise."""
    location, sep, name = reference.rpartition(":")
    if not sep or not location or not name:
        raise NotFoundError(
            f"{reference!r} does not name a target; use path/to/file.py:workflow or module:workflow"
        )
    if location.endswith(".py") or "/" in location:
        path = Path(location)
        module = load_module(path.stem, str(path.resolve()))
    else:
        module = load_module(location)
    try:
        return resolve_attribute(module, name)
    except NotFoundError:
        known = sorted(k for k, v in vars(module).items() if _is_runnable(v))
        raise NotFoundError(
            f"{location} has no workflow, launch plan or task {name!r}; it has {known}"
        ) from None


def _is_runnable(value: Any) -> bool:
    from sluice.sdk.launch_plan import LaunchPlan
    from sluice.sdk.task import TaskDef
    from sluice.sdk.workflow import WorkflowDef

    flytekit = type(value).__module__.startswith("flytekit")  # sluice.flyte translates these
    return isinstance(value, WorkflowDef | LaunchPlan | TaskDef) or (
        flytekit and hasattr(value, "name")
    )
