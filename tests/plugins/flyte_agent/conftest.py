"""A real Flyte agent server for the flyte_agent plugin tests: `pyflyte serve agent` serving
the test agents (agents/sluice_test_agents.py), which log every call to a ledger file; and the
sluice config that routes their task types to sluice's agent plugins. Skipped on a laptop
without `sluice[flyte]`, failed in CI."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent
STARTUP = 60.0


@pytest.fixture(autouse=True)
def _flytekit() -> None:
    if importlib.util.find_spec("flytekit") is not None:
        return
    message = "flytekit is not installed (pip install 'sluice[flyte]')"
    if os.environ.get("CI"):
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@dataclass
class AgentServer:
    endpoint: str
    ledger: Path

    def entries(self, op: str | None = None, **where: Any) -> list[dict[str, Any]]:
        """The agent's calls, oldest first, those matching `op` and `where`."""
        if not self.ledger.exists():
            return []
        found = [json.loads(line) for line in self.ledger.read_text().splitlines() if line]
        return [
            e
            for e in found
            if (op is None or e["op"] == op) and all(e.get(k) == v for k, v in where.items())
        ]

    def config(self, path: Path, **quotas: int) -> Path:
        """A sluice config file routing the test agents' task types to the agent plugins."""
        limits = ", ".join(f"{k} = {v}" for k, v in {"default": 100, **quotas}.items())
        path.write_text(
            "[plugins.config.flyte_agent]\n"
            f'endpoint = "{self.endpoint}"\n'
            f"resource_quotas = {{ {limits} }}\n"
            "caching = { resync_interval = 5.0 }\n"
            "[plugins.config.flyte_agent_sync]\n"
            f'endpoint = "{self.endpoint}"\n'
            "[plugins.default_for_task_types]\n"
            'countdown = "flyte_agent"\n'
            'shout = "flyte_agent_sync"\n'
        )
        return path


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


@pytest.fixture(scope="module")
def agent_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[AgentServer]:
    home = tmp_path_factory.mktemp("agent")
    port, metrics = _free_port(), _free_port()
    ledger = home / "ledger.jsonl"
    pyflyte = Path(sys.executable).parent / "pyflyte"
    env = {
        **os.environ,
        "PYTHONPATH": str(HERE / "agents"),
        "SLUICE_TEST_AGENT_LEDGER": str(ledger),
    }
    command = [str(pyflyte), "serve", "agent", "--port", str(port)]
    command += ["--prometheus_port", str(metrics), "--modules", "sluice_test_agents"]
    log = (home / "agent.log").open("w")
    process = subprocess.Popen(command, cwd=home, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + STARTUP
        while not _listening(port):
            assert process.poll() is None, (home / "agent.log").read_text()
            assert time.monotonic() < deadline, "the agent server did not start"
            time.sleep(0.2)
        yield AgentServer(f"127.0.0.1:{port}", ledger)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)
        log.close()
