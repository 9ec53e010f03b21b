"""kill -9 of an engine while its task prints: the killed run's log is readable up to what was
flushed, and the run that resumes the task after the restart writes its own segments after
it (never over it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support.crash import ROOT, env, kill_9_when, query, resume_until_succeeded, sluice

FLOWS = Path(__file__).parent / "log_flows.py"
FLUSH = {"SLUICE_LOGS__FLUSH_INTERVAL": "0.1"}


def _flushed_lines(db: Path) -> int:
    rows = query(db, "SELECT coalesce(sum(lines), 0) FROM task_logs")
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
    return subprocess.run(
        command, env=env(db, 1, extra=FLUSH), cwd=ROOT, capture_output=True, text=True
    )


def test_a_killed_engines_log_is_kept_and_the_resumed_run_writes_after_it(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "block").touch()
    command = ["run", f"{FLOWS}:crash_flow", "--input", f"directory={work}", "--quiet"]
    run = sluice(command, db, 1, extra=FLUSH)
    kill_9_when(run, lambda: _flushed_lines(db) >= 10)
    before = _stored_texts(tmp_path / "logs")
    assert before[0].startswith("started in process")
    assert before[1:] == [f"tick {i}" for i in range(len(before) - 1)]  # whole lines, in order
    assert len(before) >= 10
    (work / "block").unlink()
    resume_until_succeeded(db, 1, extra=FLUSH)
    (execution,) = query(db, "SELECT id FROM executions")[0]
    shown = _sluice(db, "logs", str(execution), "print_until_unblocked", "--json")
    assert shown.returncode == 0, shown.stderr
    rows = [json.loads(line) for line in shown.stdout.splitlines()]
    texts = [row["text"] for row in rows]
    assert texts[: len(before)] == before  # the killed run's log, as flushed
    resumed = texts[len(before) :]
    assert resumed[0].startswith("started in process") and resumed[-1] == "done"
    assert resumed[0] != before[0]  # another worker process: the task ran again
    segments = query(
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
