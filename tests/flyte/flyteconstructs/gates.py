"""Gate nodes: a sleep, a wait for an input, an approval."""

from __future__ import annotations

from datetime import timedelta

from flytekit import approve, sleep, task, wait_for_input, workflow


@task
def scale(x: int, factor: int) -> int:
    return x * factor


@task
def describe(text: str, n: int) -> str:
    return f"{text}:{n}"


@workflow
def napping(x: int = 2) -> int:
    nap = sleep(timedelta(seconds=1))
    scaled = scale(x=x, factor=3)
    nap >> scaled
    return scaled


@workflow
def asking(x: int = 2) -> str:
    factor = wait_for_input("factor", timeout=timedelta(hours=1), expected_type=int)
    scaled = scale(x=x, factor=factor)
    checked = approve(scaled, "publish", timeout=timedelta(hours=1))
    label = wait_for_input("label", timeout=timedelta(hours=1), expected_type=str)
    return describe(text=label, n=checked)


@workflow
def impatient(x: int = 1) -> int:
    factor = wait_for_input("factor", timeout=timedelta(seconds=2), expected_type=int)
    return scale(x=x, factor=factor)
