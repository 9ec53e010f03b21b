"""Shared fixtures: a SQLite file per test, and real PostgreSQL and Redis servers.

PostgreSQL (127.0.0.1:5432, user postgres, trust auth) and Redis (127.0.0.1:6379) are used
for real. When one is unreachable the tests that need it are skipped on a laptop and fail
when the CI environment variable is set. Every test session gets its own PostgreSQL database
and its own Redis key prefix, so runs never see each other's data.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.plugins.ray.cluster import LOOPBACK_ENV

# Session-scoped real clusters (Ray, Dask), started only by the tests that use them.
from support.clusters import dask_address, ray_address, ray_cluster

__all__ = ["dask_address", "ray_address", "ray_cluster"]

# Every Ray cluster the tests start or join is on loopback, and Ray reads these switches once,
# when it is first imported: set them before any test can import it (a plugin loaded by an
# engine test does), or a later task-mode driver connects to the host's external address.
for _name, _value in LOOPBACK_ENV.items():
    os.environ.setdefault(_name, _value)

_SERIAL_GROUPS = {
    "faults": "faults",
    "plugins/ray": "ray",
    "plugins/dask": "dask",
    "ui": "browser",
    "flyteadmin": "flyte-server",
}
"""Test folders whose tests run one after another on a single xdist worker (`--dist
loadgroup`, pyproject's addopts): the fault harness's engines and nemeses would starve each
other of the two cores, and the Ray and Dask clusters and the browser are started once per
worker that needs them. Every other test spreads over the workers."""


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    root = Path(__file__).parent
    for item in items:
        relative = Path(item.path).relative_to(root).as_posix()
        for folder, group in _SERIAL_GROUPS.items():
            if relative.startswith(folder + "/"):
                item.add_marker(pytest.mark.xdist_group(group))
                break


PG_HOST, PG_PORT = "127.0.0.1", 5432
REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
ON_CI = bool(os.environ.get("CI"))


def _reachable(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def require_server(name: str, host: str, port: int) -> None:
    """Skip (laptop) or fail (CI) when a server the test needs is unreachable."""
    if _reachable(host, port):
        return
    message = f"{name} is not reachable at {host}:{port}"
    if ON_CI:
        pytest.fail(message + " (CI is set, so this is a failure, not a skip)")
    pytest.skip(message)


@pytest.fixture(scope="session")
def pg_database_url() -> Iterator[str]:
    """A fresh PostgreSQL database for this test session, dropped at the end."""
    require_server("PostgreSQL", PG_HOST, PG_PORT)
    import psycopg

    name = f"sluice_test_{os.getpid()}_{secrets.token_hex(4)}"
    admin = f"postgresql://postgres@{PG_HOST}:{PG_PORT}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"postgresql://postgres@{PG_HOST}:{PG_PORT}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture
def empty_pg_url(pg_database_url: str) -> Iterator[str]:
    """A PostgreSQL database of its own with no schema at all, dropped after the test."""
    import psycopg

    base = pg_database_url.rpartition("/")[0]
    name = f"sluice_empty_{secrets.token_hex(4)}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield f"{base}/{name}"
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def pg_upgraded_url(pg_database_url: str) -> str:
    """The session's PostgreSQL database, upgraded once to the schema (sluice never upgrades
    a PostgreSQL database silently), for tests that keep resource tokens or catalogs there."""
    import asyncio

    from sluice.store.database import Database

    async def upgrade() -> None:
        db = await Database.open(pg_database_url, upgrade=True)
        await db.close()

    asyncio.run(upgrade())
    return pg_database_url


RESOURCE_BACKENDS = [
    "store",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("redis", marks=pytest.mark.redis),
]


@pytest.fixture(params=RESOURCE_BACKENDS)
def resources(request: pytest.FixtureRequest) -> dict[str, str]:
    """The `resources` settings of one token backend: the store's own database (no URL),
    PostgreSQL or Redis; engine tests that claim quotas and locks run on each."""
    if request.param == "store":
        return {}
    if request.param == "postgresql":
        request.getfixturevalue("pg_upgraded_url")
        return {"url": str(request.getfixturevalue("pg_url"))}
    return {
        "url": str(request.getfixturevalue("redis_server_url")),
        "key_prefix": str(request.getfixturevalue("redis_prefix")),
    }


@pytest.fixture
def pg_url(pg_database_url: str) -> str:
    """The session's PostgreSQL database, emptied of sluice rows before each test."""
    import psycopg

    with psycopg.connect(pg_database_url, autocommit=True) as conn:
        tables = [
            row[0]
            for row in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename <> 'alembic_version'"
            )
        ]
        if tables:
            conn.execute("TRUNCATE " + ", ".join(f'"{t}"' for t in tables))
    return pg_database_url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'sluice.db'}"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str:
    """Each store contract test runs once on SQLite and once on PostgreSQL."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("sqlite_url"))
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture(scope="session")
def redis_server_url() -> str:
    require_server("Redis", REDIS_HOST, REDIS_PORT)
    return f"redis://{REDIS_HOST}:{REDIS_PORT}/0"


@pytest.fixture
def redis_prefix(redis_server_url: str) -> Iterator[str]:
    """A key prefix unique to this test; its keys are deleted afterwards."""
    import redis

    prefix = f"sluice-test-{os.getpid()}-{secrets.token_hex(4)}"
    yield prefix
    client = redis.Redis.from_url(redis_server_url)
    keys = list(client.scan_iter(match=f"{prefix}*", count=1000))
    if keys:
        client.delete(*keys)
    client.close()
