"""kill -9 of the engine mid-execution: a restarted engine resumes from the store without
re-running completed nodes. The task that was in flight runs again (at-least-once)."""

from __future__ import annotations

from pathlib import Path

from support.crash import kill_9_when, only_outputs, query, resume_until_succeeded, sluice
from support.engine import FLOWS


def _count(work: Path, name: str) -> int:
    path = work / f"{name}.count"
    return len(path.read_text().splitlines()) if path.exists() else 0


def test_kill_9_resumes_without_rerunning_completed_nodes(tmp_path: Path) -> None:
    db, work = tmp_path / "s.db", tmp_path / "work"
    work.mkdir()
    (work / "block").touch()
    run = sluice(["run", f"{FLOWS}:resumable", "--input", f"directory={work}"], db)

    def step_two_running() -> bool:
        one = query(db, "SELECT phase FROM node_executions WHERE node_id = 'step_one'")
        return one == [("SUCCEEDED",)] and _count(work, "two") == 1

    kill_9_when(run, step_two_running)  # and its worker processes are gone
    (work / "block").unlink()
    resume_until_succeeded(db)
    assert only_outputs(db) == {"o0": 3}
    assert (_count(work, "one"), _count(work, "two"), _count(work, "three")) == (1, 2, 1)
