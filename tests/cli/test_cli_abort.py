"""`sluice executions abort` on a run another process drives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "engine" / "flows.py"


def sluice(
    *args: str, db: Path, timeout: float = 120, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**_env(db), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


def _env(db: Path) -> dict[str, str]:
    return {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "SLUICE_ENGINE__WORKERS": "2"}


@pytest.fixture
def running(
    tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[Path, str, subprocess.Popen[str]]]:
    """A `sluice run` of a long nap in its own process, its execution RUNNING; an indirect
    parameter adds environment variables."""
    db = tmp_path / "s.db"
    env = {**_env(db), **getattr(request, "param", {})}
    driver = subprocess.Popen(
        [sys.executable, "-m", "sluice", "run", f"{FLOWS}:long_nap", "--input", "seconds=60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            assert time.monotonic() < deadline, "the run never started"
            assert driver.poll() is None, driver.communicate()
            listed = sluice("executions", "ls", "--json", db=db) if db.exists() else None
            rows = json.loads(listed.stdout) if listed and listed.returncode == 0 else []
            if rows and rows[0]["phase"] == "RUNNING":
                break
            time.sleep(0.2)
        yield db, rows[0]["id"], driver
    finally:
        if driver.poll() is None:
            os.kill(driver.pid, signal.SIGCONT)
            driver.kill()
        driver.communicate(timeout=30)


def test_abort_returns_once_the_other_process_has_aborted(
    running: tuple[Path, str, subprocess.Popen[str]],
) -> None:
    db, execution_id, _driver = running
    started = time.monotonic()
    done = sluice("executions", "abort", execution_id, db=db, timeout=120)
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert f"execution {execution_id} ended ABORTED" in done.stdout
    assert elapsed < 30, f"abort took {elapsed:.0f}s to notice the execution was terminal"
    shown = json.loads(sluice("executions", "show", execution_id, "--json", db=db).stdout)
    assert shown["phase"] == "ABORTED"


def test_abort_no_wait_says_the_abort_was_requested(
    running: tuple[Path, str, subprocess.Popen[str]],
) -> None:
    db, execution_id, _driver = running
    done = sluice("executions", "abort", execution_id, "--no-wait", db=db, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"abort of execution {execution_id} requested" in done.stdout


def test_abort_that_does_not_finish_in_time_says_so_and_fails(
    running: tuple[Path, str, subprocess.Popen[str]],
) -> None:
    db, execution_id, driver = running
    os.kill(driver.pid, signal.SIGSTOP)  # its owner holds the lease but does nothing
    try:
        done = sluice("executions", "abort", execution_id, "--timeout", "2", db=db, timeout=120)
    finally:
        os.kill(driver.pid, signal.SIGCONT)
    assert done.returncode == 1, done.stderr
    assert f"execution {execution_id} is still ABORTING after 2s" in done.stderr


SHORT_LEASE = {"SLUICE_ENGINE__EXECUTION_LEASE": "2"}


@pytest.mark.parametrize("running", [SHORT_LEASE], indirect=True)
def test_abort_of_a_run_whose_owner_died_is_finished_by_the_command(
    running: tuple[Path, str, subprocess.Popen[str]],
) -> None:
    db, execution_id, driver = running
    driver.kill()
    driver.communicate(timeout=30)
    done = sluice("executions", "abort", execution_id, db=db, env=SHORT_LEASE, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"execution {execution_id} ended ABORTED" in done.stdout
