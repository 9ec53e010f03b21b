"""A task run's answer as a phase, for plugins that run python task functions elsewhere
(ray, dask). The answer is what `sluice.plugins.builtin.worker.run_job` returns:
{"outputs": {...}} or {"error": {"type", "message", "traceback"}}; a flytekit task's error
also says whether flytekit deemed it "recoverable" (see builtin/flyte_exec)."""

from __future__ import annotations

from pathlib import Path
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


def job_payload(
    ctx: TaskExecutionContext, flyte: dict[str, Any] | None, flyte_data_dir: str
) -> dict[str, Any] | None:
    """What `run_job` needs: the task's python function, or, when the task carries a flytekit
    template (`flyte`), that template run through flytekit's entrypoint with its raw outputs
    under `flyte_data_dir` (absolute: the job runs in another working directory)."""
    if not flyte:
        return task_payload(ctx)
    return {
        "id": ctx.metadata.generated_name(max_length=100),
        "runner": "flyte",
        "template": flyte["template"],
        "source_root": flyte.get("source_root", ""),
        "module_file": flyte.get("module_file", ""),
        "work_dir": str(Path(flyte_data_dir).resolve()),
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
    error_kind = ErrorKind.SYSTEM if failure.get("user") is False else ErrorKind.USER
    if failure.get("recoverable") is False:  # flytekit's NON_RECOVERABLE: no retry, as in Flyte
        return PhaseInfo.permanent_failure(kind, str(text).rstrip(), error_kind)
    return PhaseInfo.retryable_failure(kind, str(text).rstrip(), error_kind)
