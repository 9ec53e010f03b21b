"""kill -9 of `sluice run` in the middle of a flytekit map_task: a restarted engine resumes the
map from the store. No item that had succeeded runs again (those in flight at the kill may,
as any task), the map's concurrency bound holds after the restart, and the outputs are whole."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from support.crash import env, kill_9, query, wait
from support.flyte import FLOWS_ROOT, history

MAPS = FLOWS_ROOT / "flyteflows" / "maps.py"
ITEMS = list(range(1, 11))


def _sluice(args: list[str], db: Path, work: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sluice", *args],
        env={**env(db, workers=4), "SLUICE_FLYTE_TEST_DIR": str(work)},
        cwd=db.parent,
        stdout=subprocess.DEVNULL,
        stderr=(db.parent / f"{args[0]}.err").open("w"),
    )


def _succeeded_items(db: Path) -> set[str]:
    rows = query(
        db, "SELECT node_id FROM node_executions WHERE node_id LIKE 'n0[%' AND phase = 'SUCCEEDED'"
    )
    return {str(r[0]) for r in rows}


def _execution(db: Path) -> tuple[str, str]:
    rows = query(db, "SELECT phase, outputs FROM executions")
    return (str(rows[0][0]), str(rows[0][1])) if rows else ("", "")


def test_kill_9_mid_flyte_map_resumes_without_rerunning_succeeded_items(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    inputs = ["--input", f"xs={json.dumps(ITEMS)}", "--input", "delay=0.4"]
    run = _sluice(["run", f"{MAPS}:slow_map", *inputs], db, work)
    try:
        wait(lambda: len(_succeeded_items(db)) >= 3, timeout=180)
        kill_9(run)
    finally:
        if run.poll() is None:
            run.kill()
    done_at_kill = _succeeded_items(db)
    events_at_kill = len(history(work))
    assert _execution(db)[0] == "RUNNING"
    assert len(done_at_kill) < len(ITEMS), "the map ended before the kill: nothing to resume"

    engine = _sluice(["engine"], db, work)
    try:
        wait(lambda: _execution(db)[0] == "SUCCEEDED", timeout=180)
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    assert engine.returncode == 0, (tmp_path / "engine.err").read_text()

    assert json.loads(_execution(db)[1]) == {"o0": [x * x for x in ITEMS]}
    starts = history(work)
    for node in done_at_kill:
        x = ITEMS[int(node.removeprefix("n0[").rstrip("]"))]
        assert starts.count(f"start-{x}") == 1, f"{node} had succeeded and ran again"
    assert all(1 <= starts.count(f"start-{x}") <= 2 for x in ITEMS)
    active = peak = 0
    for event in starts[events_at_kill:]:  # after the restart: items killed in flight are gone
        active += 1 if event.startswith("start-") else -1
        peak = max(peak, active)
    assert peak <= 2, f"map_task(concurrency=2) ran {peak} items at once after the restart"


def test_kill_9_mid_flyte_dynamic_resumes_its_built_workflow(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    run = _sluice(["run", f"{MAPS}:slow_dynamic", "-i", "n=8", "-i", "delay=0.4"], db, work)

    def children_done() -> set[str]:
        rows = query(
            db,
            "SELECT node_id FROM node_executions WHERE node_id LIKE 'n0.dn%' "
            "AND phase = 'SUCCEEDED'",
        )
        return {str(r[0]) for r in rows}

    try:
        wait(lambda: len(children_done()) >= 2, timeout=180)
        kill_9(run)
    finally:
        if run.poll() is None:
            run.kill()
    done_at_kill = children_done()
    assert _execution(db)[0] == "RUNNING"
    assert len(done_at_kill) < 8, "the dynamic node ended before the kill: nothing to resume"

    engine = _sluice(["engine"], db, work)
    try:
        wait(lambda: _execution(db)[0] == "SUCCEEDED", timeout=180)
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    assert engine.returncode == 0, (tmp_path / "engine.err").read_text()

    assert json.loads(_execution(db)[1]) == {"o0": [x * x for x in range(8)]}
    events = history(work)
    assert events.count("slow_fan-8") == 1, "the dynamic workflow was built twice"
    for node in done_at_kill:
        x = int(node.removeprefix("n0.dn"))
        assert events.count(f"start-{x}") == 1, f"{node} had succeeded and ran again"


def test_kill_9_mid_flyte_branch_resumes_the_chosen_case(tmp_path: Path) -> None:
    db, work, go = tmp_path / "s.db", tmp_path / "work", tmp_path / "work" / "history"
    work.mkdir()
    branches = FLOWS_ROOT / "flyteflows" / "branches.py"
    run = _sluice(["run", f"{branches}:napping", "-i", "seconds=3"], db, work)
    try:
        wait(lambda: go.exists() and history(work).count("nap-start") == 2, timeout=180)
        kill_9(run)  # the chosen case's nap is running
    finally:
        if run.poll() is None:
            run.kill()
    assert _execution(db)[0] == "RUNNING"
    engine = _sluice(["engine"], db, work)
    try:
        wait(lambda: _execution(db)[0] == "SUCCEEDED", timeout=180)
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=60)
    assert engine.returncode == 0, (tmp_path / "engine.err").read_text()
    assert json.loads(_execution(db)[1]) == {"o0": 3.0}
    built = query(
        db,
        "SELECT phase FROM events WHERE node_id = 'n1:build' AND phase = 'SUCCESS'",
    )
    assert len(built) == 1, "the branch chose its case twice"
    assert history(work).count("nap-start") == 3  # n0 once; the killed case's nap, then again
    assert history(work).count("nap-end") == 2
