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


@sluice.task
def printer(lines: int) -> int:
    for i in range(lines):
        print(f"line {i}")
    return lines


@sluice.workflow
def printing(lines: int = 3) -> int:
    return printer(lines=lines)


plan = sluice.LaunchPlan("echo_plan", echoing)
hourly = sluice.LaunchPlan("hourly_plan", echoing, schedule=sluice.Schedule(fixed_rate=3600.0))
waiting = sluice.LaunchPlan(
    "waiting_plan",
    echoing,
    concurrency=sluice.ConcurrencyPolicy(1, sluice.ConcurrencyBehavior.WAIT),
)


@sluice.task
def chatter(gate: str) -> str:
    """Prints, waits until the file `gate` exists, prints again: a log to follow live."""
    import time
    from pathlib import Path

    print("chatter started", flush=True)
    deadline = time.monotonic() + 60
    while not Path(gate).exists():
        if time.monotonic() > deadline:  # nobody read the first line while this ran
            raise RuntimeError(f"{gate} never appeared")
        time.sleep(0.05)
    print("chatter done", flush=True)
    return gate


@sluice.workflow
def chattering(gate: str) -> str:
    return chatter(gate=gate)
