"""What the service accepts as a launch plan: a sluice LaunchPlan or a flytekit one."""

from __future__ import annotations

from typing import Any

from sluice.errors import DefinitionError
from sluice.runtime import resolve_target
from sluice.spec.models import LaunchPlanSpec, WorkflowSpec


def launch_plan_of(plan: Any) -> tuple[WorkflowSpec, LaunchPlanSpec]:
    """The specs of a sluice LaunchPlan or a flytekit one; DefinitionError for anything else."""
    from sluice.flyte import is_flytekit_object
    from sluice.sdk.launch_plan import LaunchPlan

    if isinstance(plan, LaunchPlan):
        return plan.workflow.spec, plan.spec
    if is_flytekit_object(plan):
        workflow, spec = resolve_target(plan)
        if spec is not None:
            return workflow, spec
    raise DefinitionError(f"{plan!r} is a {type(plan).__name__}, not a LaunchPlan")
