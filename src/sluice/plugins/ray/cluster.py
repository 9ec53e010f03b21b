"""A Ray cluster on this machine, started and owned by one process: a head (with the
dashboard, so the Jobs API) and worker nodes, every port on 127.0.0.1.

Each node is a `ray start --block` process (sluice.plugins.local_processes), stopped by its
process id: SIGTERM (it stops the node's Ray processes), then SIGKILL for any left. Never
`ray stop`, which stops every Ray process of the machine by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sluice.errors import SluiceError
from sluice.plugins.local_processes import LOOPBACK, free_port, log_tail, start_owned, stop_owned

# Ray's own switches for a cluster that stays on loopback: its address is the loopback one
# (not the host's external address) and it takes no token (nothing outside this host can
# reach it).
LOOPBACK_ENV = {
    "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
    "RAY_AUTH_MODE": "disabled",
    "RAY_USAGE_STATS_ENABLED": "0",
}
_PORT_OPTIONS = (
    "--node-manager-port",
    "--object-manager-port",
    "--dashboard-agent-listen-port",
    "--dashboard-agent-grpc-port",
    "--runtime-env-agent-port",
    "--metrics-export-port",
)


class ClusterStartError(SluiceError):
    """A local Ray cluster did not come up."""


class LocalRayCluster:
    """A head of `head_cpus` and `workers` nodes (their CPU counts), all on loopback."""

    def __init__(self, head_cpus: int = 2, workers: tuple[int, ...] = (), python: str = "") -> None:
        self.head_cpus = head_cpus
        self.workers = workers
        self.python = python or sys.executable
        self.gcs_port = free_port()
        self.dashboard_port = free_port()
        self.temp_dir = tempfile.mkdtemp(prefix="sluice-ray-")
        self._nodes: list[subprocess.Popen[bytes]] = []

    @property
    def address(self) -> str:
        """The dashboard URL: what the Jobs API is given."""
        return f"http://{LOOPBACK}:{self.dashboard_port}"

    @property
    def gcs_address(self) -> str:
        """What `ray.init(address=...)` is given."""
        return f"{LOOPBACK}:{self.gcs_port}"

    @property
    def pids(self) -> list[int]:
        return [node.pid for node in self._nodes]

    def environment(self) -> dict[str, str]:
        """The nodes' environment: loopback only, and `python` is this cluster's interpreter."""
        path = f"{Path(self.python).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        return {**os.environ, **LOOPBACK_ENV, "PATH": path}

    def launch(self) -> None:
        """Start every node's process (returns at once; `wait_ready` waits for the head).
        This process's own Ray driver (task mode) must stay on loopback too, and Ray reads
        its switches once, when first imported: they are set here, before any use of Ray."""
        for name, value in LOOPBACK_ENV.items():
            os.environ.setdefault(name, value)
        head = [
            "--head",
            f"--port={self.gcs_port}",
            f"--dashboard-host={LOOPBACK}",
            f"--dashboard-port={self.dashboard_port}",
            f"--ray-client-server-port={free_port()}",
            "--include-dashboard=true",
        ]
        self._nodes.append(self._start_node(head, self.head_cpus))
        for cpus in self.workers:
            self._nodes.append(self._start_node([f"--address={self.gcs_address}"], cpus))

    def _start_node(self, options: list[str], cpus: int) -> subprocess.Popen[bytes]:
        ports = [f"{option}={free_port()}" for option in _PORT_OPTIONS]
        command = [self.python, "-m", "ray.scripts.scripts", "start", "--block", *options]
        command += [f"--node-ip-address={LOOPBACK}", f"--num-cpus={cpus}", *ports]
        command += [f"--temp-dir={self.temp_dir}", "--disable-usage-stats"]
        log = Path(self.temp_dir) / f"node{len(self._nodes)}.log"
        return start_owned(command, self.environment(), log)

    async def wait_ready(self, within: float) -> None:
        """Return once the head's Jobs API answers; ClusterStartError after `within` seconds."""
        import httpx  # only a Ray task pays for it, not every engine start

        deadline = time.monotonic() + within

        async with httpx.AsyncClient(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self._nodes and self._nodes[0].poll() is not None:
                    raise ClusterStartError(f"the Ray head exited: {self._head_log()}")
                with contextlib.suppress(httpx.HTTPError):
                    if (await client.get(f"{self.address}/api/version")).status_code == 200:
                        return
                await asyncio.sleep(0.5)
        raise ClusterStartError(f"the Ray head did not answer in {within}s: {self._head_log()}")

    def _head_log(self) -> str:
        return log_tail(Path(self.temp_dir) / "node0.log")

    def stop(self, grace: float = 15.0) -> None:
        """Stop every node by its process id, workers first; blocks up to `grace` per node."""
        for node in reversed(self._nodes):
            stop_owned(node, grace)
        self._nodes.clear()
        shutil.rmtree(self.temp_dir, ignore_errors=True)
