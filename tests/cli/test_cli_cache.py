"""`sluice cache ls|rm`: the keys `ls` shows and short task names are accepted."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sluice.cache import Catalog
from sluice.cache.models import CacheEntry, CacheSource
from sluice.config import CacheConfig
from sluice.store.database import Database

ROOT = Path(__file__).resolve().parents[2]
KEY_A1 = "ab12" + "0" * 60
KEY_A2 = "ab13" + "0" * 60
KEY_B = "cd00" + "1" * 60
KEY_C = "ef00" + "2" * 60
ENTRIES = {
    KEY_A1: "quickstart.train",
    KEY_A2: "quickstart.score",
    KEY_B: "other.train",
    KEY_C: "quickstart.report",
}


def sluice(*args: str, db: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SLUICE_DATABASE_URL": f"sqlite:///{db}"}
    return subprocess.run(
        [sys.executable, "-m", "sluice", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        cwd=ROOT,
    )


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A store with four cache entries: two keys sharing the prefix "ab1", two tasks named
    `train` in different modules."""
    path = tmp_path / "s.db"

    async def fill() -> None:
        database = await Database.open(f"sqlite:///{path}")
        catalog = await Catalog.open(database, config=CacheConfig())
        try:
            for key, task in ENTRIES.items():
                entry = CacheEntry({"o0": 1}, task, "1", CacheSource("x1exec", "n0"))
                assert await catalog.put(key, entry)
        finally:
            await catalog.close()
            await database.close()

    asyncio.run(fill())
    return path


def keys_left(db: Path) -> set[str]:
    return {e["key"] for e in json.loads(sluice("cache", "ls", "--json", db=db).stdout)}


def test_the_key_cache_ls_shows_removes_its_entry(db: Path) -> None:
    shown = sluice("cache", "ls", db=db).stdout
    assert KEY_C[:16] in shown and KEY_C not in shown  # ls abbreviates keys
    removed = sluice("cache", "rm", KEY_C[:16], db=db)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == "removed 1 cache entry"
    assert keys_left(db) == set(ENTRIES) - {KEY_C}


def test_an_ambiguous_key_prefix_is_an_error_listing_the_matches(db: Path) -> None:
    done = sluice("cache", "rm", "ab1", db=db)
    assert done.returncode == 2
    assert "ab1" in done.stderr and KEY_A1[:16] in done.stderr and KEY_A2[:16] in done.stderr
    assert keys_left(db) == set(ENTRIES)


def test_rm_of_a_key_that_matches_nothing_fails_and_removes_nothing(db: Path) -> None:
    done = sluice("cache", "rm", KEY_C[:16], "0123456789abcdef", db=db)
    assert done.returncode == 2
    assert "0123456789abcdef" in done.stderr and "no cache entry" in done.stderr
    assert keys_left(db) == set(ENTRIES)


def test_a_short_task_name_resolves_when_unique(db: Path) -> None:
    listed = json.loads(sluice("cache", "ls", "--task", "report", "--json", db=db).stdout)
    assert [e["key"] for e in listed] == [KEY_C]
    removed = sluice("cache", "rm", "--task", "score", db=db)
    assert removed.returncode == 0, removed.stderr
    assert removed.stdout.strip() == "removed 1 cache entry"
    assert keys_left(db) == set(ENTRIES) - {KEY_A2}


@pytest.mark.parametrize("command", [["ls"], ["rm"]])
def test_an_ambiguous_short_task_name_is_an_error_naming_the_candidates(
    db: Path, command: list[str]
) -> None:
    done = sluice("cache", *command, "--task", "train", db=db)
    assert done.returncode == 2
    assert "quickstart.train" in done.stderr and "other.train" in done.stderr
    assert keys_left(db) == set(ENTRIES)


def test_the_full_task_name_still_matches(db: Path) -> None:
    listed = json.loads(sluice("cache", "ls", "--task", "other.train", "--json", db=db).stdout)
    assert [e["key"] for e in listed] == [KEY_B]


def test_rm_of_a_task_with_no_entries_fails(db: Path) -> None:
    done = sluice("cache", "rm", "--task", "nothing_here", db=db)
    assert done.returncode == 2
    assert "nothing_here" in done.stderr and "no cache entr" in done.stderr
    assert keys_left(db) == set(ENTRIES)
