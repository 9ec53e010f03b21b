"""The specs the engine runs: tasks, workflows, launch plans. All JSON, no user code.

The SDK builds these from decorated functions; the store keeps them as JSON; the engine and
the plugins read them. User-facing constructors (`Quota`, `ConcurrencyPolicy`, `Schedule`,
`Cache`) are dataclasses that check their values and raise sluice errors naming the bad one.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from sluice.errors import InvalidPolicyError, InvalidQuotaError, InvalidRateLimitError
from sluice.spec.keys import key_fields
from sluice.spec.names import check_namespace_name, check_rate_limit_name
from sluice.spec.rates import check_units
from sluice.spec.types import TypeSpec
from sluice.spec.values import check_count, check_seconds

MAX_QUOTA = 1000
"""The default of resources.max_quota: the most units a quota, and so a claim, can have."""


class SpecModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class InputSpec(SpecModel):
    type: TypeSpec
    default: Any = None
    has_default: bool = False


class Interface(SpecModel):
    inputs: dict[str, InputSpec] = Field(default_factory=dict)
    outputs: dict[str, TypeSpec] = Field(default_factory=dict)


class CacheSpec(SpecModel):
    enabled: bool = False
    version: str = ""
    serialize: bool = False
    ignored_inputs: tuple[str, ...] = ()
    max_age: float | None = Field(default=None, gt=0)


@dataclass(frozen=True)
class Quota:
    """A claim of `units` tokens of a named resource, held while the task runs."""

    namespace: str
    units: int = 1

    def __post_init__(self) -> None:
        check_namespace_name(self.namespace, InvalidQuotaError, "Quota")
        units = self.units
        if isinstance(units, bool) or not isinstance(units, int) or not 1 <= units <= MAX_QUOTA:
            # No quota can exceed resources.max_quota's default, so more units never fit.
            raise InvalidQuotaError(
                f"Quota {self.namespace!r}: units must be an int from 1 to {MAX_QUOTA}, "
                f"got {units!r}"
            )


@dataclass(frozen=True)
class RateLimit:
    """`units` of a rate limit's budget taken each time the task runs, from the budget of
    `key`: a template over the task's inputs ("{customer}"), as lock names are; "" shares one
    budget. The limit itself ("100/min") is set by an operator, the config or a plugin."""

    name: str
    units: int = 1
    key: str = ""

    def __post_init__(self) -> None:
        check_rate_limit_name(self.name, InvalidRateLimitError, "RateLimit")
        check_units(self.name, self.units)
        if not isinstance(self.key, str):
            raise InvalidRateLimitError(
                f"RateLimit {self.name!r}: key must be a template string such as "
                f"'{{customer}}', got {self.key!r}"
            )

    @property
    def label(self) -> str:
        return f"{self.name}/{self.key}" if self.key else self.name


class LockSpec(SpecModel):
    """Lock names computed from a task's inputs: a template ("db/{table}/{p}") or a callable."""

    template: str = ""
    function: str = ""  # "module:qualname" of a callable(inputs) -> list[str]
    for_each: str = ""  # with a template: one lock per item of this list input


class Claims(SpecModel):
    quotas: tuple[Quota, ...] = ()
    locks: tuple[LockSpec, ...] = ()
    rate_limits: tuple[RateLimit, ...] = ()


class TaskMetadata(SpecModel):
    retries: int = Field(default=0, ge=0)
    timeout: float | None = Field(default=None, gt=0)
    interruptible: bool = False
    cache: CacheSpec = Field(default_factory=CacheSpec)
    priority: int = 0


class SourceRef(SpecModel):
    """Where a python task's function lives: an importable module, or a file to load."""

    module: str
    qualname: str
    file: str = ""


class TaskSpec(SpecModel):
    name: str
    version: str
    type: str = "python"
    interface: Interface = Field(default_factory=Interface)
    metadata: TaskMetadata = Field(default_factory=TaskMetadata)
    claims: Claims = Field(default_factory=Claims)
    custom: dict[str, Any] = Field(default_factory=dict)
    source: SourceRef | None = None

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"


