"""Creating and aborting executions: the one path every launch goes through (CLI, Python
API, schedules), so inputs are checked the same way and nothing is written half-way."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sluice.clock import Clock
from sluice.errors import (
    BackendUnavailableError,
    ClaimNeverFitsError,
    DefinitionError,
    InputError,
    InvalidArgumentError,
    NotFoundError,
)
from sluice.executions.policies import UNDECIDED_REASON, concurrency_key_of, needs_controller
from sluice.ids import new_execution_id
from sluice.locks.names import capacity_of, fill_template, template_problem
from sluice.resources.models import Claim
from sluice.spec.keys import key_fields
from sluice.spec.models import Binding, LaunchPlanSpec, NodeSpec, TaskSpec, WorkflowSpec
from sluice.spec.names import check_entity_name, check_scope_name
from sluice.spec.phases import ExecutionPhase
from sluice.spec.types import validate_json
from sluice.store.notify import EXECUTIONS_CHANNEL, Notifier
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord
from sluice.store.store import Repos, Store

if TYPE_CHECKING:
    from sluice.config import ResourcesConfig
    from sluice.resources import QuotaManager

CheckFits = Callable[[Sequence[Claim]], Awaitable[None]]
"""Raise ClaimNeverFitsError if a claim needs more than its namespace's quota could give."""


@dataclass(frozen=True)
class ClaimLimits:
    """What a launch can know of the room its tasks claim: quotas and lock capacities."""

    check_fits: CheckFits
    lock_rules: Mapping[str, int]


def claim_limits(manager: QuotaManager, config: ResourcesConfig) -> ClaimLimits:
    """The limits a runtime's resource manager and config set."""

    async def check_fits(claims: Sequence[Claim]) -> None:
        try:
            await manager.start()  # idempotent; the engine starts it anyway
            await manager.check_fits(claims)
        except BackendUnavailableError:  # the engine will say so; the launch need not wait
            return

    return ClaimLimits(check_fits, config.lock_rules)


def merge_inputs(
    workflow: WorkflowSpec, given: Mapping[str, Any], launch_plan: LaunchPlanSpec | None = None
) -> dict[str, Any]:
    """Workflow defaults < launch plan defaults < given inputs; fixed inputs cannot be given.
    Every value is checked against the interface; InputError names the culprit."""
    where = f"launch plan {launch_plan.name!r}" if launch_plan else f"workflow {workflow.name!r}"
    fixed = launch_plan.fixed_inputs if launch_plan else {}
    for name in given:
        if name not in workflow.interface.inputs:
            raise InputError(
                f"{where} has no input {name!r}; inputs are {sorted(workflow.interface.inputs)}"
            )
        if name in fixed:
            raise InputError(f"{where}: input {name!r} is fixed to {fixed[name]!r}")
    defaults = {n: s.default for n, s in workflow.interface.inputs.items() if s.has_default}
    values = {**defaults, **(launch_plan.default_inputs if launch_plan else {}), **given, **fixed}
    missing = sorted(set(workflow.interface.inputs) - set(values))
    if missing:
        raise InputError(f"{where}: input {missing[0]!r} is required")
    return {
        name: validate_json(workflow.interface.inputs[name].type, value, f"{where}: input {name!r}")
        for name, value in values.items()
    }


async def create_execution(
    store: Store,
    notifier: Notifier | None,
    clock: Clock,
    *,
    project: str,
    domain: str,
    workflow: WorkflowSpec,
    inputs: Mapping[str, Any],
    launch_plan: LaunchPlanSpec | None = None,
    options: Mapping[str, Any] | None = None,
    scheduled_at: float | None = None,
    execution_id: str | None = None,
    limits: ClaimLimits | None = None,
    reused: Sequence[NodeRecord] = (),
) -> ExecutionRecord | None:
    """Register the workflow (and the launch plan version, INACTIVE if new), then insert the
    execution, its nodes and its first event in one transaction. PENDING when a concurrency
    policy governs the launch plan name or a platform cap governs the project (the controller
    decides, see executions/policies.py), else QUEUED. Returns None when this schedule
    firing exists already. Names, and claims that could never be granted (see
    `check_launch`), are refused before anything is written. `reused`: node records (of
    `execution_id`) it starts with instead of fresh ones, SUCCEEDED with their outputs, each
    with an event REUSED saying where from (a retry of a failed execution)."""
    record = await prepare_execution(
        project, domain, workflow, inputs, launch_plan, options, clock.now(), limits
    )
    record.id, record.scheduled_at = execution_id or record.id, scheduled_at
    async with store.write() as repos:
        if not await write_execution(repos, notifier, record, workflow, launch_plan, reused):
            return None
    return record


