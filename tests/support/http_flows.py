"""Workflows the HTTP tests launch; importable on its own (the engine's workers load it)."""

from __future__ import annotations

import sluice


@sluice.task
def echo(text: str = "hi") -> str:
    return text


@sluice.workflow
def echoing(text: str = "hi") -> str:
    return echo(text=text)


@sluice.task
def printer(lines: int) -> int:
    for i in range(lines):
        print(f"line {i}")
    return lines


@sluice.workflow
def printing(lines: int = 3) -> int:
    return printer(lines=lines)


plan = sluice.LaunchPlan("echo_plan", echoing)
waiting = sluice.LaunchPlan(
    "waiting_plan",
    echoing,
    concurrency=sluice.ConcurrencyPolicy(1, sluice.ConcurrencyBehavior.WAIT),
)
