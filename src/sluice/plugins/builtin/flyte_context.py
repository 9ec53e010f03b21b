"""What a flytekit task finds around it in sluice's worker, as it would in a Flyte pod.

- A @dynamic task's serialization context (`_F_SS_C`, from its container), in the
  environment while it runs, as in a Flyte pod.
- `ImageSpec.is_container()` is True: on Flyte a task runs in the image built from its
  ImageSpec, which carries that spec's id (`_F_IMG_ID`), so the check is True in the task and
  in its module's import-time guards (`if image.is_container(): import ...`). sluice's worker
  is where every task runs, whatever image it names, and imports a module once for all the
  tasks it runs, so every spec is "the container" there. (flytekit's local run answers False
  inside a task and True at import; a module that tells images apart with `is_container()`
  takes the first branch on sluice.)
- Intra-task checkpoints (`current_context().checkpoint`): each attempt of a node writes to
  its own directory under the data directory and reads the one its previous attempt wrote,
  as Flyte's propeller hands `--checkpoint-path` and `--prev-checkpoint` to each retry.
- An eager task (`@eager`) runs as flytekit runs it locally: its function in this worker,
  every task it awaits called in process, since there is no Flyte backend for it to launch
  executions on.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DYNAMIC_CONTEXT = "_F_SS_C"  # flytekit's SERIALIZED_CONTEXT_ENV_VAR
_EAGER_MARK = "_sluice_runs_locally"


@contextlib.contextmanager
def task_environment(template: Any, job: dict[str, Any]) -> Iterator[None]:
    """The task's environment variables, set while it runs and restored after."""
    wanted: dict[str, str] = {}
    context = next((p.value for p in template.container.env if p.key == DYNAMIC_CONTEXT), None)
    if job.get("dynamic_builder") and context is not None:
        wanted[DYNAMIC_CONTEXT] = context
    previous = {name: os.environ.get(name) for name in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for name, value in previous.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def images_are_here() -> None:
    """Make `ImageSpec.is_container()` True in this worker (see the module's docstring)."""
    from flytekit.image_spec.image_spec import ImageSpec

    ImageSpec.is_container = _in_its_container


def _in_its_container(self: object) -> bool:
    return True


def checkpoints(job: dict[str, Any]) -> tuple[str | None, str | None]:
    """(this attempt's checkpoint directory, the previous attempt's if it wrote one)."""
    node = job.get("node_key")
    if not node:
        return None, None
    base = Path(job["work_dir"]) / "checkpoints" / hashlib.sha256(node.encode()).hexdigest()[:24]
    attempt = int(job.get("attempt", 0))
    previous = base / str(attempt - 1)
    return str(base / str(attempt)), str(previous) if previous.is_dir() else None


def run_eager_locally(resolver: str, args: list[str]) -> None:
    """Make the eager task the command line names run as flytekit's local execution does
    (once per worker: the task object is its module's, loaded once)."""
    from flytekit.core.context_manager import ExecutionState, FlyteContextManager
    from flytekit.tools.module_loader import load_object_from_module

    task = load_object_from_module(resolver).load_task(loader_args=args)
    if getattr(task, _EAGER_MARK, False):
        return
    execute = task.execute

    def execute_locally(**kwargs: Any) -> Any:
        ctx = FlyteContextManager.current_context()
        state = ctx.execution_state.with_params(mode=ExecutionState.Mode.LOCAL_WORKFLOW_EXECUTION)
        with FlyteContextManager.with_context(ctx.with_execution_state(state)):
            return execute(**kwargs)

    task.execute = execute_locally
    setattr(task, _EAGER_MARK, True)
