"""A Dask cluster on this machine, started and owned by one process: a scheduler and one
`dask worker` process with `workers` worker processes, all on 127.0.0.1, each a process of
its own (not a LocalCluster inside the engine: the engine's process stays the engine's, and
stopping the cluster stops the work), stopped by process id (sluice.plugins.local_processes).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from sluice.plugins.local_processes import LOOPBACK, free_port, start_owned, stop_owned


class LocalDaskCluster:
    def __init__(self, workers: int = 2, threads: int = 1, python: str = "") -> None:
        self.workers = workers
        self.threads = threads
        self.python = python or sys.executable
        self.port = free_port()
        self.log_dir = tempfile.mkdtemp(prefix="sluice-dask-")
        self._processes: list[subprocess.Popen[bytes]] = []

    @property
    def address(self) -> str:
        return f"tcp://{LOOPBACK}:{self.port}"

    @property
    def pids(self) -> list[int]:
        return [p.pid for p in self._processes]

    def launch(self) -> None:
        """Start the scheduler and the workers (returns at once; a client waits for them)."""
        scheduler = ["distributed.cli.dask_scheduler", f"--host={LOOPBACK}"]
        scheduler += [f"--port={self.port}", "--no-dashboard"]
        worker = ["distributed.cli.dask_worker", self.address, f"--host={LOOPBACK}"]
        worker += [f"--nworkers={self.workers}", f"--nthreads={self.threads}", "--no-dashboard"]
        worker += ["--death-timeout=60"]  # workers of a scheduler that is gone end themselves
        for name, args in (("scheduler", scheduler), ("worker", worker)):
            log = Path(self.log_dir) / f"{name}.log"
            self._processes.append(start_owned([self.python, "-m", *args], os.environ, log))

    def stop(self, grace: float = 10.0) -> None:
        """Workers first, then the scheduler; blocks up to `grace` seconds per process."""
        for process in reversed(self._processes):
            stop_owned(process, grace)
        self._processes.clear()
        shutil.rmtree(self.log_dir, ignore_errors=True)
