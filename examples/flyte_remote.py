"""Flyte's own client against `sluice serve` (docs/flyte.md, "Point your Flyte tools at sluice"):
FlyteRemote registers a flytekit workflow, launches it, waits for it and reads its outputs and
its nodes', exactly as against flyteadmin, with no Flyte cluster.

    pip install 'sluice[flyte]'
    python examples/flyte_remote.py

The script starts `sluice serve` (its store in a temporary directory, the HTTP API and UI on a
free port, Flyte's gRPC API on another) and writes the flytekit config file that points at it:

    admin:
      endpoint: dns:///127.0.0.1:<flyte port>
      insecure: true

With a server of your own (`sluice serve`: gRPC on 127.0.0.1:8089), the same file lets
`pyflyte --config config.yaml register ...` and `pyflyte --config config.yaml run --remote
--wait ...` work against it. The execution is an ordinary sluice execution: `sluice executions
show NAME`, `sluice logs NAME`, the web UI.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

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


def start_server(home: Path) -> tuple[subprocess.Popen[str], str, str]:
    """`sluice serve` in `home`; its process, HTTP URL and Flyte gRPC endpoint."""
    log = home / "serve.log"
    command = [sys.executable, "-m", "sluice", "--db", f"sqlite:///{home / 'sluice.db'}"]
    command += ["serve", "--port", "0", "--flyte-port", "0"]
    with log.open("w") as out:
        server = subprocess.Popen(
            command, cwd=home, stdout=out, stderr=subprocess.STDOUT, text=True
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = log.read_text()
        http, flyte = (
            re.search(r"HTTP API on (\S+)/api/v1", text),
            re.search(r"Flyte gRPC API on (\S+) ", text),
        )
        if http and flyte:
            return server, http.group(1), flyte.group(1)
        if server.poll() is not None:
            raise SystemExit(f"sluice serve exited:\n{text}")
        time.sleep(0.2)
    server.kill()
    raise SystemExit(f"sluice serve did not start:\n{log.read_text()}")


def main() -> None:
    from flytekit.configuration import Config
    from flytekit.remote import FlyteRemote

    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        server, http_url, endpoint = start_server(home)
        try:
            config = home / "config.yaml"
            config.write_text(f"admin:\n  endpoint: dns:///{endpoint}\n  insecure: true\n")
            remote = FlyteRemote(
                Config.auto(config_file=str(config)),
                default_project="flytesnacks",
                default_domain="development",
            )
            here = Path(__file__).resolve()
            registered = remote.register_script(
                pipeline, version="v1", source_path=str(here.parent), module_name=here.stem
            )
            execution = remote.execute(registered, inputs={"x": 5}, execution_name="example-run")
            execution = remote.wait(execution, poll_interval=timedelta(seconds=0.5))
            execution = remote.sync(execution, sync_nodes=True)
            print(f"execution {execution.id.name}: outputs {dict(execution.outputs)}")
            for node, run in sorted(execution.node_executions.items()):
                print(f"  node {node}: outputs {dict(run.outputs)}")
            print(f"  in sluice's web UI: {http_url}/executions/{execution.id.name}")
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
