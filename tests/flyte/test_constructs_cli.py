"""flytekit constructs through the `sluice` CLI, as a user runs them: a module inside a package
(relative imports), modules that cannot be loaded, `--json` output kept apart from what a
module prints, and a gate that survives kill -9 of the engine while it waits."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from support.crash import env, kill_9_when, query, wait
from support.flyte import FLOWS_ROOT, sluice

GATES = FLOWS_ROOT / "flyteconstructs" / "gates.py"

TASKS = """
import logging

from flytekit import task

logging.getLogger("flytekit").warning("a line flytekit logs while the module imports")
print("a line the module prints while it imports")


@task
def bump(x: int, by: int) -> int:
    return x + by
"""

FLOW = """
from flytekit import workflow

from .tasks import bump
from ..shared import TWICE


@workflow
def bumped(x: int = 1) -> int:
    return bump(x=bump(x=x, by=TWICE), by=TWICE)
"""


def test_a_module_inside_a_package_runs_and_json_stdout_is_only_json(tmp_path: Path) -> None:
    package = tmp_path / "project" / "pipelines"
    (package / "flows").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "shared.py").write_text("TWICE = 2\n")
    (package / "flows" / "__init__.py").write_text("")
    (package / "flows" / "tasks.py").write_text(TASKS)
    (package / "flows" / "bumped.py").write_text(FLOW)
    done = sluice(
        tmp_path / "s.db", "run", str(package / "flows" / "bumped.py") + ":bumped", "--json"
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)  # nothing else on stdout
    assert found["outputs"] == {"o0": 5}
    assert found["workflow"].startswith("pipelines.flows.bumped.bumped@")  # pyflyte's names
    assert "a line the module prints while it imports" in done.stderr
    assert "a line flytekit logs while the module" in done.stderr  # rich wraps it


BROKEN = {
    "syntax.py": ("def broken(:\n", "SyntaxError: invalid syntax", 1),
    "imports.py": ("import a_module_nobody_wrote\n", "No module named 'a_module_nobody_wrote'", 1),
    "raises.py": ("X = 1\nraise RuntimeError('not today')\n", "RuntimeError: not today", 2),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_a_module_that_cannot_be_loaded_exits_2_with_one_line(tmp_path: Path, name: str) -> None:
    source, message, line = BROKEN[name]
    (tmp_path / name).write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "sluice", "run", f"{name}:wf"],
        env=env(tmp_path / "s.db"),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr  # never a traceback
    assert lines[0].startswith(f"error: cannot load {name}: ")
    assert message in lines[0] and f"{name}:{line}" in lines[0]
    assert done.stdout == ""


def _node(db: Path, node: str) -> tuple[str, str, str]:
    rows = query(
        db, f"SELECT phase, reason, plugin_state FROM node_executions WHERE node_id = '{node}'"
    )
    return (str(rows[0][0]), str(rows[0][1]), str(rows[0][2])) if rows else ("", "", "")


def _signal(db: Path, execution: str, node: str, value: str) -> None:
    done = sluice(db, "executions", "signal", execution, node, value)
    assert done.returncode == 0, done.stderr


def test_a_gate_waits_in_the_store_across_kill_9_and_takes_the_signal(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    lease = {"SLUICE_ENGINE__EXECUTION_LEASE": "2", "SLUICE_FLYTE_TEST_DIR": str(work)}
    run = subprocess.Popen(
        [sys.executable, "-m", "sluice", "run", f"{GATES}:asking", "-i", "x=2"],
        env=env(db, workers=1, extra=lease),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "run.err").open("w"),
    )
    kill_9_when(run, lambda: _node(db, "n0")[1] == "waiting for input 'factor' (int)", 180)
    waited_since = _node(db, "n0")[2]
    assert "since" in waited_since
    (execution,) = (str(r[0]) for r in query(db, "SELECT id FROM executions"))

    _signal(db, execution, "n0", "5")  # no engine is running: the answer waits in the store
    engine = subprocess.Popen(
        [sys.executable, "-m", "sluice", "engine"],
        env=env(db, workers=1, extra=lease),
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=(tmp_path / "engine.err").open("w"),
    )
    try:
        wait(lambda: _node(db, "n2")[1] == "waiting for approval 'publish'", timeout=180)
        _signal(db, execution, "n3", '"total"')
        _signal(db, execution, "n2", "true")
        wait(lambda: query(db, "SELECT phase FROM executions")[0][0] == "SUCCEEDED", timeout=120)
    finally:
        engine.terminate()
        engine.wait(timeout=60)
    assert json.loads(str(query(db, "SELECT outputs FROM executions")[0][0])) == {"o0": "total:10"}
    assert _node(db, "n0")[2] == waited_since  # the restarted engine kept the wait's start
    signals = query(db, "SELECT node_id, info FROM events WHERE phase = 'SIGNALED' ORDER BY id")
    assert [(n, json.loads(str(i))) for n, i in signals] == [
        ("n0", {"value": 5}),
        ("n3", {"value": "total"}),
        ("n2", {"value": True}),
    ]
    phases = query(db, "SELECT phase FROM events WHERE node_id = 'n1' ORDER BY id")
    assert [p for (p,) in phases].count("SUCCESS") == 1  # the task after the gate ran once
