"""Value types of the resource manager, shared by the policy, the backends and the plugins."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal, NewType, Protocol

from sluice.errors import InvalidQuotaError

ResourceNamespace = NewType("ResourceNamespace", str)
NAMESPACE_SEPARATOR = ":"


def sub_namespace(parent: str, child: str) -> ResourceNamespace:
    """`parent:child`, as Flyte's CreateSubNamespace."""
    return ResourceNamespace(f"{parent}{NAMESPACE_SEPARATOR}{child}")


class AllocationStatus(enum.IntEnum):
    UNDEFINED = 0
    GRANTED = 1
    EXHAUSTED = 2
    """The namespace's global quota has no room left (or older waiters that could take it
    now, or overdue ones, come first)."""
    NAMESPACE_QUOTA_EXCEEDED = 3
    """Global room is left but the project or project/domain cap is reached."""


@dataclass(frozen=True)
class ResourceConstraintsSpec:
    """Caps below the global quota: per project, and per project/domain ("namespace scope")."""

    project_scope: int | None = None
    namespace_scope: int | None = None

    def __post_init__(self) -> None:
        for name in ("project_scope", "namespace_scope"):
            value = getattr(self, name)
            if value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidQuotaError(
                    f"ResourceConstraintsSpec {name} must be an int >= 1 or None, got {value!r}"
                )


Scope = Literal["global", "project", "namespace", "other", ""]
"""Which cap refuses a claim: the namespace's quota ("global"), the project cap, the
project/domain cap (Flyte's "namespace" scope), a cap of another namespace of the same claim
("other", only on waiters), or none ("")."""


@dataclass(frozen=True)
class Claim:
    """`units` tokens of one namespace, with optional per-project and per-project/domain caps.

    `default_quota` is the quota of a namespace created on the fly (a lock name) when no quota
    is stored for it; a stored one (plugin, config, operator) wins.
    """

    namespace: str
    units: int = 1
    constraints: ResourceConstraintsSpec | None = None
    default_quota: int | None = None


@dataclass(frozen=True)
class Holder:
    """Who claims: the scope the caps count in, and where the claim comes from."""

    project: str
    domain: str
    execution_id: str = ""
    node_id: str = ""
    priority: int = 0
    """Breaks ties between waiters that first asked at the same time; higher goes first."""


@dataclass(frozen=True)
class Victim:
    """A holder marked for preemption: who, where, and by whom."""

    namespace: str
    token: str
    execution_id: str
    node_id: str
    priority: int
    preempter: str
    preempter_execution: str = ""
    preempter_node: str = ""
    preempter_priority: int = 0

    def describe(self) -> str:
        """The victim, for the preempter's event."""
        who = _who(self.execution_id, self.node_id, self.token)
        return f"{who} (priority {self.priority}) in {self.namespace}"

    def describe_preempter(self) -> str:
        """The preempter, for the victim's event."""
        who = _who(self.preempter_execution, self.preempter_node, self.preempter)
        return f"{who} (priority {self.preempter_priority}) in {self.namespace}"


def _who(execution_id: str, node_id: str, token: str) -> str:
    return f"{execution_id}/{node_id}" if execution_id else token


