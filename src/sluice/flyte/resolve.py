"""A flytekit task, workflow or launch plan -> the sluice workflow (and launch plan) to run."""

from __future__ import annotations

from typing import Any

from sluice.errors import DefinitionError, SluiceError
from sluice.flyte.entities import serialize
from sluice.flyte.launch_plans import default_inputs, launch_plan_spec
from sluice.flyte.tasks import task_spec
from sluice.flyte.workflows import task_workflow, workflow_spec
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec


def resolve_flytekit(target: Any) -> tuple[WorkflowSpec, LaunchPlanSpec | None]:
    """Serialize `target` in process and translate it; DefinitionError naming what sluice
    does not support, or what flytekit itself refused while serializing (one line, never a
    traceback)."""
    try:
        return _resolve(target)
    except SluiceError:
        raise
    except Exception as exc:  # flytekit's own refusal (a type it cannot serialize, ...)
        name = getattr(target, "name", repr(target))
        first = (str(exc).strip().splitlines() or [""])[0]
        raise DefinitionError(
            f"flytekit could not serialize {name!r}: {type(exc).__name__}: {first}"
        ) from None


def _resolve(target: Any) -> tuple[WorkflowSpec, LaunchPlanSpec | None]:
    from flytekit import LaunchPlan
    from flytekit.core.base_task import PythonTask
    from flytekit.core.workflow import WorkflowBase

    if isinstance(target, LaunchPlan):
        entities = serialize(target, LaunchPlan.get_or_create(target.workflow))
        return launch_plan_spec(entities, entities.launch_plans[target.name])
    if isinstance(target, WorkflowBase):
        default = LaunchPlan.get_or_create(target)
        entities = serialize(target, default)
        defaults = default_inputs(entities.launch_plans[default.name])
        return workflow_spec(entities, target.name, defaults), None
    if isinstance(target, PythonTask):
        entities = serialize(target)
        template = entities.tasks[target.name].template
        file = entities.files.get(target.name, "")
        return task_workflow(task_spec(template, entities.root_of(target.name), file)), None
    raise DefinitionError(
        f"{target!r} is a {type(target).__name__}: sluice runs flytekit tasks, workflows and "
        "launch plans"
    )
