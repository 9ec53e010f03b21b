"""Losing the store under a running `sluice engine` (a real subprocess).

- PostgreSQL database dropped: the engine exits 4 with one message after its bounded retry
  (`engine.store_gone_timeout`), logging a bounded number of lines and no traceback.
- PostgreSQL unreachable for a while (a TCP proxy the test stops and restarts): one warning
  line, one recovery line, no traceback, and work resumes.
- SQLite -wal or database file removed under an idle engine: the engine notices and exits 4;
  another process hitting the damaged file ("disk I/O error") exits 4, not 2.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sluice.runtime import Runtime
from sluice.spec.phases import ExecutionPhase
from support.engine import FLOWS, fast_settings

ROOT = Path(__file__).resolve().parents[2]
PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


def _env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "SLUICE_DATABASE_URL": url,
        "SLUICE_ENGINE__WORKERS": "1",
        "SLUICE_ENGINE__RESYNC_INTERVAL": "1",
        "SLUICE_ENGINE__STORE_GONE_TIMEOUT": "2",
    }


def _start_engine(url: str, stderr: Path) -> subprocess.Popen[str]:
    engine = subprocess.Popen(
        [sys.executable, "-m", "sluice", "engine", "--log-level", "WARNING"],  # faults only
        env=_env(url),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr.open("w"),
        text=True,
    )
    assert engine.stdout is not None
    line = engine.stdout.readline()  # blocks until the engine runs (or dies)
    assert "running on" in line, stderr.read_text()
    return engine


def _wait(condition: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.05)


def _stop(engine: subprocess.Popen[str]) -> int:
    if engine.poll() is None:
        engine.send_signal(signal.SIGTERM)
    return engine.wait(timeout=30)


# PostgreSQL dropped.
@pytest.fixture
def scratch_pg(pg_database_url: str) -> Iterator[str]:
    """A PostgreSQL database of its own (the test drops it), upgraded to the schema."""
    import psycopg

    name = f"sluice_drop_{os.getpid()}_{secrets.token_hex(3)}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    subprocess.run(
        [sys.executable, "-m", "sluice", "db", "upgrade"], env=_env(url), check=True, cwd=ROOT
    )
    yield url
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_dropped_postgresql_database_stops_the_engine_with_exit_4(
    scratch_pg: str, tmp_path: Path
) -> None:
    import psycopg

    stderr = tmp_path / "engine.err"
    engine = _start_engine(scratch_pg, stderr)
    try:
        time.sleep(0.5)
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE "{scratch_pg.rsplit("/", 1)[1]}" WITH (FORCE)')
        code = engine.wait(timeout=30)
    finally:
        _stop(engine)
    lines = stderr.read_text().splitlines()
    assert code == 4, lines
    assert "Traceback" not in stderr.read_text()
    assert len(lines) <= 3, lines  # one outage warning, the final error
    assert "does not exist" in lines[-1] and lines[-1].startswith("error:")


# PostgreSQL unreachable for a while.
class Proxy:
    """A TCP proxy to PostgreSQL on a free port of 127.0.0.1; `stop` refuses and cuts every
    connection (the server looks unreachable), `start` serves again on the same port."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._listener: socket.socket | None = None
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()

    def start(self) -> None:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def stop(self) -> None:
        if self._listener is not None:
            with _quiet():  # wakes the thread blocked in accept (close alone does not)
                self._listener.shutdown(socket.SHUT_RDWR)
            self._listener.close()
            self._listener = None
        with self._lock:
            for sock in self._open:
                with _quiet():
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()
            self._open.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._open.update((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket) -> None:
        with _quiet():
            while data := source.recv(65536):
                sink.sendall(data)
        for sock in (source, sink):
            with _quiet():
                sock.shutdown(socket.SHUT_RDWR)


class _quiet:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> bool:
        return exc[0] is not None and issubclass(exc[0], OSError)  # type: ignore[arg-type]


async def _launch_and_wait(url: str) -> ExecutionPhase:
    from sluice.sdk.loader import load_module

    flows = load_module("flows", str(FLOWS))
    rt = await Runtime.open(fast_settings(url))
    try:
        record = await rt.launch(flows.fan, {"width": 2})
        for _ in range(600):
            async with rt.store.read() as repos:
                found = await repos.executions.get(record.id)
            assert found is not None
            if found.phase.is_terminal:
                return found.phase
            await asyncio.sleep(0.05)
        return found.phase
    finally:
        await rt.close()


def test_an_unreachable_postgresql_is_one_warning_and_one_recovery_line(
    pg_url: str, tmp_path: Path
) -> None:
    subprocess.run([sys.executable, "-m", "sluice", "db", "upgrade"], env=_env(pg_url), check=True)
    proxy = Proxy(("127.0.0.1", 5432))
    proxy.start()
    through_proxy = pg_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    stderr = tmp_path / "engine.err"
    engine = _start_engine(through_proxy, stderr)
    try:
        time.sleep(0.5)
        proxy.stop()
        time.sleep(5)  # every loop of the engine fails for 5 s
        assert engine.poll() is None, "an unreachable server is not a gone database"
        proxy.start()
        _wait(lambda: "is back" in stderr.read_text())
        assert asyncio.run(_launch_and_wait(pg_url)) is ExecutionPhase.SUCCEEDED
    finally:
        code = _stop(engine)
        proxy.stop()
    text = stderr.read_text()
    lines = text.splitlines()
    assert code == 0, lines
    assert "Traceback" not in text
    assert sum("lost the database" in line for line in lines) == 1, lines
    assert sum("is back" in line for line in lines) == 1, lines
    assert len(lines) <= 4, lines


# SQLite files removed.
@pytest.mark.parametrize("removed", ["sluice.db-wal", "sluice.db"])
def test_a_removed_sqlite_file_stops_an_idle_engine_with_exit_4(
    tmp_path: Path, removed: str
) -> None:
    db = tmp_path / "sluice.db"
    stderr = tmp_path / "engine.err"
    engine = _start_engine(f"sqlite:///{db}", stderr)
    try:
        time.sleep(0.3)
        assert (tmp_path / removed).exists()
        (tmp_path / removed).unlink()
        code = engine.wait(timeout=20)
    finally:
        _stop(engine)
    lines = stderr.read_text().splitlines()
    assert code == 4, lines
    assert lines == [
        f"error: the SQLite file {tmp_path / removed} was removed while this "
        "process had it open; restart it"
    ], lines


def test_a_process_on_a_sqlite_file_whose_wal_was_removed_exits_4(tmp_path: Path) -> None:
    """The situation an engine that did not notice left behind: a process holding the file
    open (here a plain connection), its -wal removed; the next writer gets "disk I/O error"."""
    db = tmp_path / "sluice.db"
    url = f"sqlite:///{db}"
    subprocess.run([sys.executable, "-m", "sluice", "db", "upgrade"], env=_env(url), check=True)
    holder = sqlite3.connect(db)
    try:
        holder.execute("CREATE TABLE held (x)")
        holder.execute("INSERT INTO held VALUES (1)")
        holder.commit()
        (tmp_path / "sluice.db-wal").unlink()
        other = subprocess.run(
            [sys.executable, "-m", "sluice", "run", f"{FLOWS}:fan"],
            env=_env(url),
            cwd=ROOT,
            capture_output=True,
            text=True,
        )
    finally:
        holder.close()
    assert other.returncode == 4, other.stderr
    assert other.stderr.strip().splitlines() == [
        f"error: database I/O error on {db}: disk I/O error"
    ], other.stderr


def test_sluice_serve_also_stops_with_exit_4_when_its_sqlite_file_is_removed(
    tmp_path: Path,
) -> None:
    db = tmp_path / "sluice.db"
    stderr = tmp_path / "serve.err"
    command = ["serve", "--no-schedules", "--port", "0", "--log-level", "WARNING"]  # no INFO
    serve = subprocess.Popen(
        [sys.executable, "-m", "sluice", *command],
        env=_env(f"sqlite:///{db}"),
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=stderr.open("w"),
        text=True,
    )
    try:
        assert serve.stdout is not None
        assert "sluice serve" in serve.stdout.readline(), stderr.read_text()
        time.sleep(0.3)
        db.unlink()
        code = serve.wait(timeout=20)
    finally:
        _stop(serve)
    lines = stderr.read_text().splitlines()
    assert code == 4, lines
    assert lines[-1].startswith(f"error: the SQLite file {db} was removed"), lines
    assert "Traceback" not in stderr.read_text()


# The token store (Redis) unreachable for a while, and back empty.
QUOTA_FLOW = """
import sluice


@sluice.task(quotas=[sluice.Quota("outage-q")])
def claimed(i: int) -> int:
    return i


@sluice.workflow
def quota_flow() -> list[int]:
    return [claimed(i=i) for i in range(3)]
"""


async def _launch_quota_flow_and_wait(url: str, flow: Path) -> ExecutionPhase:
    from sluice.config import load_config
    from sluice.sdk.loader import load_module

    flows = load_module("quota_flow", str(flow))
    rt = await Runtime.open(load_config(database_url=url))
    try:
        record = await rt.launch(flows.quota_flow, {})
        for _ in range(1200):
            async with rt.store.read() as repos:
                found = await repos.executions.get(record.id)
            assert found is not None
            if found.phase.is_terminal:
                return found.phase
            await asyncio.sleep(0.05)
        return found.phase
    finally:
        await rt.close()


def test_an_unreachable_redis_is_one_warning_and_one_recovery_line_and_its_quotas_come_back(
    redis_server_url: str, redis_prefix: str, tmp_path: Path
) -> None:
    """Redis as the token store, cut for 5 s and back EMPTY (a restarted Redis keeps nothing):
    one warning, one recovery line, no traceback, and the engine stores its configured quotas
    again, so quota'd tasks run instead of failing on an unknown namespace."""
    import redis

    proxy = Proxy(("127.0.0.1", 6379))
    proxy.start()
    url = f"sqlite:///{tmp_path / 'sluice.db'}"
    subprocess.run([sys.executable, "-m", "sluice", "db", "upgrade"], env=_env(url), check=True)
    flow = tmp_path / "quota_flow.py"
    flow.write_text(QUOTA_FLOW)
    stderr = tmp_path / "engine.err"
    env = {
        "SLUICE_RESOURCES__URL": f"redis://127.0.0.1:{proxy.port}/0",
        "SLUICE_RESOURCES__KEY_PREFIX": redis_prefix,
        "SLUICE_RESOURCES__QUOTAS": '{"outage-q": 1}',
    }
    os.environ.update(env)  # for the engine only: the test's own launcher keeps off Redis
    try:
        engine = _start_engine(url, stderr)
    finally:
        for name in env:
            os.environ.pop(name, None)
    try:
        time.sleep(0.5)
        proxy.stop()
        client = redis.Redis.from_url(redis_server_url)
        keys = list(client.scan_iter(match=f"{redis_prefix}*"))
        assert keys, "the engine stored its quotas in Redis"
        client.delete(*keys)  # back empty, as a restarted Redis
        client.close()
        time.sleep(5)
        assert engine.poll() is None
        proxy.start()
        _wait(lambda: "is back" in stderr.read_text())
        phase = asyncio.run(_launch_quota_flow_and_wait(url, flow))
        assert phase is ExecutionPhase.SUCCEEDED, stderr.read_text()
    finally:
        code = _stop(engine)
        proxy.stop()
    text = stderr.read_text()
    lines = text.splitlines()
    assert code == 0, lines
    assert "Traceback" not in text
    assert sum("lost the resource store" in line for line in lines) == 1, lines
    assert sum("is back" in line for line in lines) == 1, lines
    assert sum("storing them again" in line for line in lines) == 1, lines
