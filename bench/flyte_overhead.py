"""Per-task overhead of a flytekit task on sluice, against a native sluice task and against
`pyflyte run` (flytekit's local runner), for a chain of 50 tasks (not a test).

Each runner runs a chain of 1 and a chain of 50 in a fresh process (`sluice run` on its own
SQLite file, one worker; `pyflyte run`); the per-task figure is (t50 - t1) / 49, so process
start-up and imports cancel out. `--repeat N` takes the best of N runs of each. Prints one
JSON line. Needs `sluice[flyte]`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _seconds(command: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command, env=env, check=True, capture_output=True, cwd=HERE)
    return time.perf_counter() - started


def _sluice(module: str, workflow: str, work: Path) -> float:
    db = work / f"{module}-{workflow}-{time.monotonic_ns()}.db"
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}", "SLUICE_ENGINE__WORKERS": "1"}
    target = f"{HERE / (module + '.py')}:{workflow}"
    return _seconds([sys.executable, "-m", "sluice", "run", target, "--json"], env)


def _pyflyte(workflow: str, _: Path) -> float:
    pyflyte = str(Path(sys.executable).with_name("pyflyte"))
    return _seconds(
        [pyflyte, "run", str(HERE / "flyte_chain_flows.py"), workflow], dict(os.environ)
    )


def _per_task(run: object, repeat: int, work: Path) -> dict[str, float]:
    one = min(run("chain1", work) for _ in range(repeat))  # type: ignore[operator]
    fifty = min(run("chain50", work) for _ in range(repeat))  # type: ignore[operator]
    return {"chain1_s": round(one, 3), "chain50_s": round(fifty, 3),
            "per_task_ms": round((fifty - one) / 49 * 1000, 1)}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        figures = {
            "flytekit_on_sluice": _per_task(
                lambda w, d: _sluice("flyte_chain_flows", w, d), args.repeat, work
            ),
            "native_sluice": _per_task(
                lambda w, d: _sluice("native_chain_flows", w, d), args.repeat, work
            ),
            "pyflyte_run_local": _per_task(_pyflyte, args.repeat, work),
        }
    print(json.dumps({"bench": "flyte_overhead", "chain": 50, "cpus": os.cpu_count(), **figures}))


if __name__ == "__main__":
    main()
