"""What the service returns: typed views that every adapter renders (the CLI as tables and
`--json`, the HTTP API as JSON with its OpenAPI schema, the web UI as pages).

Times are UTC datetimes, so JSON carries ISO-8601 strings. Attempts are numbered from 1 here,
as users count them (the store counts from 0).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, computed_field

T = TypeVar("T")


def utc(timestamp: float | None) -> datetime | None:
    """A store timestamp (seconds since the epoch) as an aware UTC datetime."""
    return None if timestamp is None else datetime.fromtimestamp(timestamp, UTC)


class View(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # built on first use


class Page(View, Generic[T]):
    """One page of a listing; `next_cursor` fetches the next one (None: this is the last),
    `prev_cursor` the one before (None: this is the first)."""

    items: list[T]
    next_cursor: str | None = None
    prev_cursor: str | None = None
    total: int | None = None
    """How many items the listing's filters select, on every page."""


class ExecutionSummary(View):
    id: str
    project: str
    domain: str
    workflow: str
    launch_plan: str | None = None
    launch_plan_version: str | None = None
    phase: str
    reason: str = ""
    priority: int = 0
    created_at: datetime
    started_at: datetime | None = None
    ended_at: datetime | None = None
    duration: float | None = None
    """Seconds from start to end (or to now while running); None before it starts."""
    position: int | None = None
    """A PENDING execution's place in its launch plan's queue (1 = next), in its key's queue
    under a keyed policy."""
    owner: str | None = None
    concurrency_key: str | None = None
    """The key a keyed concurrency policy gave it (None without one)."""
    backfill_id: str | None = None
    """The backfill that created it, if one did."""
    scheduled_at: datetime | None = None
    """The schedule slot it runs (a schedule firing's or a backfill's), if any."""


class Launched(View):
    """A create's answer: the execution, and whether its idempotency key had created it
    already (`replayed`: nothing new was written; the HTTP API answers 200, not 201)."""

    execution: ExecutionSummary
    replayed: bool = False


class Attempt(View):
    """One attempt of a node, from service/attempts.py: never its last event (a claim's
    RELEASED comes after the task's end), always its own start, end, phase and error."""

    attempt: int
    """1 for the first attempt."""
    phase: str
    """How the attempt ended (SUCCESS, RETRYABLE_FAILURE, PERMANENT_FAILURE, ABORTED), or the
    task phase it is in now while it is live: always a task phase, never a claim event."""
    first_seen_at: datetime | None = None
    """When the attempt was first reported (waiting for quotas, locks or the cache included)."""
    started_at: datetime | None = None
    """When its task started (after its waits); None if it never did."""
    ended_at: datetime | None = None
    """None while it is live (or if it never reported an end)."""
    duration: float | None = None
    """Seconds from start to end; None while it runs or if it never started."""
    reason: str = ""
    error: dict[str, Any] | None = None
    """The failure of a failed attempt (code, message, kind); None otherwise."""
    live: bool = False
    """The node's current attempt, not ended yet."""
    log_bytes: int | None = None
    """Bytes of log stored for the attempt; None when no log was kept."""


class Event(View):
    id: int | None = None
    execution_id: str
    node_id: str = ""
    attempt: int
    """1 for the first attempt (0 for events of the execution itself)."""
    phase: str
    phase_version: int = 0
    reason: str = ""
    occurred_at: datetime
    info: dict[str, Any] | None = None


_HELD_BACK_BY = {
    "project": "the project's cap on this quota",
    "namespace": "the project/domain cap on this quota",
    "other": "another quota or lock of the same claim",
}


def held_back_by(scope: str, in_use: int = 0, quota: int | None = None) -> str:
    """What keeps a waiter waiting, in words: the resource manager's blocking scope
    (`global`, `project`, `namespace`, `other`, or "" for an older record) read out."""
    if scope in _HELD_BACK_BY:
        return _HELD_BACK_BY[scope]
    if quota is not None and in_use < quota:
        return "older claims go first"
    return "every unit is in use"


class Wait(View):
    """A quota a node waits for, as it is now (not as it was when last refused). Its
    position comes from the resource manager's snapshot of the namespace, the one ranking
    every surface shows (service/waits.py)."""

    namespace: str
    in_use: int
    quota: int | None
    holders: list[str]
    """`execution/node` of each holder."""
    position: int
    """1 for the next waiter to be granted."""
    blocking_scope: str = ""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def held_back_by(self) -> str:
        return held_back_by(self.blocking_scope, self.in_use, self.quota)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def text(self) -> str:
        """`waiting for warehouse: 2/2 in use (held by x1/extract, x2/load), position 3`."""
        held = f" (held by {', '.join(self.holders)})" if self.holders else ""
        scope = self.blocking_scope
        why = f", held back by {self.held_back_by}" if scope in _HELD_BACK_BY else ""
        return (
            f"waiting for {self.namespace}: {self.in_use}/{self.quota} in use{held}, "
            f"position {self.position}{why}"
        )


