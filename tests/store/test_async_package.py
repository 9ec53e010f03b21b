"""`sqlalchemy.ext.asyncio` registered without its ORM half still offers every name it
documents: the engine's at once, the ORM's (AsyncSession, ...) on first use."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
from sluice.store.async_package import defer_asyncio_orm

defer_asyncio_orm()
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
import sqlalchemy.ext.asyncio

assert "sqlalchemy.orm" not in sys.modules
assert sqlalchemy.ext.asyncio.AsyncResult is not None
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

assert "sqlalchemy.orm" in sys.modules
assert sqlalchemy.ext.asyncio.AsyncEngine is AsyncEngine
assert sqlalchemy.ext.asyncio.async_scoped_session is not None
try:
    sqlalchemy.ext.asyncio.no_such_name
except AttributeError as exc:
    assert "no_such_name" in str(exc)
else:
    raise AssertionError("a missing name must raise AttributeError")
defer_asyncio_orm()  # imported already: nothing to do
print("ok")
"""


def test_the_engine_without_the_orm_and_the_orm_on_first_use() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
