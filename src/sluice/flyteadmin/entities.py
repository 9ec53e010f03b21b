"""AdminService RPCs on tasks, workflows and launch plans: create (register), get, list, list
names, and launch plan activation. Each parses the request, calls one FlyteAdmin verb and
renders its answer."""

from __future__ import annotations

from typing import Any

from flyteidl.admin import launch_plan_pb2, task_pb2, workflow_pb2

from sluice.errors import InvalidArgumentError, NotFoundError
from sluice.flyteadmin import render
from sluice.flyteadmin.calls import Caller, rpc
from sluice.service import Sluice
from sluice.service.flyte import FlyteId
from sluice.service.flyte.graph import parse
from sluice.store.flyte_entities import LAUNCH_PLAN, TASK, WORKFLOW, FlyteEntityRecord

MAX_PAGE = 1000


def page(request: Any) -> tuple[int, int]:
    """(limit, offset) of a list request: Flyte's tokens are offsets."""
    limit = request.limit or 100
    if not 1 <= limit <= MAX_PAGE:
        raise InvalidArgumentError(f"limit {limit}: from 1 to {MAX_PAGE}")
    try:
        offset = int(request.token or 0)
    except ValueError:
        raise InvalidArgumentError(f"token {request.token!r} is not one this server gave") from None
    return limit, offset


def next_token(found: list[Any], limit: int, offset: int) -> str:
    return str(offset + limit) if len(found) == limit else ""


def _active_only(request: Any) -> bool:
    """`eq(state,1)` (flytectl's and the console's filter for ACTIVE launch plans)."""
    return "state,1" in request.filters.replace(" ", "")


class EntityRpcs:
    caller: Caller

    # Tasks.
    @rpc
    async def CreateTask(self, request: Any, service: Sluice) -> Any:
        await service.flyte.register(FlyteId.of(TASK, request.id), request.spec)
        return task_pb2.TaskCreateResponse()

    @rpc
    async def GetTask(self, request: Any, service: Sluice) -> Any:
        record = await service.flyte.entity(FlyteId.of(TASK, request.id))
        return render.task(record, parse(TASK, record.spec))

    @rpc
    async def ListTasks(self, request: Any, service: Sluice) -> Any:
        records, token = await _list(service, TASK, request)
        return task_pb2.TaskList(
            tasks=[render.task(r, parse(TASK, r.spec)) for r in records], token=token
        )

    @rpc
    async def ListTaskIds(self, request: Any, service: Sluice) -> Any:
        return await _names(service, TASK, request)

    # Workflows.
    @rpc
    async def CreateWorkflow(self, request: Any, service: Sluice) -> Any:
        await service.flyte.register(FlyteId.of(WORKFLOW, request.id), request.spec)
        return workflow_pb2.WorkflowCreateResponse()

    @rpc
    async def GetWorkflow(self, request: Any, service: Sluice) -> Any:
        record = await service.flyte.entity(FlyteId.of(WORKFLOW, request.id))
        return await _workflow(service, record)

    @rpc
    async def ListWorkflows(self, request: Any, service: Sluice) -> Any:
        records, token = await _list(service, WORKFLOW, request)
        found = [await _workflow(service, r) for r in records]
        return workflow_pb2.WorkflowList(workflows=found, token=token)

    @rpc
    async def ListWorkflowIds(self, request: Any, service: Sluice) -> Any:
        return await _names(service, WORKFLOW, request)

    # Launch plans.
    @rpc
    async def CreateLaunchPlan(self, request: Any, service: Sluice) -> Any:
        await service.flyte.register(FlyteId.of(LAUNCH_PLAN, request.id), request.spec)
        return launch_plan_pb2.LaunchPlanCreateResponse()

    @rpc
    async def GetLaunchPlan(self, request: Any, service: Sluice) -> Any:
        record = await service.flyte.entity(FlyteId.of(LAUNCH_PLAN, request.id))
        return await _launch_plan(service, record)

    @rpc
    async def GetActiveLaunchPlan(self, request: Any, service: Sluice) -> Any:
        named = request.id
        found = await service.flyte.entities(
            LAUNCH_PLAN, named.project, named.domain, named.name, active_only=True, limit=1
        )
        if not found:
            raise NotFoundError(
                f"launch plan {named.project}/{named.domain}/{named.name} has no ACTIVE version"
            )
        return await _launch_plan(service, found[0])

    @rpc
    async def ListLaunchPlans(self, request: Any, service: Sluice) -> Any:
        records, token = await _list(service, LAUNCH_PLAN, request, _active_only(request))
        found = [await _launch_plan(service, r) for r in records]
        return launch_plan_pb2.LaunchPlanList(launch_plans=found, token=token)

    @rpc
    async def ListActiveLaunchPlans(self, request: Any, service: Sluice) -> Any:
        limit, offset = page(request)
        records = await service.flyte.entities(
            LAUNCH_PLAN, request.project, request.domain, active_only=True, limit=limit,
            offset=offset,
        )  # fmt: skip
        found = [await _launch_plan(service, r) for r in records]
        token = next_token(records, limit, offset)
        return launch_plan_pb2.LaunchPlanList(launch_plans=found, token=token)

    @rpc
    async def ListLaunchPlanIds(self, request: Any, service: Sluice) -> Any:
        return await _names(service, LAUNCH_PLAN, request)

    @rpc
    async def UpdateLaunchPlan(self, request: Any, service: Sluice) -> Any:
        active = request.state == launch_plan_pb2.ACTIVE
        ident = FlyteId.of(LAUNCH_PLAN, request.id)
        await service.flyte.set_launch_plan_state(ident, active=active)
        return launch_plan_pb2.LaunchPlanUpdateResponse()


async def _list(
    service: Sluice, kind: str, request: Any, active_only: bool = False
) -> tuple[list[FlyteEntityRecord], str]:
    limit, offset = page(request)
    named = request.id
    records = await service.flyte.entities(
        kind, named.project, named.domain, named.name or None, active_only=active_only,
        limit=limit, offset=offset,
    )  # fmt: skip
    return records, next_token(records, limit, offset)


async def _names(service: Sluice, kind: str, request: Any) -> Any:
    limit, offset = page(request)
    names = await service.flyte.entity_names(
        kind, request.project, request.domain, limit=limit, offset=offset
    )
    token = next_token(names, limit, offset)
    return render.named_ids(kind, request.project, request.domain, names, token)


async def _workflow(service: Sluice, record: FlyteEntityRecord) -> Any:
    spec = parse(WORKFLOW, record.spec)
    return render.workflow(record, spec, await service.flyte.workflow_tasks(spec))


async def _launch_plan(service: Sluice, record: FlyteEntityRecord) -> Any:
    spec = parse(LAUNCH_PLAN, record.spec)
    outputs = None
    try:
        workflow = await service.flyte.entity(FlyteId.of(WORKFLOW, spec.workflow_id))
        outputs = parse(WORKFLOW, workflow.spec).template.interface.outputs
    except NotFoundError:
        pass
    return render.launch_plan(record, spec, outputs)