class Binding(SpecModel):
    """Where a node input comes from: a workflow input, an upstream output, a constant, or a
    list/dict of bindings."""

    kind: Literal["input", "output", "constant", "list", "dict"]
    name: str = ""  # workflow input name (kind "input")
    node: str = ""  # upstream node id (kind "output")
    output: str = ""  # upstream output name (kind "output")
    value: Any = None  # JSON constant (kind "constant")
    items: tuple[Binding, ...] = ()  # kind "list"
    keys: tuple[str, ...] = ()  # kind "dict": keys matching items
    path: tuple[str | int, ...] = Field(default=(), exclude_if=lambda path: not path)
    """Kinds "input" and "output": a field, key or index path into the value (Flyte's
    attribute access on a promise, `out.field`, `out[0]`, `out["k"]`); left out of dumps
    when empty, so specs without one keep their digests."""

    def upstream_nodes(self) -> set[str]:
        if self.kind == "output":
            return {self.node}
        found: set[str] = set()
        for item in self.items:
            found |= item.upstream_nodes()
        return found


class NodeSpec(SpecModel):
    id: str
    task: str  # TaskSpec.key
    inputs: dict[str, Binding] = Field(default_factory=dict)
    upstream: tuple[str, ...] = ()  # every node this one waits for, from bindings and ordering


class OnFailure(SpecModel):
    """A workflow's failure handler (Flyte's `on_failure`): `node`, one of the workflow's
    nodes, runs only when the execution fails, after every other node has stopped; it is
    SKIPPED when the execution succeeds. `error_input`, if set, is the input of its task
    that receives the failure ({"failed_node_id", "message"})."""

    node: str
    error_input: str = ""


class WorkflowSpec(SpecModel):
    name: str
    version: str
    interface: Interface = Field(default_factory=Interface)
    nodes: tuple[NodeSpec, ...] = ()
    outputs: dict[str, Binding] = Field(default_factory=dict)
    tasks: dict[str, TaskSpec] = Field(default_factory=dict)
    on_failure: OnFailure | None = Field(default=None, exclude_if=lambda found: found is None)

    def node(self, node_id: str) -> NodeSpec:
        for node in self.nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)


class ConcurrencyBehavior(enum.StrEnum):
    WAIT = "WAIT"
    SKIP = "SKIP"
    REPLACE = "REPLACE"


@dataclass(frozen=True)
class ConcurrencyPolicy:
    """At most `max` active executions of a launch plan name; what happens to the next one.

    WAIT queues it as PENDING (promoted by priority, then creation time), SKIP ends it as
    SKIPPED, REPLACE aborts the oldest active one. `max_pending` bounds the WAIT queue: a
    creation beyond it is SKIPPED.

    With `key` (a template over the execution's inputs, e.g. "{customer}"), every rule above
    holds per key instead: `max` active executions per key (`key_max` gives some keys their
    own), `max_pending` waiting per key, SKIP and REPLACE judged within the key; keys with
    waiting executions take turns (round robin) when they compete for room. `total_max`
    bounds the active executions of all keys together.
    """

    max: int
    behavior: ConcurrencyBehavior = ConcurrencyBehavior.WAIT
    max_pending: int | None = None
    key: str | None = None
    key_max: dict[str, int] = field(default_factory=dict)
    total_max: int | None = None

    def __post_init__(self) -> None:
        check_count("ConcurrencyPolicy max", self.max, InvalidPolicyError, low=1)
        try:
            object.__setattr__(self, "behavior", ConcurrencyBehavior(self.behavior))
        except ValueError:
            names = ", ".join(b.value for b in ConcurrencyBehavior)
            raise InvalidPolicyError(
                f"ConcurrencyPolicy behavior must be one of {names}, got {self.behavior!r}"
            ) from None
        if self.max_pending is not None:
            check_count("ConcurrencyPolicy max_pending", self.max_pending, InvalidPolicyError)
        self._check_key()

    def _check_key(self) -> None:
        if self.key is None:
            if self.key_max or self.total_max is not None:
                raise InvalidPolicyError(
                    "ConcurrencyPolicy key_max and total_max need a key (a template over the "
                    "inputs, e.g. key='{customer}')"
                )
            return
        if not isinstance(self.key, str) or not self.key.strip():
            raise InvalidPolicyError(f"ConcurrencyPolicy key must be a template, got {self.key!r}")
        try:
            fields = key_fields(self.key)
        except ValueError as exc:
            raise InvalidPolicyError(f"ConcurrencyPolicy key {self.key!r}: {exc}") from None
        if not fields:
            raise InvalidPolicyError(
                f"ConcurrencyPolicy key {self.key!r} names no input: every execution would "
                "share one key; use max without a key"
            )
        if not isinstance(self.key_max, dict):
            raise InvalidPolicyError(
                f"ConcurrencyPolicy key_max must be a dict of key -> max, got {self.key_max!r}"
            )
        for name, value in self.key_max.items():
            if not isinstance(name, str):
                raise InvalidPolicyError(f"ConcurrencyPolicy key_max key {name!r} is not a str")
            check_count(f"ConcurrencyPolicy key_max[{name!r}]", value, InvalidPolicyError, low=1)
        if self.total_max is not None:
            check_count("ConcurrencyPolicy total_max", self.total_max, InvalidPolicyError, low=1)
            if self.behavior is ConcurrencyBehavior.REPLACE:
                raise InvalidPolicyError(
                    "ConcurrencyPolicy total_max works with WAIT or SKIP: REPLACE replaces "
                    "within a key"
                )

    def limit_for(self, key: str) -> int:
        """The most active executions of one key (`max` without a key: of the name)."""
        return self.key_max.get(key, self.max)


