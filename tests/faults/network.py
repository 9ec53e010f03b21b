"""Engines as separate hosts: a network namespace per engine, joined to the root namespace by
a veth pair on a private /30, and the engine's stores (PostgreSQL, Redis: 127.0.0.1 only)
reached through a Proxy listening on the veth's root-side address.

`Network` owns what it made: `close()` removes the namespaces (their veth ends go with them)
and stops the proxies, whatever happened before (the tests call it in `finally`). Names carry
this process's pid, so concurrent sessions never share one.

`require_namespaces()` skips (a laptop) or fails (CI) when the test cannot make them: not
root, no `ip`, no `unshare`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

import pytest

from faults.proxy import Proxy

ON_CI = os.environ.get("CI", "").lower() not in ("", "0", "false")
_POOL = ipaddress.ip_network("10.213.0.0/16")


def namespaces_missing() -> str | None:
    """Why this process cannot make network and UTS namespaces, or None."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, hostnames)"
    for tool in ("ip", "unshare"):
        if shutil.which(tool) is None:
            return f"needs the `{tool}` command"
    return None


def require_namespaces() -> None:
    reason = namespaces_missing()
    if reason is None:
        return
    if ON_CI:
        pytest.fail(f"this nemesis {reason} (CI is set, so this is a failure, not a skip)")
    pytest.skip(f"this nemesis {reason}")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


def _used_subnets() -> set[ipaddress.IPv4Network]:
    out = subprocess.run(["ip", "-o", "-4", "addr"], capture_output=True, text=True).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split()
        if "inet" in parts:
            address = parts[parts.index("inet") + 1].split("/")[0]
            found.add(ipaddress.ip_network(f"{address}/30", strict=False))
    return found


def via(url: str, proxy: Proxy) -> str:
    """`url` with its host and port replaced by the proxy's."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")
    user = netloc[0] + netloc[1]
    return urlunsplit(parts._replace(netloc=f"{user}{proxy.address}"))


@dataclass
class NetHost:
    """One engine's host: its namespace, the root-side end of its link, its proxies."""

    netns: str
    veth: str
    address: str  # the root side's address, where its proxies listen
    proxies: dict[str, Proxy] = field(default_factory=dict)

    def url(self, url: str) -> str:
        """A store URL as this host reaches it (through its proxy of that server)."""
        parts = urlsplit(url)
        return via(url, self.proxies[f"{parts.hostname}:{parts.port}"])

    def cut(self) -> None:
        for proxy in self.proxies.values():
            proxy.cut()

    def heal(self) -> None:
        for proxy in self.proxies.values():
            proxy.heal()

    def delay(self, seconds: float) -> None:
        for proxy in self.proxies.values():
            proxy.delay(seconds)

    def reset(self) -> None:
        for proxy in self.proxies.values():
            proxy.reset()

    def link(self, up: bool) -> None:
        """Take the link itself down (a pulled cable) or up."""
        _ip("link", "set", self.veth, "up" if up else "down")


class Network:
    def __init__(self) -> None:
        self.hosts: list[NetHost] = []
        self._tag = f"{os.getpid() % 100000}"

    def add(self, servers: list[tuple[str, int]]) -> NetHost:
        """A new host with a proxy to each server (host, port)."""
        index = len(self.hosts)
        netns, veth, peer = (f"sl{self._tag}n{index}", f"sl{self._tag}h{index}", "eth0")
        subnet = self._free_subnet()
        root, inside = (str(a) for a in list(subnet.hosts())[:2])
        _ip("netns", "add", netns)
        host = NetHost(netns, veth, root)
        self.hosts.append(host)
        _ip("link", "add", veth, "type", "veth", "peer", "name", f"sl{self._tag}p{index}")
        _ip("link", "set", f"sl{self._tag}p{index}", "netns", netns, "name", peer)
        _ip("addr", "add", f"{root}/30", "dev", veth)
        _ip("link", "set", veth, "up")
        for args in (
            ("addr", "add", f"{inside}/30", "dev", peer),
            ("link", "set", peer, "up"),
            ("link", "set", "lo", "up"),
        ):
            _ip("-n", netns, *args)
        for server in servers:
            host.proxies[f"{server[0]}:{server[1]}"] = Proxy(root, server, netns).start()
        return host

    def _free_subnet(self) -> ipaddress.IPv4Network:
        used = _used_subnets()
        start = (os.getpid() * 7 + len(self.hosts) * 4) % 16000
        subnets = list(_POOL.subnets(new_prefix=30))
        for offset in range(len(subnets)):
            subnet = subnets[(start + offset) % len(subnets)]
            if subnet not in used:
                return subnet
        raise RuntimeError("no free /30 in 10.213.0.0/16")

    def close(self) -> None:
        for host in self.hosts:
            for proxy in host.proxies.values():
                proxy.close()
            with contextlib.suppress(RuntimeError):
                _ip("netns", "del", host.netns)
            with contextlib.suppress(RuntimeError):
                _ip("link", "del", host.veth)  # gone with its peer, unless the move failed
        self.hosts.clear()
