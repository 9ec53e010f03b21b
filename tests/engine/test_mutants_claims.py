"""Tests written against mutants of the engine's claims gate (docs/mutation.md): what
ClaimsGate asks of the resource manager and records in the node, on a fake manager and
stand-ins for the execution and the node. In process; no engine or store."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from sluice.clock import FakeClock
from sluice.engine.claims import ClaimsGate
from sluice.errors import InputError, SluiceError
from sluice.plugins.core.phase import Phase
from sluice.resources import AllocationResult, AllocationStatus, Claim, Holder
from sluice.spec.models import Claims, LockSpec, Quota, TaskMetadata, TaskSpec
from sluice.store.records import NodeRecord

TOKEN = "ex:proj:dev:ex1-n1@1"


@dataclass
class FakeManager:
    result: AllocationResult | Exception = field(
        default_factory=lambda: AllocationResult(AllocationStatus.GRANTED)
    )
    holding: dict[str, frozenset[str]] = field(default_factory=dict)
    allocated: list[tuple[str, list[Claim], Holder]] = field(default_factory=list)
    released: list[tuple[str, list[str]]] = field(default_factory=list)
    renewed: list[tuple[str, list[str]]] = field(default_factory=list)
    transferred: list[tuple[str, str, list[str]]] = field(default_factory=list)
    fail_release: bool = False

    async def allocate(self, token: str, claims: list[Claim], holder: Holder) -> AllocationResult:
        self.allocated.append((token, list(claims), holder))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    async def release(self, token: str, namespaces: list[str]) -> None:
        self.released.append((token, list(namespaces)))
        if self.fail_release:
            raise SluiceError("down")

    async def renew(self, token: str, namespaces: list[str]) -> frozenset[str]:
        self.renewed.append((token, list(namespaces)))
        return self.holding.get(token, frozenset())

    async def transfer(self, old: str, new: str, namespaces: list[str]) -> frozenset[str]:
        moved = self.holding.pop(old, frozenset()) & frozenset(namespaces)
        self.holding[new] = self.holding.get(new, frozenset()) | moved
        self.transferred.append((old, new, sorted(moved)))
        return moved

    async def preempted(self, token: str, namespaces: list[str]) -> tuple[object, ...]:
        return ()  # no namespace here preempts (tests/engine/test_preemption.py does)


@dataclass
class FakeNode:
    record: NodeRecord
    task: TaskSpec
    lock_names: frozenset[str] | None = frozenset()

    @property
    def id(self) -> str:
        return self.record.node_id


@dataclass
class FakeExecution:
    record: Any = field(
        default_factory=lambda: SimpleNamespace(
            project="proj", domain="dev", id="ex1", owner_epoch=1
        )
    )
    events: list[Any] = field(default_factory=list)
    changed: int = 0

    @property
    def id(self) -> str:
        return str(self.record.id)

    def mark_changed(self, node: Any) -> None:
        assert node.id == "n1"
        self.changed += 1


def capacity(name: str) -> int:
    return 5 if name == "pool" else 3


def gate(manager: FakeManager, waits: list[Any] | None = None) -> tuple[ClaimsGate, list[Any]]:
    found: list[Any] = [] if waits is None else waits

    def wait_on(namespaces: Any, execution_id: str, node_id: str, token: str | None) -> None:
        found.append((list(namespaces), execution_id, node_id, token))

    return ClaimsGate(manager, capacity, wait_on, FakeClock(100.0)), found  # type: ignore[arg-type]


def node(*quotas: Quota, locks: frozenset[str] = frozenset(), priority: int = 0) -> FakeNode:
    task = TaskSpec(
        name="t",
        version="1",
        metadata=TaskMetadata(priority=priority),
        claims=Claims(quotas=quotas),
    )
    return FakeNode(NodeRecord(execution_id="ex1", node_id="n1", attempt=2), task, locks)


async def test_a_node_without_claims_asks_nothing() -> None:
    manager = FakeManager()
    claims, waits = gate(manager)
    assert await claims.acquire(FakeExecution(), node()) == (None, None)  # type: ignore[arg-type]
    assert (manager.allocated, waits) == ([], [])


async def test_a_granted_claim_is_recorded_with_its_token_and_an_event() -> None:
    manager = FakeManager()
    claims, waits = gate(manager)
    ex, n = FakeExecution(), node(Quota("gpu", 2), locks=frozenset({"b", "a"}), priority=4)
    assert await claims.acquire(ex, n) == (None, None)  # type: ignore[arg-type]
    [(token, asked, holder)] = manager.allocated
    assert token == TOKEN
    assert asked == [
        Claim("gpu", 2),
        Claim("lock:a", 1, default_quota=3),
        Claim("lock:b", 1, default_quota=3),
    ]
    assert holder == Holder("proj", "dev", "ex1", "n1", 4)
    assert n.record.claims == {"token": TOKEN, "namespaces": ["gpu", "lock:a", "lock:b"]}
    assert ex.changed == 1
    [event] = ex.events
    assert (event.execution_id, event.node_id) == ("ex1", "n1")
    assert (event.phase, event.attempt, event.occurred_at) == ("GRANTED", 2, 100.0)
    assert (event.reason, event.info) == (
        "gpu lock:a lock:b",
        {"namespaces": ["gpu", "lock:a", "lock:b"]},
    )
    assert waits == []


async def test_a_claim_refused_on_a_quota_waits_in_the_manager() -> None:
    refusal = AllocationResult(AllocationStatus.EXHAUSTED, "gpu", "global", 2, 2, 1)
    manager = FakeManager(result=refusal)
    claims, waits = gate(manager)
    info, lock = await claims.acquire(FakeExecution(), node(Quota("gpu")))  # type: ignore[arg-type]
    assert info is not None and info.phase is Phase.WAITING_FOR_RESOURCES
    assert (info.version, info.reason) == (0, refusal.reason())
    assert lock is None
    assert manager.released == []  # still queued in the manager
    assert waits == [(["gpu"], "ex1", "n1", TOKEN)]


async def test_a_claim_refused_on_a_lock_withdraws_from_the_managers_queues() -> None:
    refusal = AllocationResult(AllocationStatus.EXHAUSTED, "lock:db", "global", 1, 1, 1)
    manager = FakeManager(result=refusal, fail_release=True)  # a failed withdrawal is fine
    claims, waits = gate(manager)
    n = node(Quota("gpu"), locks=frozenset({"db"}))
    info, lock = await claims.acquire(FakeExecution(), n)  # type: ignore[arg-type]
    assert info is not None and lock == "db"
    assert manager.released == [(TOKEN, ["gpu", "lock:db"])]
    assert waits == [(["gpu", "lock:db"], "ex1", "n1", TOKEN)]
    assert n.record.claims is None


async def test_a_bad_claim_fails_permanently_and_an_unreachable_manager_waits() -> None:
    claims, waits = gate(FakeManager(result=InputError("no such namespace")))
    info, _ = await claims.acquire(FakeExecution(), node(Quota("gpu")))  # type: ignore[arg-type]
    assert info is not None and info.phase is Phase.PERMANENT_FAILURE
    assert info.error is not None
    assert (info.error.code, info.error.message) == ("BadClaim", "no such namespace")
    assert waits == []
    claims, waits = gate(FakeManager(result=SluiceError("down")))
    info, _ = await claims.acquire(FakeExecution(), node(Quota("gpu")))  # type: ignore[arg-type]
    assert info is not None and info.phase is Phase.WAITING_FOR_RESOURCES
    assert (info.version, info.reason) == (0, "resource manager unavailable: down")
    assert waits == [(["gpu"], "ex1", "n1", None)]


async def test_release_gives_back_the_claim_and_plugin_tokens_and_withdraws_plugin_waits() -> None:
    manager = FakeManager(fail_release=True)  # a lost release goes on with the next one
    claims, _ = gate(manager)
    ex, n = FakeExecution(), node(Quota("gpu"))
    n.record.claims = {
        "token": TOKEN,
        "namespaces": ["gpu"],
        "plugin_tokens": [["pool", "p1@1"]],
        "plugin_waits": [["pool", "p2"]],
    }
    await claims.release(ex, n)  # type: ignore[arg-type]
    assert manager.released == [(TOKEN, ["gpu"]), ("p1@1", ["pool"]), ("p2", ["pool"])]
    assert n.record.claims is None
    assert ex.changed == 1
    [event] = ex.events
    assert (event.execution_id, event.node_id) == ("ex1", "n1")
    assert (event.phase, event.reason) == ("RELEASED", "gpu")


async def test_release_of_a_node_that_never_held_withdraws_its_waiter_entries() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    ex, n = FakeExecution(), node(Quota("gpu"), locks=frozenset({"db"}))
    await claims.release(ex, n)  # type: ignore[arg-type]
    assert manager.released == [(TOKEN, ["gpu", "lock:db"])]
    assert (ex.events, ex.changed) == ([], 0)


async def test_release_of_a_node_without_claims_asks_nothing() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    await claims.release(FakeExecution(), node())  # type: ignore[arg-type]
    assert manager.released == []


async def test_renew_names_every_namespace_no_longer_held() -> None:
    manager = FakeManager(holding={TOKEN: frozenset({"gpu"}), "p1@1": frozenset()})
    claims, _ = gate(manager)
    held = {"token": TOKEN, "namespaces": ["gpu", "lock:db"], "plugin_tokens": [["pool", "p1@1"]]}
    assert await claims.renew(held) == ["lock:db (ex:proj:dev:ex1-n1@1)", "pool (p1@1)"]
    assert manager.renewed == [(TOKEN, ["gpu", "lock:db"]), ("p1@1", ["pool"])]


async def test_reverify_allocates_again_and_renews_plugin_tokens() -> None:
    manager = FakeManager(holding={"p1@1": frozenset({"pool"})})
    claims, _ = gate(manager)
    ex, n = FakeExecution(), node(Quota("gpu"))
    n.record.claims = {"plugin_tokens": [["pool", "p1@1"]]}
    assert await claims.reverify(ex, n) is None  # type: ignore[arg-type]
    assert [a[0] for a in manager.allocated] == [TOKEN]
    assert manager.allocated[0][2] == Holder("proj", "dev", "ex1", "n1", 0)
    assert n.record.claims == {
        "plugin_tokens": [["pool", "p1@1"]],
        "token": TOKEN,
        "namespaces": ["gpu"],
    }
    assert ex.changed == 1
    assert manager.renewed == [("p1@1", ["pool"])]


async def test_reverify_says_why_when_something_is_lost() -> None:
    refusal = AllocationResult(AllocationStatus.EXHAUSTED, "gpu", "global", 1, 1, 1)
    claims, _ = gate(FakeManager(result=refusal))
    why = await claims.reverify(FakeExecution(), node(Quota("gpu")))  # type: ignore[arg-type]
    assert why == f"its claim is no longer held: {refusal.reason()}"
    claims, _ = gate(FakeManager(result=InputError("gone")))
    why = await claims.reverify(FakeExecution(), node(Quota("gpu")))  # type: ignore[arg-type]
    assert why == "its claim cannot be granted any more: gone"
    claims, _ = gate(FakeManager())
    lost = node()
    lost.record.claims = {"plugin_tokens": [["pool", "p1@1"]]}
    why = await claims.reverify(FakeExecution(), lost)  # type: ignore[arg-type]
    assert why == "its plugin's token p1@1 no longer holds pool"


async def test_reverify_of_a_node_loaded_after_a_crash_claims_its_locks_again() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    task = TaskSpec(name="t", version="1", claims=Claims(locks=(LockSpec(template="db/{table}"),)))
    n = FakeNode(NodeRecord(execution_id="ex1", node_id="n1", inputs={"table": "x"}), task, None)
    assert await claims.reverify(FakeExecution(), n) is None  # type: ignore[arg-type]
    assert n.lock_names == frozenset({"db/x"})
    [(_, asked, _)] = manager.allocated
    assert asked == [Claim("lock:db/x", 1, default_quota=3)]
    assert n.record.claims == {"token": TOKEN, "namespaces": ["lock:db/x"]}


async def test_reverify_of_a_claim_without_plugin_tokens_holds() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    assert await claims.reverify(FakeExecution(), node(Quota("gpu"))) is None  # type: ignore[arg-type]
    assert manager.renewed == []


async def test_a_lock_claim_takes_the_capacity_of_its_own_name() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    await claims.acquire(FakeExecution(), node(locks=frozenset({"pool", "db"})))  # type: ignore[arg-type]
    [(_, asked, _)] = manager.allocated
    assert asked == [Claim("lock:db", 1, default_quota=3), Claim("lock:pool", 1, default_quota=5)]


def _locked_node(inputs: dict[str, Any]) -> FakeNode:
    task = TaskSpec(
        name="t",
        version="1",
        claims=Claims(quotas=(Quota("gpu"),), locks=(LockSpec(template="db/{table}"),)),
    )
    return FakeNode(NodeRecord(execution_id="ex1", node_id="n1", inputs=inputs), task, None)


async def test_release_of_a_node_loaded_after_a_crash_withdraws_its_lock_waits_too() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    await claims.release(FakeExecution(), _locked_node({"table": "x"}))  # type: ignore[arg-type]
    assert manager.released == [(TOKEN, ["gpu", "lock:db/x"])]


async def test_release_withdraws_the_quotas_when_lock_names_cannot_be_computed() -> None:
    manager = FakeManager()
    claims, _ = gate(manager)
    await claims.release(FakeExecution(), _locked_node({}))  # type: ignore[arg-type]
    assert manager.released == [(TOKEN, ["gpu"])]


async def test_reverify_takes_over_the_tokens_of_an_earlier_ownership_epoch() -> None:
    """A takeover is a new epoch: the claim's and the plugin's tokens recorded under the
    earlier epoch's names are transferred (keeping their room) before the claim is asked
    again, and what could not be taken over is given back."""
    old_token = TOKEN.replace("@1", "@0")
    manager = FakeManager(holding={old_token: frozenset({"gpu"}), "p1@0": frozenset()})
    claims, _ = gate(manager)
    ex, n = FakeExecution(), node(Quota("gpu"))
    n.record.claims = {
        "token": old_token,
        "namespaces": ["gpu"],
        "plugin_tokens": [["pool", "p1@0"]],
    }
    assert await claims.reverify(ex, n) is None  # type: ignore[arg-type]
    assert manager.transferred == [(old_token, TOKEN, ["gpu"]), ("p1@0", "p1@1", [])]
    assert manager.released == [("p1@0", ["pool"])]  # lapsed meanwhile: given back
    assert n.record.claims["token"] == TOKEN
    assert n.record.claims.get("plugin_tokens", []) == []
