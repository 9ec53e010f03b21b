"""The workflow graph as boxes and edges for a server-rendered SVG: a layered layout where a
node's column is its longest path from a root (so every edge points right), and nodes in a
column are ordered by the mean row of their parents to keep edges short and crossings few."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sluice.service.models import NodeExecution

NODE_WIDTH = 168
NODE_HEIGHT = 40
COLUMN_GAP = 56
ROW_GAP = 16
MARGIN = 8
LABEL_CHARS = 20
"""Characters of a node name shown in its box; the full name is in the box's tooltip."""


@dataclass(frozen=True)
class Box:
    index: int
    node: NodeExecution
    x: int
    y: int

    @property
    def label(self) -> str:
        name = self.node.node
        return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"

    @property
    def state(self) -> str:
        """What colours the box: the task phase while running (waiting, queued...)."""
        return phase_class(self.node)


@dataclass(frozen=True)
class Edge:
    path: str
    state: str


@dataclass(frozen=True)
class Layout:
    boxes: list[Box]
    edges: list[Edge]
    width: int
    height: int


def state_of(node: NodeExecution) -> str:
    """What a node shows: the task's phase while it runs (a node waiting for a quota is
    WAITING_FOR_RESOURCES, not RUNNING), RETRYING while it waits for its next attempt."""
    if node.phase != "RUNNING":
        return node.phase
    if node.task_phase == "STARTING" and node.attempt > 1:
        return "RETRYING"
    return node.task_phase


def phase_class(node: NodeExecution) -> str:
    return state_of(node).lower().replace("_", "-")


def columns(nodes: Sequence[NodeExecution]) -> dict[str, int]:
    """Each node's column: 0 for a root, else one more than its furthest dependency."""
    known = {n.node: n for n in nodes}
    column: dict[str, int] = {}

    def place(name: str, visiting: frozenset[str]) -> int:
        if name not in column:
            parents = [p for p in known[name].depends_on if p in known and p not in visiting]
            column[name] = 1 + max((place(p, visiting | {name}) for p in parents), default=-1)
        return column[name]

    for node in nodes:
        place(node.node, frozenset())
    return column


def _ordered_columns(nodes: Sequence[NodeExecution]) -> list[list[NodeExecution]]:
    column = columns(nodes)
    count = 1 + max(column.values(), default=-1)
    grid = [[n for n in nodes if column[n.node] == c] for c in range(count)]
    row: dict[str, float] = {}
    for members in grid:
        members.sort(key=lambda n: _mean_parent_row(n, row))
        row.update({n.node: float(i) for i, n in enumerate(members)})
    return grid


def _mean_parent_row(node: NodeExecution, row: dict[str, float]) -> float:
    rows = [row[p] for p in node.depends_on if p in row]
    return sum(rows) / len(rows) if rows else 0.0


def layout(nodes: Sequence[NodeExecution]) -> Layout:
    grid = _ordered_columns(nodes)
    boxes: dict[str, Box] = {}
    index = {n.node: i for i, n in enumerate(nodes)}
    for c, members in enumerate(grid):
        for r, node in enumerate(members):
            x = MARGIN + c * (NODE_WIDTH + COLUMN_GAP)
            y = MARGIN + r * (NODE_HEIGHT + ROW_GAP)
            boxes[node.node] = Box(index[node.node], node, x, y)
    edges = [
        _edge(boxes[parent], box)
        for box in boxes.values()
        for parent in box.node.depends_on
        if parent in boxes
    ]
    rows = max((len(m) for m in grid), default=0)
    width = 2 * MARGIN + len(grid) * NODE_WIDTH + max(len(grid) - 1, 0) * COLUMN_GAP
    height = 2 * MARGIN + rows * NODE_HEIGHT + max(rows - 1, 0) * ROW_GAP
    ordered = sorted(boxes.values(), key=lambda b: b.index)
    return Layout(ordered, edges, width, height)


def _edge(source: Box, target: Box) -> Edge:
    """A cubic curve from the right side of `source` to the left side of `target`."""
    x1, y1 = source.x + NODE_WIDTH, source.y + NODE_HEIGHT // 2
    x2, y2 = target.x, target.y + NODE_HEIGHT // 2
    bend = (x2 - x1) // 2
    return Edge(f"M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}", source.state)
