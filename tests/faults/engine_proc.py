"""An engine process of the fault tests.

python engine_proc.py URL CONFIG_JSON [POINT[:N]]

Opens a runtime with the settings CONFIG_JSON describes (harness.settings), loads the probe
plugin, and drives executions until SIGTERM. With POINT it first installs a hook that
SIGKILLs this process the N-th time it reaches that named crash point (sluice.faults): the
hook lives in this process only, nothing is read from the environment.

With NEMESIS_HOSTNAME set (hosts.py), it first takes that hostname: it must be in a UTS
namespace other than its starter's (NEMESIS_PARENT_UTS, made by `unshare --uts`), or it
refuses rather than rename the machine.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from faults.harness import settings
from faults.probe import ENTRY
from sluice import faults
from sluice.runtime import Runtime


async def serve(url: str, config: dict[str, dict[str, object]]) -> None:
    rt = await Runtime.open(settings(url, **config), role="engine")
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set)
    try:
        await rt.load_plugins(extra=[ENTRY])
        engine = await rt.engine()
        await engine.start()
        print(f"ready {rt.instance_id}", flush=True)
        await stop.wait()
        await engine.stop()
    finally:
        await rt.close()


def own_hostname() -> None:
    name = os.environ.get("NEMESIS_HOSTNAME")
    if not name:
        return
    if os.readlink("/proc/self/ns/uts") == os.environ.get("NEMESIS_PARENT_UTS"):
        raise SystemExit("NEMESIS_HOSTNAME set outside a UTS namespace of its own: refused")
    socket.sethostname(name)


def main() -> None:
    own_hostname()
    url, config, *crash = sys.argv[1:]
    if crash:
        faults.install(faults.KillAt.parse(crash[0]))
    asyncio.run(serve(url, json.loads(config)))


if __name__ == "__main__":
    main()
