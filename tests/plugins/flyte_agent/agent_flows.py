"""flytekit tasks of the agents' types (tests/plugins/flyte_agent/agents) and workflows using
them: what sluice runs through the flyte_agent plugins."""

from __future__ import annotations

from typing import Any

from flytekit import task, workflow
from flytekit.core.base_task import PythonTask
from flytekit.core.interface import Interface


class Countdown(PythonTask):  # type: ignore[misc]
    """A task of type `countdown`: no container, an agent runs it."""

    def __init__(self, name: str, **kwargs: Any) -> None:
        interface = Interface(inputs={"seconds": float, "value": int}, outputs={"o0": int})
        super().__init__(
            task_type="countdown", name=name, task_config=None, interface=interface, **kwargs
        )


class Shout(PythonTask):  # type: ignore[misc]
    def __init__(self, name: str, **kwargs: Any) -> None:
        interface = Interface(inputs={"text": str}, outputs={"o0": str})
        super().__init__(
            task_type="shout", name=name, task_config=None, interface=interface, **kwargs
        )


countdown = Countdown(name="agent_flows.countdown")
shout = Shout(name="agent_flows.shout")


@task
def plus_one(x: int) -> int:
    return x + 1


@workflow
def suite(seconds: float = 0.5, text: str = "hello") -> tuple[int, int, str, int]:
    """Two countdown jobs (async agent), a shout (sync agent), a python task downstream."""
    first = countdown(seconds=seconds, value=1)
    second = countdown(seconds=seconds, value=2)
    return first, second, shout(text=text), plus_one(x=second)


@workflow
def long_countdown(seconds: float = 600.0) -> int:
    return countdown(seconds=seconds, value=3)
