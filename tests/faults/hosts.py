"""Where one engine process of the fault tests runs: its own hostname (a UTS namespace, so the
same-host "dead local owner" shortcut never applies between engines), its own network
namespace (its stores only through proxies the test controls), and its own clock
(libfaketime: every clock_gettime of the engine and of its workers shifted by `skew`).

The command is `ip netns exec NS unshare --uts python engine_proc.py ...`: both `ip` and
`unshare` exec what follows, so the engine's pid is the pid the harness started. The engine
sets its hostname itself (NEMESIS_HOSTNAME, engine_proc.py), refusing to when it is not in a
UTS namespace of its own.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

FAKETIME_LIB = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")
HOSTNAME_ENV = "NEMESIS_HOSTNAME"
OFFSET_ENV = "NEMESIS_CLOCK_OFFSET"  # nemesis_workload.py takes it off the bodies' records


def require_faketime() -> None:
    """Skip (laptop) or fail (CI) without Debian's libfaketime."""
    from faults.network import ON_CI

    if FAKETIME_LIB.exists():
        return
    message = f"clock skew needs libfaketime ({FAKETIME_LIB}: apt-get install faketime)"
    if ON_CI:
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@dataclass(frozen=True)
class Host:
    name: str | None = None  # a hostname of its own
    netns: str | None = None  # a network namespace to run in
    skew: int = 0  # seconds its clocks are ahead (negative: behind)
    store_url: str | None = None  # the store as this host reaches it
    resources_url: str | None = None  # the token backend as this host reaches it

    def argv(self, argv: list[str]) -> list[str]:
        command = list(argv)
        if self.name:
            command = [_tool("unshare"), "--uts", *command]
        if self.netns:
            command = [_tool("ip"), "netns", "exec", self.netns, *command]
        return command

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        env = dict(base)
        if self.name:
            env[HOSTNAME_ENV] = self.name
            env["NEMESIS_PARENT_UTS"] = os.readlink("/proc/self/ns/uts")
        if self.skew:
            # CLOCK_MONOTONIC is shifted too, by a constant: durations stay true. (With
            # DONT_FAKE_MONOTONIC=1, libfaketime 0.9.10 makes Python's time.sleep fail with
            # EINVAL: its clock_nanosleep on an absolute monotonic deadline.)
            env.update(LD_PRELOAD=str(FAKETIME_LIB), FAKETIME=f"{self.skew:+d}s")
            env[OFFSET_ENV] = str(self.skew)  # the bodies take it off their records
        return env

    def config(self, cfg: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        if self.resources_url is None:
            return cfg
        return {**cfg, "resources": {**cfg.get("resources", {}), "url": self.resources_url}}


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise RuntimeError(f"`{name}` is not installed")
    return found
