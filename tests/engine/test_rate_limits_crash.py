"""An engine SIGKILLed right after the store admitted its task (the node not yet saved): the
engine that takes over asks with the same token (the node's attempt) and is granted the same
slot again, not a second one. Under a limit of one an hour, a second slot would leave the task
waiting an hour."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from faults.harness import Engines, config, runtime, wait_terminal
from sluice.sdk.loader import load_module
from sluice.spec.phases import ExecutionPhase
from support.engine import outcome

FLOWS = Path(__file__).parent / "rate_flows.py"


async def test_a_takeover_after_the_admission_takes_no_second_slot(
    sqlite_url: str, tmp_path: Path
) -> None:
    flows = load_module("rate_flows", str(FLOWS))
    cfg = config(resources={"rate_limits": {"api": "1/hour"}})
    async with runtime(sqlite_url, cfg) as rt:
        record = await rt.launch(flows.flaky, {"marker": str(tmp_path / "never")})
        (tmp_path / "never").touch()  # the task succeeds at its first attempt
        engines = Engines(sqlite_url, tmp_path / "logs", cfg)
        try:
            first = await asyncio.to_thread(engines.start, "ratelimit.after_admit:1")
            await engines.crashed(first)
            await asyncio.to_thread(engines.start)
            done = await wait_terminal(rt, [record.id], within=120)
        finally:
            engines.stop_all()
        assert done[record.id].phase is ExecutionPhase.SUCCEEDED
        admitted = [e for e in (await outcome(rt, record.id)).events if e.phase == "RATE_ADMITTED"]
        assert [e.info["repeated"] for e in admitted if e.info] == [True]  # the first is lost
        [limit] = await rt.rate_limits.describe("api")
        [key] = limit.keys
        assert key.available == 0
        assert key.next_free - time.time() <= 3600  # one unit spent, not two
