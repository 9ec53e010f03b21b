"""`sluice run` starts the local pool's first worker before it imports the engine; the run's
pool adopts it, and a run that does not (help, a bad target) leaves no worker behind."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from sluice.cli.main import cli
from sluice.plugins.builtin import early_worker

FLOW = """
import os

import sluice


@sluice.task
def whoami() -> int:
    return os.getpid()


@sluice.workflow
def pids() -> int:
    return whoami()
"""


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[early_worker._Started]]:
    seen: list[early_worker._Started] = []
    real = early_worker.start_early_worker

    def spy() -> None:
        real()
        seen.extend(early_worker._slot)

    monkeypatch.setattr(early_worker, "start_early_worker", spy)
    yield seen
    early_worker.discard_early_worker()


def run(tmp_path: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--db", f"sqlite:///{tmp_path}/s.db", "run", *args])
    return result.exit_code, result.output


def test_the_run_task_runs_in_the_worker_started_first(
    tmp_path: Path, started: list[early_worker._Started]
) -> None:
    (tmp_path / "pidflow.py").write_text(FLOW)
    code, output = run(tmp_path, f"{tmp_path}/pidflow.py:pids", "--json")
    assert code == 0, output
    assert len(started) == 1
    assert json.loads(output)["outputs"] == {"o0": started[0].popen.pid}
    assert early_worker._slot == []
    assert started[0].popen.poll() is not None  # stopped with the pool


def test_run_help_starts_no_worker(tmp_path: Path, started: list[early_worker._Started]) -> None:
    code, output = run(tmp_path, "--help")
    assert code == 0 and "TARGET" in output
    assert started == []


def test_a_run_that_fails_before_its_engine_leaves_no_worker(
    tmp_path: Path, started: list[early_worker._Started]
) -> None:
    code, _ = run(tmp_path, f"{tmp_path}/missing.py:nothing")
    assert code == 2
    assert len(started) == 1
    assert early_worker._slot == []
    assert started[0].popen.returncode is not None
    with pytest.raises(ProcessLookupError):
        os.kill(started[0].popen.pid, 0)
