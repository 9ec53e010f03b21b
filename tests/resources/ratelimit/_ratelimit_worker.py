"""Code run in the spawned processes of test_ratelimit_processes.py (importable by name).

Every worker judges on the store's own clock (clock=None), as production does, and keeps its
own timestamps: (asked, answered) in time.time_ns() around each granted admission. The true
admission instant lies between the two."""

from __future__ import annotations

import asyncio
import contextlib
import time
from pathlib import Path
from typing import Any

from sluice.faults import KillAt, install
from sluice.resources.ratelimit import RateClaim, RateLimitRule, RateLimits, from_url

LIMIT = "race"
CLAIM = [RateClaim(LIMIT, "k")]


def limits_for(url: str, key_prefix: str, rate: str) -> RateLimits:
    rules = {LIMIT: RateLimitRule.parse(rate)}
    return RateLimits(from_url(url, key_prefix=key_prefix), config_rules=rules)


def race(
    url: str,
    key_prefix: str,
    rate: str,
    index: int,
    seconds: float,
    barrier: Any,
    results: Any,
) -> None:
    """Admit as fast as the limit allows for `seconds` after the barrier; put ("ok", index,
    [(asked_ns, answered_ns)], refusals)."""
    try:
        granted, refusals = asyncio.run(_race(url, key_prefix, rate, index, seconds, barrier))
        results.put(("ok", index, granted, refusals))
    except BaseException as exc:
        barrier.abort()  # the others must not wait for this process forever
        results.put(("error", index, repr(exc), 0))


async def _race(
    url: str, key_prefix: str, rate: str, index: int, seconds: float, barrier: Any
) -> tuple[list[tuple[int, int]], int]:
    limits = limits_for(url, key_prefix, rate)
    granted: list[tuple[int, int]] = []
    refusals, n = 0, 0
    async with limits:
        barrier.wait()
        until = time.time() + seconds
        while time.time() < until:
            token = f"p{index}-{n}"
            asked = time.time_ns()
            admission = await limits.admit(CLAIM, token, remember=0)
            answered = time.time_ns()
            if admission.granted:
                granted.append((asked, answered))
                n += 1
            else:
                refusals += 1  # keep the place in line: ask again with the same token
                await asyncio.sleep(min(admission.wait, 0.25))
        with contextlib.suppress(Exception):
            await limits.withdraw(CLAIM, f"p{index}-{n}")
    return granted, refusals


def spend(
    url: str, key_prefix: str, rate: str, journal: str, kill_at: int, pace: float, barrier: Any
) -> None:
    """Take units of the budget until it is spent, writing each step to `journal` before and
    after the store's answer; with `kill_at` > 0, SIGKILL this process right after the store
    judged that admission (before its answer is used). A restarted worker first asks again
    with the token it was asking with when it died."""
    if kill_at:
        install(KillAt(("ratelimit.after_admit",), nth=kill_at))
    path = Path(journal)
    lines = path.read_text().splitlines() if path.exists() else []
    asyncio.run(_spend(url, key_prefix, rate, path, lines, pace, barrier))


async def _spend(
    url: str,
    key_prefix: str,
    rate: str,
    journal: Path,
    lines: list[str],
    pace: float,
    barrier: Any,
) -> None:
    limits = limits_for(url, key_prefix, rate)
    pending = _pending(lines)
    n = sum(1 for line in lines if line.startswith("asking "))
    async with limits:
        if barrier is not None:
            barrier.wait()
        with journal.open("a") as out:
            while True:
                token = pending or f"{journal.stem}-{n}"
                pending, n = None, n + 1
                out.write(f"asking {token}\n")
                out.flush()
                admission = await limits.admit(CLAIM, token, remember=600.0)
                if not admission.granted:
                    out.write(f"refused {token} {admission.wait}\n")
                    out.flush()
                    if admission.wait > 60:  # the budget is spent for the hour
                        await limits.withdraw(CLAIM, token)
                        return
                    pending = token  # in line: ask again with the same token at its slot
                    await asyncio.sleep(admission.wait)
                    continue
                out.write(f"granted {token} {int(admission.repeated)}\n")
                out.flush()
                await asyncio.sleep(pace)


def _pending(lines: list[str]) -> str | None:
    """The token asked for last, if its answer was never written (the process died)."""
    if lines and lines[-1].startswith("asking "):
        return lines[-1].split(" ", 1)[1]
    return None
