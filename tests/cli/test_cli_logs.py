"""`sluice logs` in a subprocess, as a user runs it: an execution's lines merged by node, a
node's attempt by attempt, one stream, JSON lines, --follow while a task prints, and errors
that name the bad value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "logs" / "log_flows.py"


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "SLUICE_ENGINE__WORKERS": "2"}


def sluice(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True,
        text=True,
        env=_env(db),
        timeout=120,
        cwd=ROOT,
    )


def _run(flow: str, db: Path, *inputs: str) -> str:
    done = sluice("run", f"{FLOWS}:{flow}", "--json", *inputs, db=db)
    return str(json.loads(done.stdout)["id"])


def test_logs_of_an_execution_a_node_a_stream_and_as_json(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    execution = _run("chatty_flow", db)
    merged = sluice("logs", execution[:10], db=db)
    assert merged.returncode == 0, merged.stderr
    assert "chatty | hello from chatty 1" in merged.stdout.splitlines()
    assert "chatty | from a subprocess 1" in merged.stdout.splitlines()
    only_errors = sluice("logs", execution, "chatty", "--stream", "stderr", db=db)
    assert only_errors.stdout.splitlines() == ["warning on stderr 1"]
    rows = [
        json.loads(line)
        for line in sluice("logs", execution, "--json", db=db).stdout.split("\n")
        if line
    ]
    assert {r["stream"] for r in rows} == {"stdout", "stderr"}
    assert all(r["node"] == "chatty" and r["attempt"] == 1 for r in rows)
    assert rows[0]["position"] == "0:0:0" and rows[0]["at"].endswith("Z")
    shown = json.loads(sluice("executions", "show", execution, "--json", db=db).stdout)
    [attempt] = shown["nodes"][0]["attempts"]
    assert attempt["log_bytes"] > 0


def test_bad_arguments_are_named(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    execution = _run("chatty_flow", db)
    unknown = sluice("logs", execution, "nope", db=db)
    assert unknown.returncode == 2 and "'nope'" in unknown.stderr and "chatty" in unknown.stderr
    attempt = sluice("logs", execution, "chatty", "--attempt", "0", db=db)
    assert attempt.returncode == 2 and "got 0" in attempt.stderr
    no_node = sluice("logs", execution, "--attempt", "1", db=db)
    assert no_node.returncode == 2 and "needs a node" in no_node.stderr
    tail = sluice("logs", execution, "chatty", "--tail", "-1", db=db)
    assert tail.returncode == 2 and "got -1" in tail.stderr
    missing = sluice("logs", "x1nothing", db=db)
    assert missing.returncode == 2 and "'x1nothing'" in missing.stderr


def test_follow_prints_lines_while_the_task_runs_and_ends_with_it(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    inputs = ["--input", "lines=30", "--input", "pause=0.1"]
    runner = subprocess.Popen(
        [sys.executable, "-m", "sluice", "run", f"{FLOWS}:slow_flow", "--json", *inputs],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=_env(db),
        cwd=ROOT,
    )
    try:
        execution = ""
        for _ in range(300):  # the execution appears once `run` has created it
            listed = sluice("executions", "ls", "--json", db=db) if db.exists() else None
            if listed is not None and listed.returncode == 0 and json.loads(listed.stdout):
                execution = json.loads(listed.stdout)[0]["id"]
                break
            time.sleep(0.1)
        assert execution
        followed = sluice("logs", execution, "slow_printer", "--follow", db=db)
        assert runner.wait(timeout=120) == 0
    finally:
        runner.kill()
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == [f"line {i}" for i in range(30)]
