"""SIGTERM drains a real `sluice engine` process (docs/invariants.md rule 12): running attempts
finish and record their end; past `engine.drain_timeout` the rest are stopped and handed
over to the next engine; a second signal stops at once."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from sluice.config import load_config
from sluice.runtime import Runtime
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase

ROOT = Path(__file__).resolve().parents[2]
FLOW = """
import os
import time

import sluice


@sluice.task
def work(directory: str, seconds: float) -> str:
    started = os.path.join(directory, "started")
    first = not os.path.exists(started)
    with open(started, "a") as out:
        out.write(f"{os.getpid()}\\n")
    if first:
        time.sleep(seconds)
    with open(os.path.join(directory, "ended"), "a") as out:
        out.write(f"{os.getpid()}\\n")
    return "done"


@sluice.workflow
def drained(directory: str, seconds: float) -> str:
    return work(directory=directory, seconds=seconds)
"""


def _engine(url: str, drain_timeout: float, stderr: Path) -> subprocess.Popen[str]:
    env = {
        **os.environ,
        "SLUICE_DATABASE_URL": url,
        "SLUICE_ENGINE__WORKERS": "1",
        "SLUICE_ENGINE__DRAIN_TIMEOUT": str(drain_timeout),
    }
    engine = subprocess.Popen(
        [sys.executable, "-m", "sluice", "engine", "--log-level", "INFO"],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr.open("a"),
        text=True,
    )
    assert engine.stdout is not None
    assert "running on" in engine.stdout.readline(), stderr.read_text()
    return engine


def _wait(condition: Callable[[], bool], within: float = 60.0) -> None:
    """A hang guard, not a timing assertion."""
    deadline = time.monotonic() + within
    while not condition():
        assert time.monotonic() < deadline, "condition not met in time"
        time.sleep(0.05)


async def _launch(url: str, directory: Path, seconds: float) -> str:
    flows = load_module("drain_flow", str(directory / "drain_flow.py"))
    rt = await Runtime.open(load_config(database_url=url), upgrade=True)
    try:
        record = await rt.launch(flows.drained, {"directory": str(directory), "seconds": seconds})
        return record.id
    finally:
        await rt.close()


async def _stored(url: str, execution_id: str) -> tuple[ExecutionPhase, str | None]:
    rt = await Runtime.open(load_config(database_url=url))
    try:
        async with rt.store.read() as repos:
            record = await repos.executions.get(execution_id)
        assert record is not None
        return record.phase, record.owner
    finally:
        await rt.close()


def _setup(tmp_path: Path, seconds: float) -> tuple[str, str]:
    (tmp_path / "drain_flow.py").write_text(FLOW)
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    return url, asyncio.run(_launch(url, tmp_path, seconds))


def _pids(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


def test_sigterm_lets_a_running_attempt_finish_and_record_its_end(tmp_path: Path) -> None:
    url, execution = _setup(tmp_path, seconds=2.0)
    stderr = tmp_path / "engine.err"
    engine = _engine(url, 30.0, stderr)
    try:
        _wait(lambda: (tmp_path / "started").exists())
        engine.send_signal(signal.SIGTERM)
        code = engine.wait(timeout=60)
    finally:
        if engine.poll() is None:
            engine.kill()
    assert code == 0, stderr.read_text()
    assert _pids(tmp_path / "ended") == _pids(tmp_path / "started")  # one body, to its end
    assert asyncio.run(_stored(url, execution))[0] is ExecutionPhase.SUCCEEDED
    assert "draining: 1 attempts running" in stderr.read_text()


def test_past_the_drain_timeout_the_attempt_is_handed_over(tmp_path: Path) -> None:
    url, execution = _setup(tmp_path, seconds=120.0)
    stderr = tmp_path / "engine.err"
    first = _engine(url, 0.5, stderr)
    try:
        _wait(lambda: (tmp_path / "started").exists())
        first.send_signal(signal.SIGTERM)
        assert first.wait(timeout=60) == 0, stderr.read_text()
    finally:
        if first.poll() is None:
            first.kill()
    assert not (tmp_path / "ended").exists()  # its body was stopped, not finished
    phase, owner = asyncio.run(_stored(url, execution))
    assert (phase, owner) == (ExecutionPhase.RUNNING, None)  # handed over: nobody holds it
    second = _engine(url, 30.0, stderr)
    try:
        _wait(lambda: len(_pids(tmp_path / "ended")) == 1)
        _wait(lambda: asyncio.run(_stored(url, execution))[0] is ExecutionPhase.SUCCEEDED)
    finally:
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=60)
    assert len(_pids(tmp_path / "started")) == 2  # the unfinished attempt started again


def test_a_second_signal_stops_at_once(tmp_path: Path) -> None:
    url, _ = _setup(tmp_path, seconds=120.0)
    stderr = tmp_path / "engine.err"
    engine = _engine(url, 300.0, stderr)
    try:
        _wait(lambda: (tmp_path / "started").exists())
        engine.send_signal(signal.SIGTERM)
        _wait(lambda: "draining" in stderr.read_text())
        engine.send_signal(signal.SIGTERM)
        assert engine.wait(timeout=60) == 0, stderr.read_text()
    finally:
        if engine.poll() is None:
            engine.kill()
    assert not (tmp_path / "ended").exists()
