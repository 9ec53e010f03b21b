"""flytekit constructs sluice refuses by name (tests/flyte/test_refusals.py)."""

from __future__ import annotations

from flytekit import task, workflow
from flytekit.core.task import Echo

two_echo = Echo(name="two_echo", inputs={"a": int, "b": str})


@workflow
def echo_two(a: int = 1, b: str = "x") -> tuple[int, str]:
    return two_echo(a=a, b=b)


@task
def inc(x: int) -> int:
    return x + 1


@task
def cleanup(x: int) -> None:
    print(f"cleaning up after {x}")


@workflow(on_failure=cleanup)
def inner(x: int) -> int:
    return inc(x=x)


@workflow
def outer(x: int = 1) -> int:
    return inner(x=x)
