"""kill -9 of the engine in the middle of a map task and of a dynamic workflow: a restarted
engine resumes the children from the store. No child that had succeeded runs again (the
children in flight at the kill may, as any task), the map's bound holds across the restart,
and a dynamic task's workflow is not built twice."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.crash import ROOT, env, kill_9, query, run_engine_until, sluice, wait

FLOWS = Path(__file__).parent / "compound_flows.py"


def _runs(work: Path, name: str) -> int:
    path = work / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def _succeeded(db: Path, pattern: str) -> set[str]:
    rows = query(
        db,
        "SELECT node_id FROM node_executions "
        f"WHERE node_id LIKE '{pattern}' AND phase = 'SUCCEEDED'",
    )
    return {str(r[0]) for r in rows}


def _event_spans(db: Path, pattern: str) -> dict[str, tuple[float, float, list[str]]]:
    """Per child: (first event time, last event time, phases in order) from the history."""
    rows = query(
        db,
        "SELECT node_id, occurred_at, phase FROM events "
        f"WHERE node_id LIKE '{pattern}' ORDER BY id",
    )
    spans: dict[str, tuple[float, float, list[str]]] = {}
    for node, at, phase in rows:
        first, _, phases = spans.get(str(node), (float(str(at)), 0.0, []))
        spans[str(node)] = (first, float(str(at)), [*phases, str(phase)])
    return spans


def _peak(spans: dict[str, tuple[float, float, list[str]]]) -> int:
    edges = sorted([(a, 1) for a, _, _ in spans.values()] + [(b, -1) for _, b, _ in spans.values()])
    active = peak = 0
    for _, step in sorted(edges, key=lambda e: (e[0], e[1])):
        active += step
        peak = max(peak, active)
    return peak


def _execution(db: Path) -> tuple[str, str, str]:
    rows = query(db, "SELECT id, phase, outputs FROM executions")
    return (str(rows[0][0]), str(rows[0][1]), str(rows[0][2])) if rows else ("", "", "")


def test_kill_9_mid_map_resumes_without_rerunning_succeeded_items(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    xs = list(range(12))
    inputs = [f"xs={json.dumps(xs)}", f"directory={work}", "delay=0.4"]
    run = sluice(["run", f"{FLOWS}:mapped", *[a for i in inputs for a in ("--input", i)]], db, 4)
    try:
        wait(lambda: len(_succeeded(db, "map_work[%")) >= 4)
        kill_9(run)
    finally:
        if run.poll() is None:
            run.kill()
    done_at_kill = _succeeded(db, "map_work[%")
    killed_at = max(s[1] for s in _event_spans(db, "map_work[%").values())
    assert _execution(db)[1] == "RUNNING"

    run_engine_until(db, lambda: _execution(db)[1] == "SUCCEEDED", workers=4)

    assert json.loads(_execution(db)[2]) == {"o0": [x * x for x in xs]}
    for node in done_at_kill:
        index = int(node.removeprefix("map_work[").rstrip("]"))
        assert _runs(work, f"item{index}") == 1, f"{node} had succeeded and ran again"
    assert all(_runs(work, f"item{x}") >= 1 for x in xs)
    spans = _event_spans(db, "map_work[%")
    assert len(spans) == len(xs)
    for node in done_at_kill:
        _, last, phases = spans[node]
        assert last <= killed_at and phases.count("SUCCESS") == 1, (node, phases)
    assert _peak(spans) <= 3, "the map's concurrency bound was exceeded in the history"
    assert max(_runs(work, f"item{x}") for x in xs) <= 2


def test_kill_9_mid_dynamic_resumes_its_built_workflow(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    inputs = ["n=6", f"directory={work}", "delay=0.4"]
    run = sluice(["run", f"{FLOWS}:dynamic_fan", *[a for i in inputs for a in ("--input", i)]], db)
    try:
        wait(lambda: len(_succeeded(db, "fan.work%")) >= 2)
        kill_9(run)
    finally:
        if run.poll() is None:
            run.kill()
    done_at_kill = _succeeded(db, "fan.work%")
    assert _succeeded(db, "fan:build") == {"fan:build"}
    assert _execution(db)[1] == "RUNNING"

    run_engine_until(db, lambda: _execution(db)[1] == "SUCCEEDED")

    execution_id, _, outputs = _execution(db)
    assert json.loads(outputs) == {"o0": sum(i * i for i in range(6))}
    assert _runs(work, "build") == 1, "the dynamic task's workflow was built again"
    ran = {f"fan.work{'' if i == 0 else f'-{i + 1}'}": _runs(work, f"item{i}") for i in range(6)}
    assert all(ran[node] == 1 for node in done_at_kill), ran
    shown = subprocess.run(
        [sys.executable, "-m", "sluice", "executions", "show", execution_id, "--json"],
        env=env(db),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    nodes = {n["node"]: n for n in json.loads(shown.stdout)["nodes"]}
    assert {n for n, v in nodes.items() if v["parent"] == "fan"} == {"fan:build", *ran, "fan.total"}
    assert all(v["phase"] == "SUCCEEDED" for v in nodes.values())


def test_kill_9_mid_launch_plan_node_resumes_its_one_child_execution(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    run = sluice(["run", f"{FLOWS}:calls_a_slow_plan", "--input", f"directory={work}"], db)
    try:
        wait(lambda: _runs(work, "nap3") == 1)
        kill_9(run)
    finally:
        if run.poll() is None:
            run.kill()
    assert len(query(db, "SELECT id FROM executions")) == 2

    def parent_phase() -> str:
        rows = query(db, "SELECT phase FROM executions WHERE launch_plan IS NULL")
        return str(rows[0][0]) if rows else ""

    run_engine_until(db, lambda: parent_phase() == "SUCCEEDED")

    rows = query(db, "SELECT launch_plan, phase, outputs FROM executions ORDER BY id")
    assert [(r[0], r[1]) for r in rows] == [
        (None, "SUCCEEDED"),
        ("compound_flows.slow_plan", "SUCCEEDED"),
    ], "one child execution, not a second one after the restart"
    assert json.loads(str(rows[0][2])) == {"o0": 30}
    assert _runs(work, "nap3") <= 2  # in flight at the kill: it may run once more


def test_a_crash_after_creating_the_child_execution_does_not_create_a_second(
    tmp_path: Path,
) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    script = (
        "import sys; from sluice import faults, main; "
        "faults.install(faults.KillAt.parse('compound.after_child_execution')); "
        "sys.exit(main(sys.argv[1:]))"
    )
    target = f"{FLOWS}:calls_a_slow_plan"
    died = subprocess.run(
        [sys.executable, "-c", script, "run", target, "--input", f"directory={work}"],
        env=env(db),
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert died.returncode == -9, died.stderr
    node = query(db, "SELECT plugin_state FROM node_executions WHERE node_id = 'slow_plan'")
    assert node == [(None,)], "the node's state was not saved: the restart must find the child"

    def parent_phase() -> str:
        rows = query(db, "SELECT phase FROM executions WHERE launch_plan IS NULL")
        return str(rows[0][0]) if rows else ""

    run_engine_until(db, lambda: parent_phase() == "SUCCEEDED")
    children = query(db, "SELECT id FROM executions WHERE launch_plan IS NOT NULL")
    assert len(children) == 1, children
    assert _runs(work, "nap3") == 1
