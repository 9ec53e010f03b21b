"""A task run's answer as a phase, for plugins that run python task functions elsewhere
(ray, dask). The answer is what `sluice.plugins.builtin.worker.run_job` returns:
{"outputs": {...}} or {"error": {"type", "message", "traceback"}}."""

from __future__ import annotations

from typing import Any

from sluice.plugins.core.context import TaskExecutionContext
from sluice.plugins.core.phase import ErrorKind, PhaseInfo


def task_payload(ctx: TaskExecutionContext) -> dict[str, Any] | None:
    """What `run_job` needs to run the task (its function's module, file and name, and the
    inputs), or None when the task has no python source."""
    source = ctx.task.source
    if source is None:
        return None
    return {
        "id": ctx.metadata.generated_name(max_length=100),
        "module": source.module,
        "file": source.file,
        "qualname": source.qualname,
        "inputs": dict(ctx.inputs),
    }


def no_source(ctx: TaskExecutionContext) -> PhaseInfo:
    return PhaseInfo.permanent_failure(
        "BadTaskSpecification", f"task {ctx.task.name!r} has no python source"
    )


def answer_phase(ctx: TaskExecutionContext, answer: dict[str, Any]) -> PhaseInfo:
    """Success (outputs written), or the function's error: a retryable USER failure with its
    traceback, permanent when the outputs themselves were wrong (a retry returns them again)."""
    if "outputs" in answer:
        ctx.outputs.put(answer["outputs"])
        return PhaseInfo.success()
    failure = answer.get("error") or {}
    kind = str(failure.get("type", "Error"))
    if kind == "OutputsError":
        return PhaseInfo.permanent_failure("OutputsError", str(failure.get("message", "")))
    text = failure.get("traceback") or f"{kind}: {failure.get('message', '')}"
    return PhaseInfo.retryable_failure(kind, str(text).rstrip(), ErrorKind.USER)
