"""`sluice quota set NAME N --preempt` stores the flag for every process; a bad config value
is refused naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sluice.clock import SystemClock
from sluice.config import ConfigError, load_config
from sluice.resources import QuotaManager
from sluice.resources.backends.sql import SqlBackend

from .test_cli_db import sluice


async def test_quota_set_preempt_turns_preemption_on_and_off(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    on = sluice("--db", str(db), "quota", "set", "hive", "2", "--preempt")
    assert on.returncode == 0, on.stderr
    assert "preemption on" in on.stdout
    async with QuotaManager(SqlBackend(url=f"sqlite:///{db}"), clock=SystemClock()) as manager:
        assert manager.preempts("hive") and not manager.preempts("other")
    off = sluice("--db", str(db), "quota", "set", "hive", "2", "--no-preempt")
    assert off.returncode == 0, off.stderr
    async with QuotaManager(SqlBackend(url=f"sqlite:///{db}"), clock=SystemClock()) as manager:
        assert not manager.preempts("hive")


def test_a_bad_preempt_pattern_in_the_config_names_it() -> None:
    with pytest.raises(ConfigError, match=r"resources.preempt.*' warehouse'"):
        load_config(resources={"preempt": [" warehouse"]})
