"""What runs on a Dask worker: the task function, its prints captured and returned with its
answer (the worker's stdout is not the task's). One task per worker thread at a time sees
its own prints only when workers have one thread (`DaskJobConfig.threads`, default 1):
sys.stdout is process-wide."""

from __future__ import annotations

import contextlib
import io
from typing import Any


def run_captured(job: dict[str, Any]) -> dict[str, Any]:
    """{"answer": run_job's answer, "stdout": ..., "stderr": ...}."""
    from sluice.plugins.builtin.worker import run_job

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        answer = run_job(job)
    return {"answer": answer, "stdout": out.getvalue(), "stderr": err.getvalue()}


def task_state(dask_scheduler: Any, key: str) -> str | None:
    """The scheduler's state of `key` (run there by Client.run_on_scheduler), or None."""
    task = dask_scheduler.tasks.get(key)
    return None if task is None else str(task.state)
