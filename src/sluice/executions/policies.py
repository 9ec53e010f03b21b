"""Which concurrency policy governs an execution, and whether it needs the controller.

The ACTIVE version's policy governs every execution of a launch plan name, whichever version
created it (the RFC's rule: schedules key off the active version, so must the limit). With no
ACTIVE version, each execution is governed by the policy of its own version. Platform caps
(per project, per project/domain) govern every execution of their scope, with or without a
launch plan.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from sluice.errors import DefinitionError, InputError
from sluice.spec.keys import fill_key
from sluice.spec.models import ConcurrencyPolicy, LaunchPlanSpec
from sluice.store.records import LaunchPlanRecord
from sluice.store.repositories import CapsRepository, LaunchPlanRepository
from sluice.store.store import Repos

UNDECIDED_REASON = "waiting for the concurrency controller"
LAUNCH_PLANS_CHANNEL = "launch_plans"
CAPS_CHANNEL = "concurrency_caps"


def launch_plan_spec(spec: dict[str, object]) -> LaunchPlanSpec:
    """A stored launch plan spec; a malformed one is a DefinitionError naming what is wrong."""
    try:
        return LaunchPlanSpec.model_validate(spec)
    except ValidationError as exc:
        raise DefinitionError(f"launch plan {spec.get('name')!r}: {exc}") from None


async def governing_policy(
    repos: Repos, project: str, domain: str, launch_plan: LaunchPlanSpec
) -> ConcurrencyPolicy | None:
    """The policy of the name's ACTIVE version, or of `launch_plan` itself if none is."""
    active = await repos.launch_plans.active(project, domain, launch_plan.name)
    if active is None or active.version == launch_plan.version:
        return launch_plan.concurrency
    return launch_plan_spec(active.spec).concurrency


async def is_keyed(
    repos: Repos, project: str, domain: str, name: str | None, version: str | None
) -> bool:
    """Whether the policy governing executions of `name` (created by `version`) is keyed."""
    if not name:
        return False
    record = await repos.launch_plans.active(project, domain, name)
    if record is None and version is not None:
        record = await repos.launch_plans.get(project, domain, name, version)
    policy = launch_plan_spec(record.spec).concurrency if record is not None else None
    return policy is not None and policy.key is not None


async def needs_controller(
    repos: Repos, project: str, domain: str, launch_plan: LaunchPlanSpec | None
) -> tuple[bool, ConcurrencyPolicy | None]:
    """Whether a new execution must wait PENDING for the controller's decision (a policy
    governs its launch plan name, or a platform cap governs its project or domain), and the
    governing policy."""
    policy = None
    if launch_plan is not None:
        policy = await governing_policy(repos, project, domain, launch_plan)
        if policy is not None:
            return True, policy
    return await CapsRepository(repos.conn).applies(project, domain), policy


def concurrency_key_of(
    policy: ConcurrencyPolicy | None, values: Mapping[str, Any], launch_plan: str
) -> str | None:
    """The key a keyed policy gives an execution with these inputs (None without a key);
    InputError when the inputs cannot fill the template."""
    if policy is None or policy.key is None:
        return None
    try:
        return fill_key(policy.key, values)
    except ValueError as exc:
        raise InputError(f"launch plan {launch_plan!r}: {exc}") from None


class PolicyTable:
    """Every registered version's policy, and which version of each name is ACTIVE: what the
    controller consults for each decision (see the module docstring for the rule)."""

    def __init__(self, records: Iterable[LaunchPlanRecord] = ()) -> None:
        self.active: dict[tuple[str, str, str], ConcurrencyPolicy | None] = {}
        self.versions: dict[tuple[str, str, str, str], ConcurrencyPolicy | None] = {}
        for record in records:
            key = (record.project, record.domain, record.name)
            policy = launch_plan_spec(record.spec).concurrency
            self.versions[(*key, record.version)] = policy
            if record.state == LaunchPlanRepository.ACTIVE:
                self.active[key] = policy

    def with_total_max(self) -> set[tuple[str, str, str]]:
        """Launch plan names some version of which bounds the total over its keys."""
        return {key[:3] for key, policy in self.versions.items() if policy and policy.total_max} | {
            key for key, policy in self.active.items() if policy and policy.total_max
        }

    def knows(self, item: Governed) -> bool:
        """Whether `item`'s own version is in the table (every execution's version is
        registered before the execution is inserted, so an unknown one means stale)."""
        return not item.key[2] or (*item.key, item.version) in self.versions

    def policy(self, item: Governed) -> ConcurrencyPolicy | None:
        if item.key in self.active:
            return self.active[item.key]
        return self.versions.get((*item.key, item.version))


class Governed(Protocol):
    @property
    def key(self) -> tuple[str, str, str]: ...

    @property
    def version(self) -> str: ...
