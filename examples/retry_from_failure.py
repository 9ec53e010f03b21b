"""Retry a failed execution from its failed nodes: the nodes that succeeded are reused with
their recorded outputs (they do not run again), the failed one runs, and the retry is a new
execution that names the one it retries. The web UI's "Retry from the failed nodes" button
and `POST /api/v1/executions/ID/retry` do the same.

    python examples/retry_from_failure.py
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import sluice
from sluice.config import load_config
from sluice.service import RunRequest, Sluice


@sluice.task
def extract(directory: str, n: int) -> list[int]:
    """Slow and expensive in real life: counts its runs, to show it runs once."""
    runs = Path(directory) / "extract.runs"
    runs.write_text(str(int(runs.read_text()) + 1) if runs.exists() else "1")
    return list(range(n))


@sluice.task
def load(directory: str, rows: list[int]) -> int:
    if (Path(directory) / "warehouse.readonly").exists():
        raise RuntimeError("the warehouse is read-only")
    return sum(rows)


@sluice.workflow
def nightly_load(directory: str, n: int = 5) -> int:
    return load(directory=directory, rows=extract(directory=directory, n=n))


async def main() -> None:
    directory = tempfile.mkdtemp()
    (Path(directory) / "warehouse.readonly").touch()  # the first run fails in `load`
    async with await Sluice.open(load_config()) as service:
        failed = await service.run_to_end(RunRequest.of(nightly_load, {"directory": directory}))
        print(f"first run {failed.id}: {failed.phase.value}")
        (Path(directory) / "warehouse.readonly").unlink()  # fixed
        retried = await service.retry(failed.id, wait=True)
        shown = await service.execution(retried.id)
        print(f"retry {shown.id} of {shown.retry_of}: {shown.phase}, outputs: {shown.outputs}")
        for node in shown.nodes:
            print(f"  {node.node}: {node.phase} {node.reason}")
        print(f"extract ran {(Path(directory) / 'extract.runs').read_text()} time(s)")


if __name__ == "__main__":
    asyncio.run(main())
