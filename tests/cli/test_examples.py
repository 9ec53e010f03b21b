"""The examples the README points to run as documented."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("script", "expected"),
    [
        ("partitions.py", '"o0": "a: rewrote [1, 2]\\nb: rewrote [2, 3]'),
        ("rate_limits.py", 'outputs: {"o0": "9 calls for acme, globex, initech"}'),
        ("http_job.py", 'outputs: {"o0": 20}'),
        ("map_task.py", 'outputs: {"o0": 104}'),
        ("dynamic.py", 'outputs: {"o0": "3 shards, total 10"}'),
        ("retry_from_failure.py", "outputs: {'o0': 10}\n  extract: SUCCEEDED reused from"),
        ("flyte_map.py", 'outputs: {"o0": 415}'),  # flytekit: in the test extra
        ("ray_job.py", 'outputs: {"o0": 494.0}'),  # its last workflow: task mode
    ],
)
def test_example_runs(tmp_path: Path, script: str, expected: str) -> None:
    if script == "ray_job.py":
        from support.clusters import require_ray

        require_ray()
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}"}
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script)],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert expected in done.stdout
