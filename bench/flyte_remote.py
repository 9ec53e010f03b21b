"""`pyflyte run --remote --wait` of a 3-task flytekit workflow against `sluice serve`, against the
same workflow run by `sluice run`, alternating, several rounds (not a test).

One `sluice serve` (SQLite in a temporary directory, 2 workers) serves every remote round;
each `pyflyte run --remote --wait --poll-interval 1` is a fresh process (flytekit imported,
the script fast-registered, the execution created, then polled every second: flytekit's
smallest interval, so a remote round ends up to a second after the execution). Each `sluice run`
is a fresh process on its own SQLite file (2 workers, started cold). The first round of each
is a warm-up, not counted. Prints one JSON line: each round's seconds, the medians and their
ratio. Needs `sluice[flyte]`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLOWS = """
from flytekit import task, workflow


@task
def double(x: int) -> int:
    return 2 * x


@task
def add(a: int, b: int) -> int:
    return a + b


@task
def describe(total: int) -> str:
    return f"total={total}"


@workflow
def pipeline(x: int = 3) -> str:
    return describe(total=add(a=double(x=x), b=x))
"""


def _serve(home: Path) -> tuple[subprocess.Popen[str], str]:
    log = home / "serve.log"
    command = [sys.executable, "-m", "sluice", "--db", f"sqlite:///{home / 'serve.db'}"]
    command += ["serve", "--port", "0", "--flyte-port", "0"]
    env = {**os.environ, "SLUICE_ENGINE__WORKERS": "2"}
    with log.open("w") as out:
        server = subprocess.Popen(
            command, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = re.search(r"Flyte gRPC API on (\S+) ", log.read_text())
        if found:
            return server, found.group(1)
        if server.poll() is not None:
            raise SystemExit(f"sluice serve exited:\n{log.read_text()}")
        time.sleep(0.2)
    server.kill()
    raise SystemExit("sluice serve did not start")


def _timed(command: list[str], cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{command} failed:\n{done.stdout}\n{done.stderr}")
    return seconds


def _remote(project: Path, config: Path) -> float:
    pyflyte = str(Path(sys.executable).with_name("pyflyte"))
    command = [pyflyte, "--config", str(config), "run", "--remote", "--wait"]
    command += ["--poll-interval", "1", "bench_flows/chain.py", "pipeline", "--x", "5"]
    return _timed(command, project, dict(os.environ))


def _local(project: Path, work: Path) -> float:
    db = work / f"run-{time.monotonic_ns()}.db"
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "SLUICE_ENGINE__WORKERS": "2"}
    target = "bench_flows/chain.py:pipeline"
    command = [sys.executable, "-m", "sluice", "run", target, "--input", "x=5", "--json"]
    return _timed(command, project, env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        project = home / "project"
        (project / "bench_flows").mkdir(parents=True)
        (project / "bench_flows" / "__init__.py").write_text("")
        (project / "bench_flows" / "chain.py").write_text(FLOWS)
        server, endpoint = _serve(home)
        try:
            config = home / "config.yaml"
            config.write_text(f"admin:\n  endpoint: dns:///{endpoint}\n  insecure: true\n")
            remote, local = [], []
            for round_ in range(args.rounds + 1):  # round 0 warms both up
                took_remote, took_local = _remote(project, config), _local(project, home)
                if round_:
                    remote.append(round(took_remote, 2))
                    local.append(round(took_local, 2))
        finally:
            server.terminate()
            server.wait(timeout=30)
    figures = {
        "workflow": "3 flytekit tasks in a chain",
        "rounds": args.rounds,
        "pyflyte_run_remote_wait_s": remote,
        "sluice_run_s": local,
        "median_remote_s": statistics.median(remote),
        "median_sluice_run_s": statistics.median(local),
        "remote_over_sluice_run": round(statistics.median(remote) / statistics.median(local), 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
