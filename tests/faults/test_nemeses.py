"""One deterministic test per nemesis (scenarios.py), each judged by the history checker over
what the task bodies and their worker processes really did.

Each fault lasts longer than every lease: an engine frozen (alone, or with its workers),
cut off its stores, or slowed must stop its bodies before its leases lapse for others, and a
skewed clock must change nothing. The controls (a fault shorter than the leases, hostnames
and namespaces without skew) check that the harness itself finds nothing where nothing is
wrong; they run with SLUICE_NEMESIS_CONTROLS=1 (not in CI: once the faults are handled,
every test here is one that must pass). Run with -s to see each run's counts and violations.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from faults import scenarios
from faults.hosts import require_faketime
from faults.network import require_namespaces

CONTROLS = os.environ.get("SLUICE_NEMESIS_CONTROLS") == "1"


async def _check(
    name: str, url: str, tmp_path: Path, backend: str, tokens: dict[str, str] | None = None
) -> None:
    outcome = await scenarios.run(name, url, tmp_path, backend, tokens)
    scenarios.show(outcome)
    assert outcome.report.violations == [], outcome.report.violations[:10]
    assert outcome.report.bodies >= 5 * scenarios.EXECUTIONS


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pause", "pause-workers"] + ["pause-short"] * CONTROLS)
async def test_pause_on_sqlite(name: str, sqlite_url: str, tmp_path: Path) -> None:
    await _check(name, sqlite_url, tmp_path, "sqlite")


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("name", ["pause", "pause-workers"])
async def test_pause_on_postgresql(name: str, pg_url: str, tmp_path: Path) -> None:
    await _check(name, pg_url, tmp_path, "postgresql")


@pytest.mark.slow
@pytest.mark.postgres
async def test_clock_ahead_on_postgresql(pg_url: str, tmp_path: Path) -> None:
    require_faketime()
    require_namespaces()
    await _check("skew+90", pg_url, tmp_path, "postgresql")


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.redis
async def test_clock_behind_with_redis_tokens(
    pg_url: str, redis_server_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    require_faketime()
    require_namespaces()
    tokens = {"url": redis_server_url, "key_prefix": redis_prefix}
    await _check("skew-90", pg_url, tmp_path, "postgresql+redis", tokens)


@pytest.mark.slow
@pytest.mark.postgres
@pytest.mark.parametrize("name", ["partition", "slow"] + ["partition-short", "skew0"] * CONTROLS)
async def test_network_on_postgresql(name: str, pg_url: str, tmp_path: Path) -> None:
    require_namespaces()
    await _check(name, pg_url, tmp_path, "postgresql")
