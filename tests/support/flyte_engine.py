"""One long-lived in-process engine for the Flyte construct tests (tests/flyte/test_constructs*):
flytekit workflows are translated and launched in the test process and run by one engine
whose flyte workers import flytekit once, so each run costs milliseconds, not the seconds of
a `sluice run` process. The same workflows also run under flytekit's own local execution (a
plain call in the test process), to compare the outputs."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from sluice.engine.engine import Engine
from sluice.runtime import Runtime
from support.engine import Outcome, fast_settings, outcome


class FlyteEngine:
    def __init__(self, runtime: Runtime, engine: Engine) -> None:
        self.runtime = runtime
        self.engine = engine

    async def run(self, target: Any, **inputs: Any) -> Outcome:
        record = await self.runtime.launch(target, inputs)
        await self.engine.wait(record.id)
        return await outcome(self.runtime, record.id)


async def flyte_engine(directory: Path) -> AsyncIterator[FlyteEngine]:
    """An engine on a SQLite store in `directory`, with one flyte worker."""
    settings = fast_settings(f"sqlite:///{directory / 's.db'}", workers=1)
    runtime = await Runtime.open(settings)
    engine = await runtime.engine()
    await engine.start()
    try:
        yield FlyteEngine(runtime, engine)
    finally:
        await engine.stop()
        await runtime.close()
