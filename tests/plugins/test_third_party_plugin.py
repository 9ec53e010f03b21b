"""A third-party plugin package, installed with pip, found through the `sluice.plugins`
entry point, and run by the engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "examples" / "third_party_plugin"


def test_installed_plugin_is_registered_and_runs(tmp_path: Path) -> None:
    site = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--target",
            str(site),
            str(PACKAGE),
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    env = {
        **os.environ,
        "PYTHONPATH": str(site),
        "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 's.db'}",
    }

    def sluice(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "sluice", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=120,
        )

    plugins = {p["id"]: p for p in json.loads(sluice("plugins", "ls", "--json").stdout)}
    assert plugins["wait"]["source"] == "entry point"
    assert plugins["wait"]["task_types"] == ["wait"]
    ran = sluice("run", f"{PACKAGE / 'flows.py'}:paced")
    assert ran.returncode == 0, ran.stderr
    assert 'outputs: {"o0": "waited 0.3s"}' in ran.stdout
    without = {**env, "PYTHONPATH": ""}
    missing = subprocess.run(
        [sys.executable, "-m", "sluice", "run", f"{PACKAGE / 'flows.py'}:paced"],
        capture_output=True,
        text=True,
        env=without,
        cwd=tmp_path,
        timeout=120,
    )
    assert missing.returncode == 2  # refused at launch: nothing is written
    assert "no plugin handles task type 'wait'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
