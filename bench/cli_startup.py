"""Start-up of the command line, measured against the interpreter's own start-up in the same
run: `python -c pass`, `sluice --help`, and `sluice run` of a one-task workflow on a warm
embedded store, in alternating rounds so that load on the machine falls on all three alike.
Bytecode caching is on for the commands (PYTHONDONTWRITEBYTECODE is dropped), as for an
installed package.

Prints one JSON line: the median and spread of each, each median over `python -c pass`, the
median CPU time of each (the command and the processes it waited for, its worker included),
and the load average before and after the rounds.
With `--baseline-python`, the same two sluice commands also run from another installation
(say a checkout of an older commit in its own venv), alternating with this one.

    python bench/cli_startup.py [--rounds 7] [--baseline-python OTHER/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ONE_TASK = """
import sluice


@sluice.task
def hello(name: str = "world") -> str:
    return f"hello {name}"


@sluice.workflow
def one(name: str = "world") -> str:
    return hello(name=name)
"""


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall time, and CPU time (user + system) of the command and the processes it waited
    for (a run's worker): on a loaded machine the CPU moves far less than the wall time."""
    started = time.perf_counter()
    with tempfile.TemporaryFile() as errors:
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errors)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            errors.seek(0)
            raise SystemExit(f"{command} failed: {errors.read().decode(errors='replace')}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--baseline-python", help="Another installation's interpreter.")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp())
    (work / "one.py").write_text(ONE_TASK)
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{work}/bench.db"}
    # An installed sluice has its bytecode cached; with PYTHONDONTWRITEBYTECODE (set on some
    # machines) every run would compile the package from source again (~0.3 s here).
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    sluice = [sys.executable, "-m", "sluice"]
    commands = {
        "python_pass": [sys.executable, "-c", "pass"],
        "help": [*sluice, "--help"],
        "run_one_task": [*sluice, "run", f"{work}/one.py:one"],
    }
    if args.baseline_python:
        other = [args.baseline_python, "-m", "sluice"]
        commands["baseline_help"] = [*other, "--help"]
        baseline_env = {**env, "SLUICE_DATABASE_URL": f"sqlite:///{work}/baseline.db"}
        commands["baseline_run_one_task"] = [*other, "run", f"{work}/one.py:one"]
        _timed(commands["baseline_run_one_task"], baseline_env)
    envs = {name: baseline_env if name.startswith("baseline") else env for name in commands}
    _timed(commands["run_one_task"], env)  # creates the store: measured runs find it warm
    seen: dict[str, list[float]] = {name: [] for name in commands}
    cpu: dict[str, list[float]] = {name: [] for name in commands}
    load_before = os.getloadavg()[0]
    for _ in range(args.rounds):
        for name, command in commands.items():
            wall, used = _timed(command, envs[name])
            seen[name].append(wall)
            cpu[name].append(used)
    floor = statistics.median(seen["python_pass"])
    report: dict[str, object] = {
        "bench": "cli_startup",
        "rounds": args.rounds,
        "load_average": [round(load_before, 1), round(os.getloadavg()[0], 1)],
    }
    for name, times in seen.items():
        median = statistics.median(times)
        report[name] = {
            "median_s": round(median, 3),
            "min_s": round(min(times), 3),
            "max_s": round(max(times), 3),
            "over_python_pass": round(median / floor, 1),
            "cpu_median_s": round(statistics.median(cpu[name]), 3),
        }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
