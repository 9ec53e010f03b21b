"""The repository contract, written once and run on memory, SQLite and PostgreSQL."""

from __future__ import annotations

from sluice.cache import CacheEntry, CacheSource, CatalogRepository, Reservation

T = 1_000.0


def entry(created_at: float, task: str = "wf.t", value: object = 1) -> CacheEntry:
    outputs = {"o": value, "nested": {"b": [1, 2.5, None], "a": "é"}}
    return CacheEntry(outputs, task, "v1", CacheSource("x1", "n1"), created_at)


# Reservations.


async def test_create_inserts_once(repository: CatalogRepository) -> None:
    first, second = Reservation("k", "a", 2.5, T + 30), Reservation("k", "b", 10.0, T + 30)
    assert await repository.reservations.create(first, T)
    assert not await repository.reservations.create(second, T)
    assert await repository.reservations.get("k") == first


async def test_get_missing_is_none(repository: CatalogRepository) -> None:
    assert await repository.reservations.get("nothing") is None


async def test_owner_updates_before_expiry(repository: CatalogRepository) -> None:
    await repository.reservations.create(Reservation("k", "a", 10.0, T + 30), T)
    extended = Reservation("k", "a", 5.0, T + 45)
    assert await repository.reservations.update_if_expired_or_owned(extended, T + 10)
    assert await repository.reservations.get("k") == extended


async def test_other_owner_cannot_update_before_expiry(repository: CatalogRepository) -> None:
    held = Reservation("k", "a", 10.0, T + 30)
    await repository.reservations.create(held, T)
    taken = Reservation("k", "b", 10.0, T + 59)
    assert not await repository.reservations.update_if_expired_or_owned(taken, T + 29.999)
    assert await repository.reservations.get("k") == held


async def test_other_owner_takes_over_at_expiry(repository: CatalogRepository) -> None:
    await repository.reservations.create(Reservation("k", "a", 10.0, T + 30), T)
    taken = Reservation("k", "b", 10.0, T + 60)
    assert await repository.reservations.update_if_expired_or_owned(taken, T + 30)
    assert await repository.reservations.get("k") == taken


async def test_update_of_missing_row_writes_nothing(repository: CatalogRepository) -> None:
    wanted = Reservation("k", "a", 10.0, T + 30)
    assert not await repository.reservations.update_if_expired_or_owned(wanted, T)
    assert await repository.reservations.get("k") is None


async def test_delete_by_owner_is_idempotent(repository: CatalogRepository) -> None:
    await repository.reservations.create(Reservation("k", "a", 10.0, T + 30), T)
    assert await repository.reservations.delete_by_key_and_owner("k", "a")
    assert await repository.reservations.get("k") is None
    assert not await repository.reservations.delete_by_key_and_owner("k", "a")


async def test_delete_by_other_owner_keeps_row(repository: CatalogRepository) -> None:
    held = Reservation("k", "a", 10.0, T + 30)
    await repository.reservations.create(held, T)
    assert not await repository.reservations.delete_by_key_and_owner("k", "b")
    assert await repository.reservations.get("k") == held


async def test_delete_expired_keeps_live_rows(repository: CatalogRepository) -> None:
    for key, expires_at in [("k1", T + 10), ("k2", T + 20), ("k3", T + 30)]:
        await repository.reservations.create(Reservation(key, "a", 10.0, expires_at), T)
    assert await repository.reservations.delete_expired(T + 20) == ["k1", "k2"]
    assert [r.key for r in await repository.reservations.list_all()] == ["k3"]
    assert await repository.reservations.delete_expired(T + 20) == []


async def test_list_all_is_ordered_by_key(repository: CatalogRepository) -> None:
    for key in ["b", "c", "a"]:
        await repository.reservations.create(Reservation(key, "o-" + key, 1.5, T + 1), T)
    listed = await repository.reservations.list_all()
    assert [(r.key, r.owner_id) for r in listed] == [("a", "o-a"), ("b", "o-b"), ("c", "o-c")]


# Entries.


async def test_insert_once_and_read_back(repository: CatalogRepository) -> None:
    assert await repository.entries.insert("k", entry(T))
    assert not await repository.entries.insert("k", entry(T + 1, value=2))
    assert await repository.entries.get("k") == entry(T)
    assert await repository.entries.get("other") is None


async def test_read_values_are_copies(repository: CatalogRepository) -> None:
    await repository.entries.insert("k", entry(T))
    got = await repository.entries.get("k")
    assert got is not None
    got.outputs["nested"]["b"].append("mutated")
    assert await repository.entries.get("k") == entry(T)


async def test_replace_inserts_or_overwrites(repository: CatalogRepository) -> None:
    assert await repository.entries.replace("k", entry(T))
    assert await repository.entries.replace("k", entry(T + 5, value=2))
    assert await repository.entries.get("k") == entry(T + 5, value=2)


async def test_replace_created_before_only_replaces_older(repository: CatalogRepository) -> None:
    await repository.entries.insert("k", entry(T))
    assert not await repository.entries.replace("k", entry(T + 9, value=2), created_before=T)
    assert await repository.entries.get("k") == entry(T)
    assert await repository.entries.replace("k", entry(T + 9, value=3), created_before=T + 0.5)
    assert await repository.entries.get("k") == entry(T + 9, value=3)
    assert await repository.entries.replace("new", entry(T), created_before=T - 100)


async def test_list_newest_first_without_outputs(repository: CatalogRepository) -> None:
    await repository.entries.insert("old", entry(T, task="a"))
    await repository.entries.insert("new", entry(T + 2, task="b"))
    await repository.entries.insert("mid", entry(T + 1, task="a"))
    listed = await repository.entries.list_all()
    assert [i.key for i in listed] == ["new", "mid", "old"]
    assert listed[0].source == CacheSource("x1", "n1")
    assert (listed[0].task_name, listed[0].cache_version, listed[0].created_at) == (
        "b",
        "v1",
        T + 2,
    )
    assert [i.key for i in await repository.entries.list_all(task_name="a")] == ["mid", "old"]
    assert [i.key for i in await repository.entries.list_all(limit=1)] == ["new"]


async def test_delete_by_keys_or_task(repository: CatalogRepository) -> None:
    for key, task in [("k1", "a"), ("k2", "a"), ("k3", "b"), ("k4", "c")]:
        await repository.entries.insert(key, entry(T, task=task))
    assert await repository.entries.delete() == 0
    assert await repository.entries.delete(["k3", "missing"]) == 1
    assert await repository.entries.delete(task_name="a") == 2
    assert [i.key for i in await repository.entries.list_all()] == ["k4"]
    await repository.entries.insert("k5", entry(T, task="d"))
    assert await repository.entries.delete(["k4"], task_name="d") == 2
    assert await repository.entries.list_all() == []


async def test_now_is_epoch_seconds(repository: CatalogRepository) -> None:
    # A sanity bound, not a timing assertion: the authority speaks seconds since the epoch.
    now = await repository.now()
    assert isinstance(now, float)
    assert 1.6e9 < now < 4.1e9
