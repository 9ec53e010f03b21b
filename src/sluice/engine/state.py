"""An execution held in memory by the engine that owns it: nodes, readiness, pending writes."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from sluice.engine.context import NodeContext
from sluice.plugins.core.phase import Phase
from sluice.resources.models import Holder
from sluice.spec.models import NodeSpec, TaskSpec, WorkflowSpec
from sluice.spec.phases import NodePhase
from sluice.spec.validate import dependencies
from sluice.store.records import EventRecord, ExecutionRecord, NodeRecord


@dataclass
class NodeState:
    spec: NodeSpec
    task: TaskSpec
    record: NodeRecord
    waiting_on: set[str]
    dependencies: frozenset[str] = frozenset()
    admitted: bool = False
    """Holds one of the engine's parallelism slots (from launch until terminal)."""
    queued: bool = False
    """Waits in the admission queue for a slot."""
    lock_names: frozenset[str] | None = None
    """Computed from the inputs when the node first asks for admission."""
    cache_key: str | None = None
    heartbeat_at: float | None = None
    """When the held cache reservation must be extended next."""
    waiting_since: float | None = None
    """When the node began waiting for someone else's reservation."""
    verified: bool = False
    """This engine launched the in-flight attempt itself, or has checked (since loading it, or
    since a renewal said a token lapsed) that the attempt still holds its tokens, locks and
    reservation. An unverified in-flight attempt is re-verified before any plugin call."""
    parent: str | None = None
    """The compound node (map, dynamic) that created this node at run time, if any."""
    children: list[str] = field(default_factory=list)
    """Of a compound node: the nodes it created, in creation order."""
    tally: Any = None
    """Of a map node: how its children stand (engine/compound.py), kept so a step looks at
    the active children only."""
    stored: bool = True
    """The store has this node's row (a child created at run time has none until persisted)."""
    context: NodeContext | None = None
    """What the plugin sees of the current attempt, kept for its calls (engine/invoker.py)."""

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def task_phase(self) -> Phase:
        return Phase(self.record.task_phase)


@dataclass
class ExecutionState:
    record: ExecutionRecord
    workflow: WorkflowSpec
    nodes: dict[str, NodeState]
    dependents: dict[str, list[str]]
    todo: set[str] = field(default_factory=set)
    changed: set[str] = field(default_factory=set)
    events: list[EventRecord] = field(default_factory=list)
    execution_changed: bool = False
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    dropped: bool = False
    """The engine no longer drives it (it ended, or another engine took it over): work still
    in flight for it (a step waiting on the store through a partition) must not launch."""
    _ended_prefix: int = field(default=0, init=False, repr=False)
    """How many nodes, in `nodes` order, are known terminal from the first on: a node's terminal
    phase is final and nodes are only ever added, so all_terminal resumes its scan there."""

    @property
    def id(self) -> str:
        return self.record.id

    @classmethod
    def build(
        cls, record: ExecutionRecord, workflow: WorkflowSpec, nodes: list[NodeRecord]
    ) -> ExecutionState:
        by_id = {n.node_id: n for n in nodes}
        states: dict[str, NodeState] = {}
        dependents: dict[str, list[str]] = {}
        for spec in workflow.nodes:
            deps = dependencies(spec)
            node_record = by_id.get(spec.id) or NodeRecord(record.id, spec.id)
            waiting = {
                d for d in deps if by_id.get(d) is None or by_id[d].phase is not NodePhase.SUCCEEDED
            }
            states[spec.id] = NodeState(
                spec, workflow.tasks[spec.task], node_record, waiting, frozenset(deps)
            )
            for dep in deps:
                dependents.setdefault(dep, []).append(spec.id)
        state = cls(record, workflow, states, dependents)
        state.todo = {n.id for n in states.values() if not n.record.phase.is_terminal}
        return state

    def mark_changed(self, node: NodeState) -> None:
        self.changed.add(node.id)

    def outputs_by_node(self) -> Mapping[str, Mapping[str, Any] | None]:
        return _SucceededOutputs(self.nodes)

    def all_terminal(self) -> bool:
        """Every node is terminal; amortised O(1) per call (the scan resumes at the first node
        not yet seen terminal), not O(nodes): a chain of N would otherwise cost O(N^2)."""
        for node in itertools.islice(self.nodes.values(), self._ended_prefix, None):
            if not node.record.phase.is_terminal:
                return False
            self._ended_prefix += 1
        return True


def node_holder(ex: ExecutionState, node: NodeState, priority: int = 0) -> Holder:
    """Who holds what a node claims, and what its plugin claims: the execution's project and
    domain (where the caps count), the execution and the node."""
    rec = ex.record
    return Holder(rec.project, rec.domain, rec.id, node.id, priority)


class _SucceededOutputs(Mapping[str, Mapping[str, Any] | None]):
    """Outputs of succeeded nodes, looked up on demand: binding one input must not cost a
    pass over every node of a wide fan-in."""

    def __init__(self, nodes: Mapping[str, NodeState]) -> None:
        self._nodes = nodes

    def __getitem__(self, node_id: str) -> Mapping[str, Any] | None:
        node = self._nodes[node_id]
        if node.record.phase is not NodePhase.SUCCEEDED:
            raise KeyError(node_id)
        return node.record.outputs

    def __iter__(self) -> Iterator[str]:
        return (k for k, n in self._nodes.items() if n.record.phase is NodePhase.SUCCEEDED)

    def __len__(self) -> int:
        return sum(1 for _ in self)