@dataclass(frozen=True)
class Schedule:
    """When a launch plan fires: a cron expression in a time zone, or a fixed rate (seconds).

    `catch_up` bounds what runs after downtime: "none" skips missed firings, "latest" runs
    only the last one, "all" runs up to `catch_up_max` of them, oldest first. None uses the
    deployment's config.
    """

    cron: str | None = None
    timezone: str = "UTC"
    fixed_rate: float | None = None
    catch_up: Literal["none", "latest", "all"] | None = None
    catch_up_max: int | None = None
    kickoff_input: Annotated[str | None, Field(exclude_if=lambda name: name is None)] = None
    """The workflow input each firing sets to its nominal time, a datetime (Flyte's
    `kickoff_time_input_arg`); left out of dumps when unset."""

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.fixed_rate is None):
            raise InvalidPolicyError(
                f"Schedule needs exactly one of cron or fixed_rate, got cron={self.cron!r}, "
                f"fixed_rate={self.fixed_rate!r}"
            )
        if self.cron is not None:
            _check_cron(self.cron)
        _check_timezone(self.timezone)
        if self.fixed_rate is not None:
            check_seconds("Schedule fixed_rate", self.fixed_rate, InvalidPolicyError)
        if self.catch_up not in (None, "none", "latest", "all"):
            raise InvalidPolicyError(
                f"Schedule catch_up must be none, latest or all, got {self.catch_up!r}"
            )
        if self.catch_up_max is not None:
            check_count("Schedule catch_up_max", self.catch_up_max, InvalidPolicyError, low=1)


def _check_cron(expression: str) -> None:
    from croniter import croniter

    if not isinstance(expression, str) or not croniter.is_valid(expression):
        raise InvalidPolicyError(f"Schedule cron {expression!r} is not a valid cron expression")


def _check_timezone(name: str) -> None:
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidPolicyError(f"Schedule timezone {name!r} is not a known time zone") from None


class LaunchPlanSpec(SpecModel):
    name: str
    version: str
    workflow: str  # "name@version"
    default_inputs: dict[str, Any] = Field(default_factory=dict)
    fixed_inputs: dict[str, Any] = Field(default_factory=dict)
    schedule: Schedule | None = None
    concurrency: ConcurrencyPolicy | None = None
    priority: int = 0
    overwrite_cache: bool = False

    @field_serializer("concurrency")
    def _concurrency(self, policy: ConcurrencyPolicy | None) -> dict[str, Any] | None:
        """The policy's fields, leaving out the keyed ones while they are unset: a policy
        without a key serializes as it did before they existed, so its version (a digest of
        the spec) stays the same."""
        if policy is None:
            return None
        data: dict[str, Any] = {
            "max": policy.max,
            "behavior": policy.behavior.value,
            "max_pending": policy.max_pending,
        }
        if policy.key is not None:
            data.update(key=policy.key, key_max=dict(policy.key_max), total_max=policy.total_max)
        return data
