"""sluice against Prefect and Dagster on the same machine, in alternating rounds: a fan-out of
N no-op tasks and a chain of M dependent ones, each framework in its own child process.

Prefect and Dagster are installed by this script only, from PyPI with pip, into a throwaway
virtual environment under a temporary directory (or the one given with --venv, kept for the
next run); they are never dependencies of sluice. Each child first runs a one-task warm-up
(Prefect starts its ephemeral API server, Dagster its ephemeral instance, sluice creates its
store), then times each shape from the call to the result, in-process: Prefect's flow on its
default thread-pool task runner, Dagster's `execute_in_process`, sluice's `run_async` on the
embedded store with its local process pool.

Prints one JSON line per shape: each framework's median tasks/s and spread over the rounds,
and sluice's ratio to each.

    python bench/peers.py [--fanout 1000] [--chain 200] [--rounds 3] [--quick]
                          [--venv DIR] [--prefect 3.9.1] [--dagster 1.13.28]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent

PREFECT = textwrap.dedent(
    """
    import json, sys, time
    from prefect import flow, task

    @task
    def noop(i: int) -> int:
        return i

    @task
    def step(i: int) -> int:
        return i + 1

    @flow
    def fanout(n: int) -> None:
        for future in noop.map(range(n)):
            future.result()

    @flow
    def chain(n: int) -> int:
        value = 0
        for _ in range(n):
            value = step(value)
        return value

    fanout_n, chain_n = int(sys.argv[1]), int(sys.argv[2])
    fanout(1)
    out = {}
    for name, shape, n in (("fanout", fanout, fanout_n), ("chain", chain, chain_n)):
        started = time.perf_counter()
        shape(n)
        out[name] = time.perf_counter() - started
    print(json.dumps(out))
    """
)

DAGSTER = textwrap.dedent(
    """
    import json, sys, time
    from dagster import job, op

    @op
    def noop() -> int:
        return 0

    @op
    def start() -> int:
        return 0

    @op
    def step(value: int) -> int:
        return value + 1

    def fanout(n):
        @job(name=f"fanout{n}")
        def wf():
            for i in range(n):
                noop.alias(f"noop{i}")()
        return wf

    def chain(n):
        @job(name=f"chain{n}")
        def wf():
            value = start()
            for i in range(n - 1):
                value = step.alias(f"step{i}")(value)
        return wf

    fanout_n, chain_n = int(sys.argv[1]), int(sys.argv[2])
    assert fanout(1).execute_in_process().success
    out = {}
    for name, build, n in (("fanout", fanout, fanout_n), ("chain", chain, chain_n)):
        started = time.perf_counter()
        assert build(n).execute_in_process().success
        out[name] = time.perf_counter() - started
    print(json.dumps(out))
    """
)

SLUICE = textwrap.dedent(
    """
    import asyncio, json, sys, tempfile, time
    sys.path.insert(0, sys.argv[3])
    from engine_overhead import chain, fanout, run_once
    from sluice.config import load_config

    fanout_n, chain_n = int(sys.argv[1]), int(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_config(
            database_url=f"sqlite:///{tmp}/peers.db", engine={"parallelism": 1000}
        )
        asyncio.run(run_once(chain(1), settings))
        out = {}
        for name, shape, n in (("fanout", fanout, fanout_n), ("chain", chain, chain_n)):
            workflow = shape(n)
            started = time.perf_counter()
            asyncio.run(run_once(workflow, settings))
            out[name] = time.perf_counter() - started
    print(json.dumps(out))
    """
)


def make_venv(where: Path, prefect: str, dagster: str) -> Path:
    python = where / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    packages = [f"prefect=={prefect}", f"dagster=={dagster}"]
    check = [str(python), "-c", "import prefect, dagster"]
    if subprocess.run(check, capture_output=True).returncode != 0:
        install = [str(python), "-m", "pip", "install", "-q", *packages]
        subprocess.run(install, check=True)
    return python


class ChildFailed(Exception):
    """A framework's child process failed: its exit status and the end of its stderr."""


def run_child(
    name: str, python: str, script: str, fanout: int, chain: int, env: dict[str, str]
) -> Any:
    command = [python, "-c", script, str(fanout), str(chain), str(HERE)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:  # say why: the peers' own errors, not only an exit status
        tail = "\n".join(done.stderr.strip().splitlines()[-15:])
        raise ChildFailed(f"{name}: exit status {done.returncode}\n{tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fanout", type=int, default=1000)
    parser.add_argument("--chain", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--venv", help="the peers' virtual environment (created if absent, kept)")
    parser.add_argument("--prefect", default="3.9.1", help="Prefect version from PyPI")
    parser.add_argument("--dagster", default="1.13.28", help="Dagster version from PyPI")
    parser.add_argument("--quick", action="store_true", help="fan-out 100, chain 20, 1 round")
    args = parser.parse_args()
    if args.quick:
        args.fanout, args.chain, args.rounds = 100, 20, 1
    with tempfile.TemporaryDirectory(prefix="sluice-peers-") as tmp:
        work = Path(tmp)
        peer_python = str(make_venv(Path(args.venv or work / "venv"), args.prefect, args.dagster))
        env = {
            **os.environ,
            "PREFECT_LOGGING_LEVEL": "WARNING",
            # Prefect's default (20 s) for its ephemeral server's start-up times out on this
            # 2-core machine when it is busy; the start-up is outside the timed calls.
            "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "120",
        }
        frameworks = {
            "sluice": (sys.executable, SLUICE),
            "prefect": (peer_python, PREFECT),
            "dagster": (peer_python, DAGSTER),
        }
        seen: dict[str, dict[str, list[float]]] = {
            name: {"fanout": [], "chain": []} for name in frameworks
        }
        failed = {name: 0 for name in frameworks}
        for round_no in range(args.rounds):  # alternating: load falls on all alike
            for name, (python, script) in frameworks.items():
                times = None
                for attempt in range(2):  # a peer's failed round is tried once more
                    # Each round starts from empty homes, as sluice's child starts from an
                    # empty store: no framework's database grows over the rounds.
                    home = work / f"{name}-{round_no}-{attempt}"
                    home.mkdir()
                    homes = {"PREFECT_HOME": str(home), "DAGSTER_HOME": str(home)}
                    try:
                        times = run_child(
                            name, python, script, args.fanout, args.chain, {**env, **homes}
                        )
                        break
                    except ChildFailed as exc:
                        failed[name] += 1
                        print(exc, file=sys.stderr)
                for shape, seconds in (times or {}).items():
                    seen[name][shape].append(seconds)
    for shape, tasks in (("fanout", args.fanout), ("chain", args.chain)):
        report: dict[str, Any] = {"bench": "peers", "shape": shape, "tasks": tasks}
        rates = {}
        for name in frameworks:
            per_s = [tasks / seconds for seconds in seen[name][shape]]
            rates[name] = statistics.median(per_s) if per_s else float("nan")
            report[name] = {
                "tasks_per_s": round(rates[name], 1),
                "min": round(min(per_s), 1) if per_s else None,
                "max": round(max(per_s), 1) if per_s else None,
                "failed_runs": failed[name],
            }
        for peer in ("prefect", "dagster"):
            report[f"sluice_over_{peer}"] = round(rates["sluice"] / rates[peer], 2)
        print(json.dumps(report))


if __name__ == "__main__":
    main()
