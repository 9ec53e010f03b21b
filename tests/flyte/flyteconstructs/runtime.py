"""What a task finds around it: checkpoints across retries, an ImageSpec it runs in, eager
workflows, echo tasks in a branch, a legacy Pod (sidecar) task, hashed outputs."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime
from pathlib import Path
from typing import Annotated, Optional

from flytekit import (
    CronSchedule,
    HashMethod,
    ImageSpec,
    LaunchPlan,
    conditional,
    current_context,
    eager,
    map_task,
    task,
    workflow,
)
from flytekit.core.task import Echo
from flytekit.exceptions.user import FlyteRecoverableException
from flytekit.types.error import FlyteError
from flytekit.types.file import FlyteFile
from flytekitplugins.pod import Pod
from kubernetes.client.models import V1Container, V1PodSpec

IMAGE = ImageSpec(name="sluice-constructs", registry="localhost:30000", packages=["pyyaml"])

if IMAGE.is_container():  # as flytekit users guard imports only their image has
    import json as only_in_the_image


def _record(event: str) -> None:
    where = os.environ.get("SLUICE_FLYTE_TEST_DIR")
    if where:
        with Path(where, "history").open("a") as out:
            out.write(f"{event} {os.getpid()}\n")


@task(retries=2)
def resumable(n: int) -> str:
    """Counts to n, one step per attempt, keeping its progress in a checkpoint; an attempt
    that has not reached n fails recoverably, so the next one goes on from the checkpoint."""
    checkpoint = current_context().checkpoint
    previous = checkpoint.read()
    done = int(previous.decode()) if previous else 0
    done += 1
    checkpoint.write(str(done).encode())
    if done < n:
        raise FlyteRecoverableException(f"reached {done} of {n}")
    return f"reached {done} after {'a restart' if previous else 'no restart'}"


@task(container_image=IMAGE)
def in_image(text: str) -> str:
    return only_in_the_image.dumps({"text": text, "container": IMAGE.is_container()})


@task
def double(x: int) -> int:
    return 2 * x


@task
def square(x: int) -> int:
    return x * x


@eager
async def double_then_square(x: int) -> int:
    doubled = double(x=x)  # a sync task: called, not awaited
    if doubled > 10:
        return square(x=doubled)
    return doubled


noop = Echo(name="noop", inputs={"x": int})


@workflow
def maybe_double(x: int = 3) -> int:
    return conditional("big").if_(x > 5).then(double(x=x)).else_().then(noop(x=x))


@task(task_config=Pod(pod_spec=V1PodSpec(containers=[V1Container(name="primary")])))
def in_a_pod(x: int) -> int:
    return x + 100


@workflow
def pods(xs: list[int] = [1, 2]) -> tuple[int, list[int]]:  # noqa: B006 - flytekit's default
    return in_a_pod(x=xs[0]), map_task(in_a_pod)(x=xs)


def _content_hash(file: FlyteFile) -> str:
    return hashlib.sha256(Path(file.download()).read_bytes()).hexdigest()


@task
def write_report(text: str) -> Annotated[FlyteFile, HashMethod(_content_hash)]:
    _record("write_report")
    path = Path(current_context().working_directory) / "report.txt"
    path.write_text(text)
    return FlyteFile(str(path))


@task(cache=True, cache_version="1")
def count_words(report: FlyteFile) -> int:
    _record("count_words")
    return len(Path(report.download()).read_text().split())


@workflow
def report_words(text: str = "one two three") -> int:
    return count_words(report=write_report(text=text))


@task
def risky(x: int) -> int:
    _record(f"risky-{x}")
    if x < 0:
        raise ValueError(f"x is {x}")
    return x + 1


@task
def clean_up(x: int, err: Optional[FlyteError] = None) -> None:  # noqa: UP045 - flytekit's
    _record(f"clean_up-{x}-{err.failed_node_id if err else 'none'}")


@workflow(on_failure=clean_up)
def guarded(x: int = 1) -> int:
    return risky(x=risky(x=x))


@task
def stamp(at: datetime, label: str) -> str:
    return f"{label} at {at.isoformat()}"


@workflow
def stamped(at: datetime, label: str = "nightly") -> str:
    return stamp(at=at, label=label)


kicked = LaunchPlan.get_or_create(
    stamped,
    name="kicked",
    schedule=CronSchedule(schedule="*/5 * * * *", kickoff_time_input_arg="at"),
)
