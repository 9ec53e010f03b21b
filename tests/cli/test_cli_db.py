"""`--db`: read-only commands never create a database; a plain path is a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUICKSTART = ROOT / "examples" / "quickstart.py"


def sluice(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SLUICE_DATABASE_URL"}
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True,
        text=True,
        env={**env, "SLUICE_ENGINE__WORKERS": "2"},
        timeout=120,
        cwd=cwd,
    )


READ_ONLY = [
    ["executions", "ls"],
    ["executions", "show", "x1abc"],
    ["quota", "ls"],
    ["cache", "ls"],
    ["reservations", "ls"],
    ["locks", "ls"],
    ["launchplan", "ls"],
    ["concurrency", "status"],
    ["concurrency", "caps", "ls"],
    ["logs", "x1abc"],
]


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
@pytest.mark.parametrize("form", ["url", "path"])
def test_a_read_only_command_on_a_missing_database_says_so_and_creates_nothing(
    tmp_path: Path, command: list[str], form: str
) -> None:
    missing = tmp_path / "nonexistent" / "dir" / "x.db"
    url = f"sqlite:///{missing}" if form == "url" else str(missing)
    done = sluice("--db", url, *command)
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and str(missing) in lines[0] and "does not exist" in lines[0]
    assert done.stdout == ""
    assert not (tmp_path / "nonexistent").exists()


@pytest.mark.parametrize("relative", [True, False])
def test_a_plain_path_is_a_sqlite_database(tmp_path: Path, relative: bool) -> None:
    db = "./x.db" if relative else str(tmp_path / "x.db")
    ran = sluice("--db", db, "run", f"{QUICKSTART}:quickstart", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert (tmp_path / "x.db").is_file()
    listed = sluice("--db", db, "executions", "ls", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [r["phase"] for r in json.loads(listed.stdout)] == ["SUCCEEDED"]


def test_plugins_ls_answers_before_any_store_exists(tmp_path: Path) -> None:
    """What is installed, not what is stored: the first command a newcomer may run."""
    done = sluice("--db", str(tmp_path / "fresh" / "x.db"), "plugins", "ls", "--json")
    assert done.returncode == 0, done.stderr
    assert {"python", "shell"} <= {p["id"] for p in json.loads(done.stdout)}


def test_a_bare_file_name_is_a_sqlite_database(tmp_path: Path) -> None:
    """Issue 26: `--db s.db` was refused ("unknown database URL scheme ''") though the help
    says a file path works."""
    wrote = sluice("--db", "s.db", "quota", "set", "hive", "2", cwd=tmp_path)
    assert wrote.returncode == 0, wrote.stderr
    assert (tmp_path / "s.db").is_file()
    listed = sluice("--db", "s.db", "quota", "ls", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [(q["namespace"], q["quota"]) for q in json.loads(listed.stdout)] == [("hive", 2)]
