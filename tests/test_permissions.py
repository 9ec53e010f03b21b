"""The store holds inputs, outputs and tracebacks: what sluice creates for it is private to
its owner, whatever the umask. Directories 0700; the database, its -wal and -shm, and the
controller's lock file 0600."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from sluice.concurrency.leader import leader_lock_for
from sluice.store.store import Store


@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0o022)  # the usual umask, which made everything world-readable
    yield
    os.umask(previous)


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.usefixtures("open_umask")
async def test_store_directories_and_files_are_private(tmp_path: Path) -> None:
    db = tmp_path / "home" / ".sluice" / "sluice.db"
    store = await Store.open(f"sqlite:///{db}")
    lock = leader_lock_for(store.db)
    try:
        async with store.write() as repos:
            await repos.executions.release("none", "nobody")  # a write: -wal and -shm exist
        assert await lock.try_acquire()
        assert _mode(tmp_path / "home") == 0o700
        assert _mode(db.parent) == 0o700
        for path in (db, db.with_name("sluice.db-wal"), db.with_name("sluice.db-shm")):
            assert _mode(path) == 0o600, path
        assert _mode(db.with_name("sluice.db.controller.lock")) == 0o600
    finally:
        await lock.release()
        await store.close()


@pytest.mark.usefixtures("open_umask")
async def test_an_existing_directory_keeps_its_mode(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    store = await Store.open(f"sqlite:///{shared / 's.db'}")
    await store.close()
    assert _mode(shared) == 0o755
    assert _mode(shared / "s.db") == 0o600
