"""Keyed rate limits in the store's tables: SQLite (the embedded default) and PostgreSQL.

An admission is one transaction: on SQLite a BEGIN IMMEDIATE transaction of plain statements
on the store's direct path (store/direct.py), the rule of `gcra.py` run in Python on rows
read in it (the file's write lock serialises every process); on PostgreSQL one call of
`sluice_ratelimit_admit` (migration 0009), one round trip, judged on the server's clock.
Withdrawals are one statement; rules, snapshots and sweeps go through SQLAlchemy.

Clock: `now=None` is the host's clock on SQLite (every process sharing the file is on one
machine) and `clock_timestamp()` on PostgreSQL (the one clock every engine shares).
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.errors import (
    BackendUnavailableError,
    RateLimitNeverFitsError,
    StoreUnavailableError,
)
from sluice.resources.backends.ratelimit_base import RateLimitBackend
from sluice.resources.backends.ratelimit_sqlite import admit_in_sqlite
from sluice.resources.backends.sql.tables import upsert_into
from sluice.resources.ratelimit import gcra
from sluice.resources.ratelimit.models import (
    RATE_LIMIT_SOURCES,
    Admission,
    AdmitRequest,
    KeySnapshot,
    LimitSnapshot,
    RateClaim,
    RateLimitSource,
    RateWaiter,
)
from sluice.spec.rates import RateLimitRule
from sluice.store import schema
from sluice.store.database import Database

RULES, STATE, TICKETS = schema.rate_limits, schema.rate_limit_state, schema.rate_limit_tickets
_SERVER_NOW = sa.select(sa.cast(sa.extract("epoch", sa.func.clock_timestamp()), sa.Double))
_PG_ADMIT = (
    "SELECT sluice_ratelimit_admit(%s::text[], %s::text[], %s::integer[], %s, %s, %s, "
    "%s::double precision, %s, %s, %s)"
)
_PG_WITHDRAW = (
    "DELETE FROM rate_limit_tickets WHERE token = %s AND NOT granted "
    "AND (name, key) IN (SELECT * FROM unnest(%s::text[], %s::text[]))"
)


@contextlib.contextmanager
def _as_backend_errors() -> Any:
    try:
        yield
    except StoreUnavailableError as exc:
        raise BackendUnavailableError(str(exc)) from exc


class SqlRateLimits(RateLimitBackend):
    """Give `db` to share the store's database, or `url` to open one of its own."""

    def __init__(self, *, url: str | None = None, db: Database | None = None) -> None:
        if (url is None) == (db is None):
            raise ValueError("SqlRateLimits needs exactly one of url and db")
        self._url, self._db, self._owns_db = url, db, db is None

    async def open(self) -> None:
        if self._db is None:
            assert self._url is not None
            with _as_backend_errors():
                self._db = await Database.open(self._url)

    async def close(self) -> None:
        if self._owns_db and self._db is not None:
            await self._db.close()
            self._db = None

    @property
    def db(self) -> Database:
        if self._db is None:
            raise RuntimeError("SqlRateLimits used before open()")
        return self._db

    @property
    def _postgres(self) -> bool:
        return self.db.dialect == "postgresql"

    async def admit(self, request: AdmitRequest, now: float | None) -> Admission:
        with _as_backend_errors():
            if not self._postgres:
                at = time.time() if now is None else now
                return await self.db.direct().write(lambda c: admit_in_sqlite(c, request, at))
            claims = request.claims
            args = (
                [c.name for c in claims],
                [c.key for c in claims],
                [c.units for c in claims],
                request.token,
                request.asker.execution_id,
                request.asker.node_id,
                now,
                request.remember,
                request.recheck,
                request.grace,
            )
            async with self.db.pg_direct().connection() as conn:
                row = await (await conn.execute(_PG_ADMIT, args)).fetchone()
        return _admission(row[0])

    async def withdraw(self, claims: Sequence[RateClaim], token: str, now: float | None) -> None:
        names, keys = [c.name for c in claims], [c.key for c in claims]
        with _as_backend_errors():
            if self._postgres:
                async with self.db.pg_direct().connection() as conn:
                    await conn.execute(_PG_WITHDRAW, (token, names, keys))
                return
            await self.db.direct().write(lambda c: _withdraw_in_sqlite(c, names, keys, token))

    async def set_rules(
        self,
        source: RateLimitSource,
        rules: Mapping[str, RateLimitRule | None],
        now: float | None,
    ) -> None:
        async with self._write() as conn:
            at = await self._now(conn, now)
            for name, rule in rules.items():
                await _store_rule(conn, name, source, rule, at)
                effective = (await _rules_of(conn, [name])).get(name)
                if effective:  # a changed rule: what the old one owed beyond a bucket goes
                    rule_now = effective[0][1]
                    ceiling = at + rule_now.burst * rule_now.interval
                    await conn.execute(
                        sa.update(STATE)
                        .where(STATE.c.name == name, STATE.c.tat > ceiling)
                        .values(tat=ceiling)
                    )

    async def snapshot(self, name: str | None, now: float | None) -> list[LimitSnapshot]:
        with _as_backend_errors():
            async with self.db.read() as conn:
                at = await self._now(conn, now)
                return await _snapshot(conn, name, at)

    async def sweep(self, now: float | None) -> int:
        async with self._write() as conn:
            at = await self._now(conn, now)
            lapsed = await conn.execute(sa.delete(TICKETS).where(TICKETS.c.expires_at <= at))
            idle = await conn.execute(sa.delete(STATE).where(STATE.c.tat <= at))
            return max(lapsed.rowcount or 0, 0) + max(idle.rowcount or 0, 0)

    @contextlib.asynccontextmanager
    async def _write(self) -> AsyncIterator[AsyncConnection]:
        with _as_backend_errors():
            async with self.db.begin() as conn:
                yield conn

    async def _now(self, conn: AsyncConnection, now: float | None) -> float:
        if now is not None:
            return now
        if not self._postgres:
            return time.time()
        return float((await conn.execute(_SERVER_NOW)).scalar_one())


