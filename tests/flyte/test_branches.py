"""flytekit conditionals on sluice, end to end with the real flytekit: a branch node is a
dynamic node whose build picks the case; only the chosen case's node runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.flyte import FLOWS_ROOT, history, sluice

BRANCHES = FLOWS_ROOT / "flyteflows" / "branches.py"


def _run(db: Path, target: str, *args: str, work: Path | None = None) -> tuple[int, dict]:
    done = sluice(db, "run", f"{BRANCHES}:{target}", "--json", *args, work=work)
    found = json.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr}
    return done.returncode, found


@pytest.mark.parametrize(
    ("x", "y", "chosen", "output", "ran"),
    [
        (2, 0, "n1.n0", 4, ["inc", "inc"]),  # a = 3 > 2 and y == 0: inc(a)
        (-5, 3, "n1.n1", -3, ["inc", "neg"]),  # a = -4 < 0: neg(y)
        (1, 101, "n1.n1", -101, ["inc", "neg"]),  # a = 2, y > 100 (an OR): neg(y)
        (2, 1, "n1.n2", -3, ["inc", "neg"]),  # none holds: else, neg(a)
    ],
)
def test_a_branch_runs_the_first_case_whose_condition_holds(
    tmp_path: Path, x: int, y: int, chosen: str, output: int, ran: list[str]
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code, found = _run(tmp_path / "s.db", "signs", "-i", f"x={x}", "-i", f"y={y}", work=work)
    assert code == 0, found
    assert found["outputs"] == {"o0": output}
    nodes = [n["node"] for n in found["nodes"]]
    assert nodes == ["n0", "n1", "n1:build", chosen]  # no other case's node exists
    assert history(work) == ran


def test_a_sub_workflow_case_runs_inlined_and_feeds_the_next_node(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "guarded", "-i", "x=5")
    assert code == 0, found
    assert found["outputs"] == {"o0": -7}  # neg(twice(5))
    assert [n["node"] for n in found["nodes"]] == [
        "n0",
        "n0:build",
        "n0.n0-n0",
        "n0.n0-n1",
        "n1",
    ]


def test_an_else_fail_fails_the_branch_with_its_message(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code, found = _run(tmp_path / "s.db", "guarded", "-i", "x=-1", work=work)
    assert code != 0
    assert found["phase"] == "FAILED"
    branch = {n["node"]: n for n in found["nodes"]}["n0"]
    assert "x must be > 0" in branch["error"]["message"]
    assert history(work) == []  # no case ran, nor the node after the branch
