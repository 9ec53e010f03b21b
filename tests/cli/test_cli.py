"""The `sluice` command in a subprocess, as a user runs it."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FLOWS = ROOT / "tests" / "engine" / "flows.py"
QUICKSTART = ROOT / "examples" / "quickstart.py"


def sluice(*args: str, db: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "SLUICE_ENGINE__WORKERS": "2"}
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd=ROOT,
    )


def execution_count(db: Path) -> int:
    if not db.exists():
        return 0
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT count(*) FROM executions").fetchone()[0])


def test_quickstart_runs_through_the_cli(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    done = sluice("run", f"{QUICKSTART}:quickstart", "--input", "scale=2", db=db)
    assert done.returncode == 0, done.stderr
    assert 'outputs: {"o0": 280}' in done.stdout
    assert "node total" in done.stdout and "SUCCESS" in done.stdout  # live progress lines
    listed = sluice("executions", "ls", "--json", db=db)
    rows = json.loads(listed.stdout)
    assert [r["phase"] for r in rows] == ["SUCCEEDED"]
    shown = json.loads(sluice("executions", "show", rows[0]["id"], "--json", db=db).stdout)
    assert {n["node"] for n in shown["nodes"]} >= {"square", "total"}
    assert shown["events"], "show --json lists the events"


def test_executions_show_accepts_the_short_id_ls_shows(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    for _ in range(2):
        assert sluice("run", f"{QUICKSTART}:quickstart", "--json", db=db).returncode == 0
    ids = [r["id"] for r in json.loads(sluice("executions", "ls", "--json", db=db).stdout)]
    table = sluice("executions", "ls", db=db).stdout
    short = next(line.split()[0] for line in table.splitlines() if line.startswith("x"))
    assert short != ids[0] and (ids[0].startswith(short) or ids[1].startswith(short))
    shown = sluice("executions", "show", short, "--json", db=db)
    assert shown.returncode == 0, shown.stderr
    assert json.loads(shown.stdout)["id"].startswith(short)
    ambiguous = sluice("executions", "show", "x", db=db)
    assert ambiguous.returncode == 2
    assert (
        "ambiguous" in ambiguous.stderr
        and ids[0] in ambiguous.stderr
        and ids[1] in ambiguous.stderr
    )


def test_python_examples_quickstart_main(tmp_path: Path) -> None:
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{tmp_path / 'q.db'}"}
    done = subprocess.run(
        [sys.executable, str(QUICKSTART)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert 'outputs: {"o0": 140}' in done.stdout


def test_failure_exit_code_and_error_line(tmp_path: Path) -> None:
    done = sluice("run", f"{FLOWS}:failing", db=tmp_path / "s.db")
    assert done.returncode == 1
    assert "error in node boom: RuntimeError" in done.stderr


@pytest.mark.parametrize(
    ("args", "culprit"),
    [
        (["run", f"{FLOWS}:no_such_workflow"], "no_such_workflow"),
        (["run", f"{FLOWS}:needs_input"], "'x'"),
        (["run", f"{FLOWS}:needs_input", "--input", "x=abc"], "'x'"),
        (["run", f"{FLOWS}:needs_input", "--input", "y=1"], "'y'"),
        (["run", f"{FLOWS}:needs_input", "--inputs", "[1]"], "JSON object"),
        (["run", f"{FLOWS}:bad_plugin_config"], "'timeout'"),
        (["run", f"{FLOWS}:unknown_task_type"], "registered plugins: "),
        (["run", str(tmp := "missing_file.py") + ":wf"], tmp),
    ],
)
def test_bad_input_is_one_line_naming_the_culprit_and_writes_nothing(
    tmp_path: Path, args: list[str], culprit: str
) -> None:
    db = tmp_path / "s.db"
    done = sluice(*args, db=db)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and culprit in lines[0], done.stderr
    assert execution_count(db) == 0


def test_unreachable_database_is_exit_4(tmp_path: Path) -> None:
    done = sluice(
        "--db",
        "postgresql://postgres@127.0.0.1:1/nothing",
        "executions",
        "ls",
        db=tmp_path / "unused.db",
    )
    assert done.returncode == 4
    assert len(done.stderr.strip().splitlines()) == 1
    assert "127.0.0.1:1" in done.stderr


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("these are my notes, not a database\n" * 50)
    before = notes.read_bytes()
    done = sluice("run", f"{QUICKSTART}:quickstart", db=notes)
    assert done.returncode == 2
    assert "is not a SQLite database" in done.stderr and str(notes) in done.stderr
    assert notes.read_bytes() == before
    assert not Path(f"{notes}-wal").exists()


def test_plugins_ls_and_db_upgrade(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    upgraded = sluice("db", "upgrade", db=db)
    assert upgraded.returncode == 0 and "schema revision" in upgraded.stdout
    plugins = json.loads(sluice("plugins", "ls", "--json", db=db).stdout)
    ids = {p["id"] for p in plugins}
    assert {"python", "shell"} <= ids


def test_cache_and_reservations_commands(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    ran = sluice("run", f"{FLOWS}:cached", "--input", f"directory={tmp_path}", db=db)
    assert ran.returncode == 0
    entries = json.loads(sluice("cache", "ls", "--json", db=db).stdout)
    assert [e["task"] for e in entries] == ["flows.cached_double"]
    assert json.loads(sluice("reservations", "ls", "--json", db=db).stdout) == []
    removed = sluice("cache", "rm", entries[0]["key"], db=db)
    assert removed.stdout.strip() == "removed 1 cache entry"
    assert json.loads(sluice("cache", "ls", "--json", db=db).stdout) == []
    nothing = sluice("cache", "rm", db=db)
    assert nothing.returncode == 2 and "needs KEY" in nothing.stderr