def _admission(answer: dict[str, Any]) -> Admission:
    if "unknown" in answer:
        gcra.require_rule(answer["unknown"], None)
    if "too_big" in answer:
        raise RateLimitNeverFitsError(
            f"rate limit {answer['too_big']!r} ({answer['rate']}) admits at most "
            f"{answer['burst']} unit(s) at once, but a claim takes {answer['units']}: it could "
            f"never be admitted; give the limit a burst of at least {answer['units']}"
        )
    if answer["granted"]:
        return Admission(True, float(answer["now"]), bool(answer.get("repeated")))
    return Admission(
        False,
        float(answer["now"]),
        False,
        float(answer["next_at"]),
        answer["name"],
        answer["key"],
        int(answer["position"]),
        answer["rate"],
    )


def _withdraw_in_sqlite(
    cursor: sqlite3.Cursor, names: list[str], keys: list[str], token: str
) -> None:
    cursor.executemany(
        "DELETE FROM rate_limit_tickets WHERE name = ? AND key = ? AND token = ? AND NOT granted",
        [(name, key, token) for name, key in zip(names, keys, strict=True)],
    )


async def _store_rule(
    conn: AsyncConnection, name: str, source: str, rule: RateLimitRule | None, now: float
) -> None:
    if rule is None:
        await conn.execute(sa.delete(RULES).where(RULES.c.name == name, RULES.c.source == source))
        return
    values = {
        "rate": rule.rate,
        "emission_interval": rule.interval,
        "burst": rule.burst,
        "updated_at": now,
    }
    # An upsert: every process stores the configured rules when it starts, all at once.
    statement = upsert_into(conn, RULES).values(name=name, source=source, **values)
    await conn.execute(
        statement.on_conflict_do_update(index_elements=[RULES.c.name, RULES.c.source], set_=values)
    )


Rules = dict[str, list[tuple[RateLimitSource, RateLimitRule]]]


async def _rules_of(conn: AsyncConnection, names: list[str] | None) -> Rules:
    query = sa.select(RULES)
    if names is not None:
        query = query.where(RULES.c.name.in_(names))
    found: Rules = {}
    for row in await conn.execute(query):
        rule = RateLimitRule(row.rate, row.emission_interval, row.burst)
        found.setdefault(row.name, []).append((row.source, rule))
    for entries in found.values():
        entries.sort(key=lambda entry: RATE_LIMIT_SOURCES.index(entry[0]))
    return found


async def _snapshot(conn: AsyncConnection, name: str | None, now: float) -> list[LimitSnapshot]:
    names = None if name is None else [name]
    rules = await _rules_of(conn, names)
    states = sa.select(STATE).where(STATE.c.tat > now)
    waiters = sa.select(TICKETS).where(~TICKETS.c.granted, TICKETS.c.expires_at > now)
    if name is not None:
        states, waiters = states.where(STATE.c.name == name), waiters.where(TICKETS.c.name == name)
    tats = {(r.name, r.key): r.tat for r in await conn.execute(states)}
    lines: dict[tuple[str, str], list[Any]] = {}
    for row in await conn.execute(waiters):
        lines.setdefault((row.name, row.key), []).append(row)
    shown = sorted(set(rules) | {n for n, _ in tats} | {n for n, _ in lines})
    return [_limit(n, rules.get(n, []), tats, lines, now) for n in shown]


def _limit(
    name: str,
    rules: list[tuple[RateLimitSource, RateLimitRule]],
    tats: dict[tuple[str, str], float],
    lines: dict[tuple[str, str], list[Any]],
    now: float,
) -> LimitSnapshot:
    rule = rules[0][1] if rules else None
    keys = sorted({k for n, k in tats if n == name} | {k for n, k in lines if n == name})
    return LimitSnapshot(
        name,
        rule,
        rules[0][0] if rules else None,
        now,
        tuple(
            _key(key, rule, tats.get((name, key), 0.0), lines.get((name, key), []), now)
            for key in keys
        ),
        tuple(rules),
    )


def _key(
    key: str, rule: RateLimitRule | None, tat: float, line: list[Any], now: float
) -> KeySnapshot:
    ordered = sorted(line, key=lambda row: (row.since, row.token))
    waiters = tuple(
        RateWaiter(i + 1, r.token, r.execution_id, r.node_id, r.units, r.since, r.expires_at)
        for i, r in enumerate(ordered)
    )
    free = gcra.next_free(rule, tat, now) if rule else max(tat, now)
    units = gcra.available(rule, tat, now) if rule else 0
    return KeySnapshot(key, tat, free, units, waiters)