async def prepare_execution(
    project: str,
    domain: str,
    workflow: WorkflowSpec,
    inputs: Mapping[str, Any],
    launch_plan: LaunchPlanSpec | None,
    options: Mapping[str, Any] | None,
    now: float,
    limits: ClaimLimits | None = None,
) -> ExecutionRecord:
    """The record of a new execution, its inputs merged and every launch check made; nothing
    is written."""
    values = merge_inputs(workflow, inputs, launch_plan)
    await check_launch(workflow, values, project, domain, launch_plan, limits)
    record = _new_record(project, domain, workflow, values, launch_plan, now)
    record.options = dict(options or {})
    if launch_plan is not None and launch_plan.overwrite_cache:
        record.options["overwrite_cache"] = True
    return record


async def write_execution(
    repos: Repos,
    notifier: Notifier | None,
    record: ExecutionRecord,
    workflow: WorkflowSpec,
    launch_plan: LaunchPlanSpec | None,
    reused: Sequence[NodeRecord] = (),
) -> bool:
    """Write a prepared execution, its nodes and its first event inside the caller's
    transaction, registering its workflow and launch plan version; False (nothing of the
    execution written) when its id or its schedule firing exists already. `reused`: node
    records it starts with instead of fresh ones (see create_execution)."""
    project, domain, now = record.project, record.domain, record.created_at
    await repos.specs.put_workflow(project, domain, workflow, now)
    if launch_plan is not None:
        await repos.launch_plans.put(project, domain, launch_plan, now)
    pending, policy = await needs_controller(repos, project, domain, launch_plan)
    if pending:
        record.phase, record.reason = ExecutionPhase.PENDING, UNDECIDED_REASON
        name = launch_plan.name if launch_plan else ""
        record.concurrency_key = concurrency_key_of(policy, record.inputs, name)
    if not await repos.executions.insert(record):
        return False
    done = {r.node_id: r for r in reused}
    fresh = [NodeRecord(record.id, n.id, updated_at=now) for n in workflow.nodes]
    nodes = [done.pop(n.node_id, n) for n in fresh] + list(done.values())
    await repos.nodes.insert_many(nodes)
    event = EventRecord(record.id, record.phase.value, now, reason=record.reason)
    marks = [EventRecord(record.id, "REUSED", now, r.node_id, reason=r.reason) for r in reused]
    await repos.events.append([event, *marks])
    if notifier is not None:
        await notifier.publish(repos.conn, EXECUTIONS_CHANNEL, record.id)
    return True


async def check_launch(
    workflow: WorkflowSpec,
    values: Mapping[str, Any],
    project: str,
    domain: str,
    launch_plan: LaunchPlanSpec | None = None,
    limits: ClaimLimits | None = None,
) -> None:
    """Refuse, before anything is written, a launch that could never run: a bad name, a lock
    template that cannot be filled, a lock name known now (from workflow inputs and constants)
    that is malformed or whose rule's capacity is < 1, more units than a known quota. Lock
    names that depend on upstream outputs are the engine's to check when the node starts."""
    check_definitions(workflow, project, domain, launch_plan)
    for node in workflow.nodes:
        task = workflow.tasks.get(node.task)
        if task is not None:
            await _check_task(task, node, values, project, domain, limits)


def check_definitions(
    workflow: WorkflowSpec, project: str, domain: str, launch_plan: LaunchPlanSpec | None
) -> None:
    """What a launch or a registration can check without inputs: names and lock templates
    (specs read as JSON never went through the SDK's checks)."""
    check_scope_name("project", project, InputError)
    check_scope_name("domain", domain, InputError)
    check_entity_name("workflow name", workflow.name, InputError)
    if launch_plan is not None:
        check_entity_name("launch plan name", launch_plan.name, InputError)
        _check_key(workflow, launch_plan)
    for task in workflow.tasks.values():
        check_entity_name("task name", task.name, InputError)
        for spec in task.claims.locks:
            problem = "" if spec.function else template_problem(spec, task.interface)
            if problem:
                raise DefinitionError(f"task {task.name!r}: locks: {problem}")


def _check_key(workflow: WorkflowSpec, launch_plan: LaunchPlanSpec) -> None:
    policy = launch_plan.concurrency
    if policy is None or policy.key is None:
        return
    for field in key_fields(policy.key):
        if field not in workflow.interface.inputs:
            raise DefinitionError(
                f"launch plan {launch_plan.name!r}: concurrency key {policy.key!r} reads "
                f"{field!r}, which is not an input; inputs are {sorted(workflow.interface.inputs)}"
            )


