"""The nemesis harness's own tools do what the nemesis tests rely on: the pid monitor sees a
real process stop, continue and die; the proxy forwards, holds everything in a cut and lets
it through on heal, delays, and resets; a namespace host reaches a server only through its
proxy, and loses it when its link goes down; an engine started on a host of its own has its
hostname and its skewed clock, and a paused process group freezes its children too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from faults.hosts import FAKETIME_LIB, Host
from faults.monitor import PidMonitor
from faults.network import Network, require_namespaces
from faults.proxy import Proxy

CHILD = """
import json, os, sys, time
with open(sys.argv[1], "a") as f:
    f.write(json.dumps({"ev": "start", "t": time.time(), "pid": os.getpid()}) + "\\n")
time.sleep(60)
"""


def _wait(condition: object, within: float = 10.0) -> None:
    deadline = time.monotonic() + within
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "not met in time"
        time.sleep(0.01)


def test_the_monitor_sees_a_process_stop_continue_and_die(tmp_path: Path) -> None:
    history = tmp_path / "history.jsonl"
    with PidMonitor(history) as monitor:
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(history)])
        _wait(lambda: monitor.lives(child.pid))
        time.sleep(0.1)
        child.send_signal(signal.SIGSTOP)
        stopped = time.time()
        time.sleep(0.3)
        child.send_signal(signal.SIGCONT)
        resumed = time.time()
        time.sleep(0.1)
        killed = time.time()
        child.kill()
        child.wait()
        reaped = time.time()  # SIGKILL lands a moment after kill() returns: bound it by wait()
        _wait(lambda: monitor.lives(child.pid)[-1].death is not None)
    [life] = monitor.lives(child.pid)
    [(frozen, thawed)] = life.frozen
    assert frozen <= stopped + 0.05 and resumed <= thawed
    assert life.death is not None and resumed < killed and resumed < life.death <= reaped


@contextlib.contextmanager
def echo_server() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = server.accept()
                threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield server.getsockname()
    finally:
        server.close()


def _echo(conn: socket.socket) -> None:
    with conn, contextlib.suppress(OSError):
        while data := conn.recv(4096):
            conn.sendall(data)


def _ask(sock: socket.socket, within: float) -> bytes:
    sock.settimeout(within)
    sock.sendall(b"ping")
    try:
        return sock.recv(4096)
    except TimeoutError:
        return b""


def _dropped(sock: socket.socket) -> bool:
    """The connection was reset or closed (not merely silent)."""
    sock.settimeout(5)
    try:
        sock.sendall(b"ping")
        return sock.recv(4096) == b""
    except TimeoutError:
        return False
    except OSError:
        return True


def test_the_proxy_cuts_heals_delays_and_resets() -> None:
    with echo_server() as target:
        proxy = Proxy("127.0.0.1", target).start()
        try:
            with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
                assert _ask(sock, 5) == b"ping"
                proxy.cut()
                assert _ask(sock, 0.5) == b""  # held, not lost, not refused
                proxy.heal()
                sock.settimeout(5)
                assert sock.recv(4096) == b"ping"
                proxy.delay(0.3)
                began = time.monotonic()
                assert _ask(sock, 5) == b"ping"
                assert time.monotonic() - began >= 0.6  # 0.3 s each way
                proxy.delay(0)
                proxy.reset()
                assert _dropped(sock)
            with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
                assert _dropped(sock)  # refused while the store is down
            proxy.heal()
            with socket.create_connection(("127.0.0.1", proxy.port)) as sock:
                assert _ask(sock, 5) == b"ping"
        finally:
            proxy.close()


PROBE = """
import socket, sys
try:
    with socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=2) as s:
        s.sendall(b"ping"); print(s.recv(4).decode())
except OSError as exc:
    print("unreachable", type(exc).__name__)
"""


def _probe(netns: str, host: str, port: int) -> str:
    cmd = ["ip", "netns", "exec", netns, sys.executable, "-c", PROBE, host, str(port)]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()


def test_a_namespace_host_reaches_its_server_only_through_its_proxy() -> None:
    require_namespaces()
    network = Network()
    with echo_server() as target:
        try:
            host = network.add([target])
            proxy = host.proxies[f"{target[0]}:{target[1]}"]
            assert _probe(host.netns, host.address, proxy.port) == "ping"
            assert _probe(host.netns, *target).startswith("unreachable")  # its own loopback
            host.link(False)
            assert _probe(host.netns, host.address, proxy.port).startswith("unreachable")
            host.link(True)
            assert _probe(host.netns, host.address, proxy.port) == "ping"
        finally:
            network.close()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert host.netns not in names


SHOW = """
import os, socket, subprocess, sys, time
print(socket.gethostname(), round(time.time()), flush=True)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
print(child.pid, flush=True)
child.wait()
"""


def test_an_engine_host_has_its_own_name_and_clock_and_freezes_as_a_group(tmp_path: Path) -> None:
    require_namespaces()
    if not FAKETIME_LIB.exists():
        pytest.skip("needs libfaketime")
    host = Host(name="nemesis-tool", skew=-90)
    script = tmp_path / "show.py"
    script.write_text(
        "import os, socket\nif os.environ.get('NEMESIS_HOSTNAME'):\n"
        "    socket.sethostname(os.environ['NEMESIS_HOSTNAME'])\n" + SHOW
    )
    proc = subprocess.Popen(
        host.argv([sys.executable, str(script)]),
        env=host.environ(os.environ),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        name, clock = proc.stdout.readline().split()
        child = int(proc.stdout.readline())
        assert name == "nemesis-tool" and socket.gethostname() != "nemesis-tool"
        assert abs(int(clock) - (time.time() - 90)) < 5
        os.killpg(proc.pid, signal.SIGSTOP)
        _wait(lambda: _state(child) == "T" and _state(proc.pid) == "T")
        os.killpg(proc.pid, signal.SIGCONT)
        _wait(lambda: _state(child) in "RS")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _state(pid: int) -> str:
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2]
