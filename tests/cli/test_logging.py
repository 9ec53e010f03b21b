"""One logging set-up for the long-running commands: level and text or JSON lines."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.cli.logging_setup import configure

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "engine" / "flows.py"


@pytest.fixture(autouse=True)
def restore_logging() -> object:
    root, ours = logging.getLogger(), logging.getLogger("sluice")
    handlers, levels = list(root.handlers), (root.level, ours.level)
    yield None
    root.handlers[:] = handlers
    root.setLevel(levels[0])
    ours.setLevel(levels[1])


def test_json_lines_carry_time_level_logger_and_message(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure("DEBUG", "json")
    logging.getLogger("sluice.engine").debug("engine %s started", "e1")
    logging.getLogger("aiosqlite").debug("noise from a library")
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert [(e["level"], e["logger"], e["message"]) for e in lines] == [
        ("DEBUG", "sluice.engine", "engine e1 started")
    ]
    assert lines[0]["time"].endswith("Z")


def test_text_lines_and_the_level_threshold(capsys: pytest.CaptureFixture[str]) -> None:
    configure("WARNING", "text")
    logging.getLogger("sluice.engine").info("not shown")
    logging.getLogger("sluice.engine").warning("store lost")
    err = capsys.readouterr().err
    assert "not shown" not in err
    assert err.rstrip().endswith("WARNING sluice.engine: store lost")


def test_run_logs_the_engine_and_the_execution_as_json(tmp_path: Path) -> None:
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path}/s.db"}
    done = subprocess.run(
        [sys.executable, "-m", "sluice", "run", f"{FLOWS}:fan",
         "--log-level", "info", "--log-format", "json"],
        capture_output=True, text=True, env=env, timeout=180, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines() if line.startswith("{")]
    messages = [r["message"] for r in records]
    assert any("claimed execution" in m for m in messages), messages
    assert any(m.endswith("ended SUCCEEDED") for m in messages), messages
    assert any(m.endswith("stopped") for m in messages), messages
