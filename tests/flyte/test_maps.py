"""flytekit map tasks, sub-workflows and launch plans called as nodes, run end to end by
`sluice run` with the real flytekit: a map_task is sluice's map node (one child per item,
each through the flyte plugin), a sub-workflow is inlined, a launch plan node starts a child
execution."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

from support.flyte import FLOWS_ROOT, env, history, sluice

MAPS = FLOWS_ROOT / "flyteflows" / "maps.py"


def _run(db: Path, target: str, *args: str, work: Path | None = None) -> tuple[int, dict]:
    done = sluice(db, "run", f"{MAPS}:{target}", "--json", *args, work=work)
    found = json.loads(done.stdout) if done.stdout.strip() else {"stderr": done.stderr}
    return done.returncode, found


def _nodes(found: dict) -> dict[str, dict]:
    return {n["node"]: n for n in found["nodes"]}


def test_a_map_task_runs_each_item_with_the_partial_bound_input_fixed(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code, found = _run(tmp_path / "s.db", "mapped", work=work)
    assert code == 0, found
    assert found["outputs"] == {"o0": [10, 20, 30, 40, 50, 60]}  # factor=10 from the partial
    nodes = _nodes(found)
    assert sorted(nodes) == ["n0", *[f"n0[{i}]" for i in range(6)]]
    assert all(nodes[f"n0[{i}]"]["phase"] == "SUCCEEDED" for i in range(6))
    assert sorted(history(work)) == sorted(f"scale-{x}" for x in range(1, 7))


def test_a_cached_map_task_run_twice_hits_the_cache_for_every_item(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    first_code, first = _run(db, "mapped", "--input", "xs=[7, 8, 9, 10, 11]", work=work)
    second_code, second = _run(db, "mapped", "--input", "xs=[7, 8, 9, 10, 11]", work=work)
    assert (first_code, second_code) == (0, 0), (first, second)
    assert first["outputs"] == second["outputs"] == {"o0": [70, 80, 90, 100, 110]}
    items = [f"n0[{i}]" for i in range(5)]
    assert [_nodes(first)[i]["cache_status"] for i in items] == ["POPULATED"] * 5
    assert [_nodes(second)[i]["cache_status"] for i in items] == ["HIT"] * 5
    assert len(history(work)) == 5  # each item's body ran once, in the first run


def test_a_map_task_bound_by_its_concurrency(tmp_path: Path) -> None:
    # 4 engine workers and 4 flyte workers: only the map's concurrency=2 holds items back
    db, work, config = tmp_path / "s.db", tmp_path / "work", tmp_path / "sluice.toml"
    work.mkdir()
    config.write_text("[plugins.config.flyte]\nworkers = 4\n")
    inputs = ["-i", "xs=[1, 2, 3, 4, 5, 6]", "-i", "delay=0.3"]
    done = subprocess.run(
        [sys.executable, "-m", "sluice", "run", f"{MAPS}:slow_map", "--json", *inputs],
        env=env(db, work, SLUICE_ENGINE__WORKERS="4", SLUICE_CONFIG=str(config)),
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["outputs"] == {"o0": [1, 4, 9, 16, 25, 36]}
    active = peak = 0
    for event in history(work):
        active += 1 if event.startswith("start-") else -1
        peak = max(peak, active)
    assert peak <= 2, f"map_task(concurrency=2) ran {peak} items at once"
    assert len(history(work)) == 12


def test_a_failing_item_under_min_success_ratio_gives_none(tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    code, found = _run(tmp_path / "s.db", "tolerant", work=work)
    assert code == 0, found
    assert found["outputs"] == {"o0": [-1, -2, None, -4, -5]}  # item 2 (x=3) failed
    failed = _nodes(found)["n0[2]"]
    assert failed["phase"] == "FAILED"
    assert "picky refuses 3" in failed["error"]["message"]
    assert sorted(history(work)) == [f"picky-{x}" for x in range(1, 6)]


def test_min_success_ratio_counts_items_as_flyte_does(tmp_path: Path) -> None:
    # 0.6 of 5 is 3 (the proto's float32 0.6000000238 must not make it 4): 2 failures pass
    code, found = _run(tmp_path / "s.db", "tolerant", "-i", "xs=[3, 1, 3, 2, 4]")
    assert code == 0, found
    assert found["outputs"] == {"o0": [None, -1, None, -2, -4]}
    code, found = _run(tmp_path / "s.db", "tolerant", "-i", "xs=[3, 1, 3, 2, 3]")
    assert code != 0
    assert "3 of 5 items failed; 3 must succeed" in _nodes(found)["n0"]["error"]["message"]


def test_a_failing_item_fails_a_map_that_needs_every_item(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "strict")
    assert code != 0
    assert found["phase"] == "FAILED"
    error = _nodes(found)["n0"]["error"]
    assert error["code"] == "MapItemsFailed"
    assert "n0[2]" in error["message"] and "picky refuses 3" in error["message"]


def test_every_unbound_list_input_is_mapped_item_by_item(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "zipped", "-i", "a=[1, 2, 3]", "-i", 'b=["p", "q", "r"]')
    assert code == 0, found
    assert found["outputs"] == {"o0": ["p1", "q2", "r3"]}


def test_lists_of_different_lengths_fail_the_map_naming_the_input(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "zipped", "-i", "a=[1, 2, 3]", "-i", 'b=["p"]')
    assert code != 0
    assert "mapped input 'b' has 1 items, 'a' has 3" in _nodes(found)["n0"]["error"]["message"]


def test_a_sub_workflow_is_inlined_and_a_launch_plan_node_starts_a_child(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    code, found = _run(db, "outer", "-i", "x=1")
    assert code == 0, found
    assert found["outputs"] == {"o0": 5}  # 1 + 2 in the sub-workflow, + 2 in the launch plan's
    assert [n["node"] for n in found["nodes"]] == ["n0-n0", "n0-n1", "n1"]
    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT id, phase, launch_plan, inputs FROM executions").fetchall()
    child = [r for r in rows if r[0] != found["id"]]
    assert [(r[1], r[2]) for r in child] == [("SUCCEEDED", "inner_plan")], rows
    assert json.loads(child[0][3]) == {"x": 3, "y": 7}  # the fixed input joins the node's


def test_a_dynamic_task_builds_its_workflow_once_and_runs_it_as_children(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    code, found = _run(db, "dynamic_fan", "-i", "n=3", work=work)
    assert code == 0, found
    assert found["outputs"] == {"o0": [0, 4, 8]}  # factor = add_one(3), each then scaled by 1
    nodes = _nodes(found)
    assert {"n1:build", "n1.dn0", "n1.dn1", "n1.dn2", "n1.dn3"} <= set(nodes)
    assert [nodes[f"n1.dn3[{i}]"]["phase"] for i in range(3)] == ["SUCCEEDED"] * 3  # its map
    assert history(work).count("fan_out-3") == 1  # the function ran once: the build
    second_code, second = _run(db, "dynamic_fan", "-i", "n=3", work=work)
    assert second_code == 0, second
    assert [_nodes(second)[f"n1.dn{i}"]["cache_status"] for i in range(3)] == ["HIT"] * 3


def test_a_dynamic_task_that_calls_no_task_returns_its_outputs(tmp_path: Path) -> None:
    code, found = _run(tmp_path / "s.db", "direct", "-i", "n=4")
    assert code == 0, found
    assert found["outputs"] == {"o0": 9}  # 4 * 2 in the dynamic task, + 1