@dataclass(frozen=True)
class AllocationResult:
    """The answer to an allocation; for a refusal, what blocks it and where the claim waits."""

    status: AllocationStatus
    namespace: str | None = None
    scope: Scope = ""
    in_use: int = 0
    limit: int = 0
    position: int = 0
    """1-based rank among the blocking namespace's waiters; 0 when granted."""
    preempting: tuple[Victim, ...] = ()
    """On a refusal where preemption is on: the holders marked to make room for this claim
    (new or not); they stop, and the room they free goes to it."""

    @property
    def granted(self) -> bool:
        return self.status is AllocationStatus.GRANTED

    def reason(self) -> str:
        """A waiting task's reason, e.g. "waiting for warehouse: 2/2 in use, position 3"."""
        if self.granted:
            return ""
        cap = {"project": "project cap ", "namespace": "project/domain cap "}.get(self.scope, "")
        usage = f"{cap}{self.in_use}/{self.limit} in use"
        if self.scope == "global" and self.in_use < self.limit:
            usage += ", older claims first"
        waiting = f"waiting for {self.namespace}: {usage}, position {self.position}"
        if self.preempting:
            waiting += f", preempting {', '.join(v.describe() for v in self.preempting)}"
        return waiting

    @classmethod
    def of_waiter(cls, snapshot: NamespaceSnapshot, waiter: WaiterInfo) -> AllocationResult:
        """The refusal a waiter last got, rebuilt from a snapshot."""
        scope = waiter.blocking_scope
        if scope == "project":
            held = sum(h.units for h in snapshot.holders if h.project == waiter.project)
            in_use, limit = held, waiter.project_cap or 0
        elif scope == "namespace":
            held = sum(
                h.units
                for h in snapshot.holders
                if (h.project, h.domain) == (waiter.project, waiter.domain)
            )
            in_use, limit = held, waiter.domain_cap or 0
        else:
            in_use, limit = snapshot.in_use, snapshot.quota or 0
        status = (
            AllocationStatus.NAMESPACE_QUOTA_EXCEEDED
            if scope in ("project", "namespace")
            else AllocationStatus.EXHAUSTED
        )
        return cls(status, snapshot.namespace, scope, in_use, limit, waiter.position)


@dataclass(frozen=True)
class HolderInfo:
    token: str
    project: str
    domain: str
    execution_id: str
    node_id: str
    units: int
    since: float
    lease_expires_at: float


@dataclass(frozen=True)
class WaiterInfo:
    position: int
    token: str
    project: str
    domain: str
    execution_id: str
    node_id: str
    units: int
    priority: int
    project_cap: int | None
    domain_cap: int | None
    since: float
    """When the claim was first refused."""
    expires_at: float
    """When the waiter drops out unless it asks again."""
    blocking_scope: Scope


QuotaSource = Literal["operator", "config", "plugin", "default"]
QUOTA_SOURCES: tuple[QuotaSource, ...] = ("operator", "config", "plugin", "default")
"""Highest precedence first."""


@dataclass(frozen=True)
class NamespaceSnapshot:
    """What `sluice quota ls` shows for one namespace."""

    namespace: str
    quota: int | None
    quota_source: QuotaSource | None
    in_use: int
    holders: tuple[HolderInfo, ...] = ()
    waiters: tuple[WaiterInfo, ...] = ()
    quotas: tuple[tuple[QuotaSource, int], ...] = ()
    """Every source that sets a quota here, highest precedence first."""


class ResourceRegistrar(Protocol):
    """What a plugin gets at load time to declare the quotas of its namespaces."""

    def register_resource_quota(self, namespace: str, quota: int) -> None:
        """Declare `namespace` with `quota` tokens; operator config wins over this value."""
        ...


class ResourceManager(Protocol):
    """What a task's plugin gets at run time: claims and releases of tokens.

    `namespace` and `token` are the plugin's own names; the engine qualifies them (plugin id,
    execution) before they reach a backend.
    """

    async def allocate_resource(
        self,
        namespace: str,
        token: str,
        constraints: ResourceConstraintsSpec | None = None,
        units: int = 1,
    ) -> AllocationStatus:
        """Claim `units` tokens; idempotent for a held token. GRANTED, or a refusal status."""
        ...

    async def release_resource(self, namespace: str, token: str) -> None:
        """Give the token back; releasing an unknown token is a no-op."""
        ...

    async def explain(self, namespace: str, token: str) -> str:
        """Why `token` is not granted, for a waiting task's reason, e.g.
        "waiting for hive:default: 2/2 in use, position 3"; "" when it holds the token."""
        ...


class NoopResourceManager:
    """Grants everything; for plugins run without quotas (Flyte's noop manager)."""

    async def allocate_resource(
        self,
        namespace: str,
        token: str,
        constraints: ResourceConstraintsSpec | None = None,
        units: int = 1,
    ) -> AllocationStatus:
        return AllocationStatus.GRANTED

    async def release_resource(self, namespace: str, token: str) -> None:
        return None

    async def explain(self, namespace: str, token: str) -> str:
        return ""
