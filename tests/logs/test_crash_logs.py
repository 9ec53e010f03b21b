"""kill -9 of an engine while its task prints: the killed run's log is readable up to what was
flushed, and the run that resumes the task after the restart writes its own segments after
it (never over it)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FLOWS = Path(__file__).parent / "log_flows.py"


def _env(db: Path) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": f"sqlite:///{db}",
        "SLUICE_ENGINE__WORKERS": "1",
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
        "SLUICE_LOGS__FLUSH_INTERVAL": "0.1",
    }


def _query(db: Path, sql: str) -> list[tuple[object, ...]]:
    if not db.exists():
        return []
    try:
        with sqlite3.connect(db, timeout=5) as conn:
            return conn.execute(sql).fetchall()
    except sqlite3.OperationalError:  # schema not created yet
        return []


def _wait(condition: Callable[[], bool], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def _flushed_lines(db: Path) -> int:
    rows = _query(db, "SELECT coalesce(sum(lines), 0) FROM task_logs")
    return int(str(rows[0][0])) if rows else 0


def _stored_texts(logs: Path) -> list[str]:
    """The lines in the segment files on disk, in segment order."""
    texts = []
    for segment in sorted(logs.rglob("*.jsonl")):
        for raw in segment.read_bytes().split(b"\n")[:-1]:
            texts.append(json.loads(raw)["m"])
    return texts


def _sluice(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "sluice", *args]
    return subprocess.run(command, env=_env(db), cwd=ROOT, capture_output=True, text=True)


def test_a_killed_engines_log_is_kept_and_the_resumed_run_writes_after_it(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "block").touch()
    command = ["run", f"{FLOWS}:crash_flow", "--input", f"directory={work}", "--quiet"]
    run = subprocess.Popen(
        [sys.executable, "-m", "sluice", *command],
        env=_env(db),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: _flushed_lines(db) >= 10)
        run.send_signal(signal.SIGKILL)
        run.wait(timeout=10)
    finally:
        if run.poll() is None:
            run.kill()
    before = _stored_texts(tmp_path / "logs")
    assert before[0].startswith("started in process")
    assert before[1:] == [f"tick {i}" for i in range(len(before) - 1)]  # whole lines, in order
    assert len(before) >= 10
    (work / "block").unlink()
    engine = subprocess.Popen(
        [sys.executable, "-m", "sluice", "engine"],
        env=_env(db),
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        _wait(lambda: _query(db, "SELECT phase FROM executions") == [("SUCCEEDED",)])
    finally:
        engine.send_signal(signal.SIGTERM)
        engine.wait(timeout=30)
    (execution,) = _query(db, "SELECT id FROM executions")[0]
    shown = _sluice(db, "logs", str(execution), "print_until_unblocked", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    texts = [row["text"] for row in rows]
    assert texts[: len(before)] == before  # the killed run's log, as flushed
    resumed = texts[len(before) :]
    assert resumed[0].startswith("started in process") and resumed[-1] == "done"
    assert resumed[0] != before[0]  # another worker process: the task ran again
    segments = _query(
        db, "SELECT segment, writer, closed_at IS NOT NULL FROM task_logs ORDER BY segment"
    )
    assert all(closed for _, _, closed in segments)  # the killed run's segment was closed
    killed = {int(row["position"].split(":")[1]) for row in rows[: len(before)]}
    after = {int(row["position"].split(":")[1]) for row in rows[len(before) :]}
    assert max(killed) < min(after)  # the resumed run appended its own segments
    killed_writers = {writer for number, writer, _ in segments if number in killed}
    resumed_writers = {writer for number, writer, _ in segments if number in after}
    assert len(killed_writers) == len(resumed_writers) == 1
    assert killed_writers != resumed_writers
    attempts = {row["attempt"] for row in rows}
    assert attempts == {1}, attempts
