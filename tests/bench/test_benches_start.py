"""Every bench script starts: its imports resolve and `--help` exits 0 with a usage (a module
of tasks that benches import only has to import). A bench that rots (an import of a name
since renamed) fails here, not the next time someone measures."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


def test_there_are_benches() -> None:
    assert SCRIPTS


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_bench_starts(script: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(script), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=BENCH,
    )
    assert done.returncode == 0, done.stderr
    if '__name__ == "__main__"' in script.read_text():  # a script, not a module of tasks
        assert "usage" in done.stdout.lower(), done.stdout
