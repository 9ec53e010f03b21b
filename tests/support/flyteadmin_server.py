"""A real `sluice serve` (a subprocess on loopback, its own SQLite store) that Flyte's own
clients talk to, with the flytekit config file pointing at it (tests/flyteadmin)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SERVE = ROOT / "tests" / "flyteadmin" / "serve_proc.py"
STARTUP = 60.0
_HTTP = re.compile(r"HTTP API on (\S+)/api/v1")
_FLYTE = re.compile(r"Flyte gRPC API on (\S+) ")


@dataclass
class FlyteServer:
    """One `sluice serve` process and what a client needs to reach it."""

    home: Path
    process: subprocess.Popen[str]
    http_url: str
    endpoint: str
    config: Path
    log: Path

    @property
    def db(self) -> Path:
        return self.home / ".sluice" / "sluice.db"

    @property
    def db_url(self) -> str:
        return f"sqlite:///{self.db}"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    def api(self, path: str) -> Any:
        """GET one path of the server's HTTP API (under /api/v1) as JSON."""
        import json
        import urllib.request

        with urllib.request.urlopen(f"{self.http_url}/api/v1{path}", timeout=30) as answer:
            return json.loads(answer.read())

    def sluice(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A `sluice` command on this server's store (from its home)."""
        return subprocess.run(
            [sys.executable, "-m", "sluice", "--db", self.db_url, *args],
            cwd=self.home,
            env=_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )

    def pyflyte(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """The real `pyflyte` CLI with this server's config."""
        pyflyte = Path(sys.executable).parent / "pyflyte"
        return subprocess.run(
            [str(pyflyte), "--config", str(self.config), *args],
            cwd=cwd,
            env={**_env(), "FLYTE_SDK_RICH_TRACEBACKS": "0"},
            capture_output=True,
            text=True,
            timeout=300,
        )

    def remote(self, **kwargs: Any) -> Any:
        from flytekit.configuration import Config
        from flytekit.remote import FlyteRemote

        config = Config.auto(config_file=str(self.config))
        return FlyteRemote(
            config, default_project="flytesnacks", default_domain="development", **kwargs
        )


def _env() -> dict[str, str]:
    src = str(ROOT / "src")
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": f"{src}{os.pathsep}{path}" if path else src}


def start_server(
    home: Path,
    *,
    kill_at: str | None = None,
    http_port: int = 0,
    flyte_port: int = 0,
    extra: Sequence[str] = (),
) -> FlyteServer:
    """Start `sluice serve` in `home` and wait until it says where it listens."""
    home.mkdir(parents=True, exist_ok=True)
    stamp = time.monotonic_ns()
    log = home / f"serve-{stamp}.log"
    crash = ["--kill-at", kill_at] if kill_at else []
    command = [sys.executable, str(SERVE), *crash]
    command += ["--db", f"sqlite:///{home / '.sluice' / 'sluice.db'}", "serve"]
    command += ["--port", str(http_port), "--flyte-port", str(flyte_port), *extra]
    env = {**_env(), "SLUICE_ENGINE__WORKERS": "1"}
    with log.open("w") as out:
        process = subprocess.Popen(
            command, cwd=home, env=env, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    http_url, endpoint = _announced(process, log)
    config = home / f"flytekit-{stamp}.yaml"  # flytekit caches a config file it read
    config.write_text(f"admin:\n  endpoint: dns:///{endpoint}\n  insecure: true\n")
    return FlyteServer(home, process, http_url, endpoint, config, log)


def _announced(process: subprocess.Popen[str], log: Path) -> tuple[str, str]:
    deadline = time.monotonic() + STARTUP
    while time.monotonic() < deadline:
        text = log.read_text()
        http, flyte = _HTTP.search(text), _FLYTE.search(text)
        if http and flyte:
            return http.group(1), flyte.group(1)
        if process.poll() is not None:
            raise AssertionError(f"sluice serve exited {process.returncode}:\n{text}")
        time.sleep(0.1)
    process.kill()
    raise AssertionError(f"sluice serve did not start in {STARTUP}s:\n{log.read_text()}")


def importable(project: Path) -> None:
    """Let this process import the project's flows (what FlyteRemote registers)."""
    if str(project) not in sys.path:
        sys.path.insert(0, str(project))