class NodeExecution(View):
    node: str
    task: str
    parent: str | None = None
    """The map or dynamic node that created this one when it ran (None for a workflow's own)."""
    phase: str
    task_phase: str
    """What the node is doing now: the plugin's phase while RUNNING, else the node's phase."""
    attempt: int
    """1 for the first attempt."""
    reason: str = ""
    cache_status: str
    reservation_status: str
    depends_on: list[str] = []
    inputs: dict[str, Any] | None = None
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    locks: list[str] = []
    started_at: datetime | None = None
    ended_at: datetime | None = None
    updated_at: datetime | None = None
    attempts: list[Attempt] = []
    waiting_for: list[Wait] = []
    """While the node waits for quotas or locks: each one, with its holders and the node's
    position now (the stored `reason` says what it was when last refused)."""
    truncated: list[str] = []
    """Which of inputs, outputs and error were cut for this view (`payloads.shown_value_chars`):
    GET .../nodes/{node}/values/{inputs|outputs} has the whole value."""

    @computed_field  # type: ignore[prop-decorator]
    @property
    def live_reason(self) -> str:
        """The reason as it is now: the waits when there are some, else the stored reason."""
        return "; ".join(w.text for w in self.waiting_for) or self.reason


class Execution(ExecutionSummary):
    inputs: dict[str, Any]
    outputs: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    nodes: list[NodeExecution] = []
    events: list[Event] = []
    truncated: list[str] = []
    """Which of inputs, outputs and error were cut for this view: GET .../values/{inputs|outputs}
    has the whole value."""
    relaunch_of: str | None = None
    """The execution this one relaunched (same inputs, maybe edited)."""
    retry_of: str | None = None
    """The failed execution this one retries from its failed nodes (the others reused)."""


class LaunchPlan(View):
    project: str
    domain: str
    name: str
    version: str
    state: str
    workflow: str
    concurrency: dict[str, Any] | None = None
    schedule: dict[str, Any] | None = None
    priority: int = 0
    default_inputs: dict[str, Any] = {}
    fixed_inputs: dict[str, Any] = {}
    created_at: datetime
    updated_at: datetime
    next_firings: list[datetime] = []
    """The next nominal firings of an ACTIVE scheduled version."""


class Holder(View):
    token: str
    project: str
    domain: str
    execution_id: str
    node_id: str
    units: int
    since: datetime
    lease_expires_at: datetime


class Waiter(View):
    position: int
    token: str
    project: str
    domain: str
    execution_id: str
    node_id: str
    units: int
    priority: int
    since: datetime
    blocking_scope: str = ""
    """The resource manager's word for what holds it back: global (the quota), project or
    namespace (a cap), other (another namespace of its claim)."""
    held_back_by: str = ""
    """The same in words, for people."""


class Quota(View):
    namespace: str
    quota: int | None
    quota_source: str | None
    in_use: int
    holders: list[Holder] = []
    waiters: list[Waiter] = []
    quotas: list[tuple[str, int]] = []
    """Every source that sets a quota here, highest precedence first."""


class LockWaiter(View):
    node: str
    """`execution/node`."""
    reason: str


class Lock(View):
    lock: str
    capacity: int | None
    holders: list[str]
    """`execution/node` of each holder."""
    waiters: list[LockWaiter]


class CacheEntry(View):
    key: str
    task: str
    cache_version: str
    created_at: datetime
    execution: str
    node: str


class Reservation(View):
    key: str
    task: str
    owner: str
    """`execution/node` computing the result others wait for."""
    expires_in: float
    """Seconds until the reservation expires (negative: expired, not yet swept)."""
    waiters: list[str] = []
    """`execution/node` of each node waiting for this key."""


class Cap(View):
    scope: str
    config: int | None
    operator: int | None
    effective: int | None


class Leader(View):
    holder: str
    epoch: int
    acquired_at: datetime
    heartbeat_at: datetime | None = None


class PendingCount(View):
    project: str
    domain: str
    launch_plan: str | None
    pending: int


class ControllerStatus(View):
    live: bool
    leader: Leader | None
    pending: list[PendingCount]


class Plugin(View):
    id: str
    task_types: list[str]
    default: bool
    source: str
    loaded: bool
    why: str | None = None


class Health(View):
    ok: bool
    database: str
    schema_revision: str | None = None
    detail: str = ""


class Caller(View):
    """Who is calling, as the server knows it."""

    who: str
    """`token ci (1a2b...)`, `a local user`, or "" for the server's own process."""
    projects: list[str] | None
    """The projects it may see; None: all of them."""
    read_only: bool

    @computed_field  # type: ignore[prop-decorator]
    @property
    def may_write(self) -> bool:
        return not self.read_only


class Version(View):
    version: str
    registered_at: datetime


class CatalogueEntry(View):
    """A workflow or a task of a project/domain with its versions, newest first."""

    name: str
    versions: list[Version]


class Catalogue(View):
    project: str
    domain: str
    workflows: list[CatalogueEntry]
    tasks: list[CatalogueEntry]


class TaskView(View):
    name: str
    version: str
    type: str
    inputs: dict[str, str]
    """Name -> declared type."""
    outputs: dict[str, str]
    retries: int
    timeout: float | None = None
    cache: str
    """"off", or "version 1" (", serialized")."""
    quotas: list[str] = []
    """`namespace` or `namespace x units`."""
    locks: list[str] = []
    """Lock name templates (or the function computing them)."""


class WorkflowView(View):
    project: str
    domain: str
    name: str
    version: str
    versions: list[Version]
    inputs: dict[str, str]
    """Name -> declared type."""
    defaults: dict[str, Any] = {}
    outputs: dict[str, str]
    nodes: list[NodeExecution]
    """The graph: each node with the task it runs and what it depends on (nothing run)."""
    tasks: list[TaskView]
    launch_plans: list[str] = []
    """Launch plan names whose versions run this workflow."""
