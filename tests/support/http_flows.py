"""Workflows the HTTP tests launch; importable on its own (the engine's workers load it)."""

from __future__ import annotations

import sluice


@sluice.task
def echo(text: str = "hi") -> str:
    print(f"echo says {text}")  # a line for the log endpoints to read
    return text


@sluice.workflow
def echoing(text: str = "hi") -> str:
    return echo(text=text)


plan = sluice.LaunchPlan("echo_plan", echoing)
waiting = sluice.LaunchPlan(
    "waiting_plan",
    echoing,
    concurrency=sluice.ConcurrencyPolicy(1, sluice.ConcurrencyBehavior.WAIT),
)