async def _check_task(
    task: TaskSpec,
    node: NodeSpec,
    values: Mapping[str, Any],
    project: str,
    domain: str,
    limits: ClaimLimits | None,
) -> None:
    where = f"task {task.name!r}"
    for name in _known_lock_names(task, node, values, where):
        pattern, capacity = capacity_of(limits.lock_rules if limits else {}, name)
        if capacity < 1:
            raise ClaimNeverFitsError(
                f"{where} in {project}/{domain} claims lock {name!r}, whose lock rule "
                f"{pattern!r} has capacity {capacity}: it could never be granted"
            )
    if limits is None or not task.claims.quotas:
        return
    try:
        await limits.check_fits([Claim(q.namespace, q.units) for q in task.claims.quotas])
    except ClaimNeverFitsError as exc:
        raise ClaimNeverFitsError(f"{where} in {project}/{domain}: {exc}") from None
    except InvalidArgumentError as exc:  # e.g. one namespace claimed twice
        raise DefinitionError(f"{where}: quotas: {exc}") from None


def _known_lock_names(
    task: TaskSpec, node: NodeSpec, values: Mapping[str, Any], where: str
) -> list[str]:
    names: list[str] = []
    for spec in task.claims.locks:
        if spec.function:
            continue  # user code: called by the engine when the node starts
        inputs = _known_inputs(task, node, values)
        if inputs is None:
            continue
        try:
            names.extend(fill_template(spec, inputs))
        except ValueError as exc:
            raise InputError(f"{where}: {exc}") from None
    return names


_UNKNOWN = object()


def _known_inputs(
    task: TaskSpec, node: NodeSpec, values: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The node's inputs when every one is known at launch; None if any waits for upstream."""
    known: dict[str, Any] = {}
    for name, declared in task.interface.inputs.items():
        binding = node.inputs.get(name)
        value = declared.default if binding is None else _value_of(binding, values)
        if value is _UNKNOWN:
            return None
        known[name] = value
    return known


def _value_of(binding: Binding, values: Mapping[str, Any]) -> Any:
    if binding.kind == "input":
        return values.get(binding.name, _UNKNOWN)
    if binding.kind == "constant":
        return binding.value
    if binding.kind in ("list", "dict"):
        items = [_value_of(item, values) for item in binding.items]
        if any(item is _UNKNOWN for item in items):
            return _UNKNOWN
        return items if binding.kind == "list" else dict(zip(binding.keys, items, strict=False))
    return _UNKNOWN


def _new_record(
    project: str,
    domain: str,
    workflow: WorkflowSpec,
    values: dict[str, Any],
    launch_plan: LaunchPlanSpec | None,
    now: float,
) -> ExecutionRecord:
    return ExecutionRecord(
        id=new_execution_id(),
        project=project,
        domain=domain,
        workflow_name=workflow.name,
        workflow_version=workflow.version,
        phase=ExecutionPhase.QUEUED,
        inputs=values,
        created_at=now,
        updated_at=now,
        launch_plan=launch_plan.name if launch_plan else None,
        launch_plan_version=launch_plan.version if launch_plan else None,
        priority=launch_plan.priority if launch_plan else 0,
    )


async def request_abort(
    store: Store,
    notifier: Notifier | None,
    clock: Clock,
    execution_id: str,
    reason: str = "aborted by user",
) -> ExecutionRecord:
    """Abort: a PENDING or unclaimed QUEUED execution ends ABORTED at once; a running one
    goes to ABORTING and its engine aborts and finalizes every active task."""
    async with store.write() as repos:
        await abort_in(repos, notifier, clock.now(), execution_id, reason)
        return await _get(repos, execution_id)


async def abort_in(
    repos: Repos,
    notifier: Notifier | None,
    now: float,
    execution_id: str,
    reason: str,
    info: dict[str, Any] | None = None,
) -> ExecutionPhase | None:
    """Abort inside the caller's transaction; the phase it moved to, or None if there was
    nothing to abort (terminal or ABORTING already)."""
    record = await _get(repos, execution_id)
    if record.phase.is_terminal or record.phase is ExecutionPhase.ABORTING:
        return None
    at_once = record.phase is ExecutionPhase.PENDING or (
        record.phase is ExecutionPhase.QUEUED and record.owner is None
    )
    target = ExecutionPhase.ABORTED if at_once else ExecutionPhase.ABORTING
    if not await repos.executions.compare_and_set_phase(
        execution_id, [record.phase], target, now, reason=reason
    ):
        return None
    if at_once:
        await _skip_nodes(repos, execution_id, now)
    event = EventRecord(execution_id, target.value, now, reason=reason, info=info)
    await repos.events.append([event])
    if notifier is not None:
        await notifier.publish(repos.conn, EXECUTIONS_CHANNEL, execution_id)
    return target


async def _skip_nodes(repos: Repos, execution_id: str, now: float) -> None:
    from sluice.spec.phases import NodePhase

    for node in await repos.nodes.list(execution_id):
        node.phase, node.ended_at, node.reason = NodePhase.SKIPPED, now, "execution aborted"
        await repos.nodes.update(node)


async def _get(repos: Repos, execution_id: str) -> ExecutionRecord:
    record = await repos.executions.get(execution_id)
    if record is None:
        raise NotFoundError(f"execution {execution_id!r} does not exist")
    return record
