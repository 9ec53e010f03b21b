"""One admission on SQLite: plain statements in the caller's BEGIN IMMEDIATE transaction (the
store's direct path), the rule of `gcra.py` run on the rows read in it. The file's write lock
serialises every writer of every process, so nothing changes between the reads and the
writes."""

from __future__ import annotations

import sqlite3

from sluice.resources.ratelimit import gcra
from sluice.resources.ratelimit.models import Admission, AdmitRequest, RateClaim
from sluice.spec.rates import RateLimitRule

_RULE = """
SELECT rate, emission_interval, burst FROM rate_limits WHERE name = ?
ORDER BY CASE source WHEN 'operator' THEN 0 WHEN 'config' THEN 1 ELSE 2 END LIMIT 1
"""
_AHEAD = """
SELECT count(*), coalesce(sum(units), 0) FROM rate_limit_tickets
WHERE name = ? AND key = ? AND NOT granted AND token <> ?
  AND (since < ? OR (since = ? AND token < ?))
"""
_PUT_TICKET = """
INSERT INTO rate_limit_tickets
    (name, key, token, granted, units, since, expires_at, execution_id, node_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (name, key, token) DO UPDATE SET granted = excluded.granted,
    units = excluded.units, since = excluded.since, expires_at = excluded.expires_at,
    execution_id = excluded.execution_id, node_id = excluded.node_id
"""
_PUT_TAT = """
INSERT INTO rate_limit_state (name, key, tat) VALUES (?, ?, ?)
ON CONFLICT (name, key) DO UPDATE SET tat = excluded.tat
"""
Mine = tuple[bool, float] | None
"""The token's ticket in a key: (granted, since), or none."""


def admit_in_sqlite(cursor: sqlite3.Cursor, request: AdmitRequest, now: float) -> Admission:
    claims = request.claims
    rules = [_rule(cursor, claim) for claim in claims]
    for claim in claims:
        cursor.execute(
            "DELETE FROM rate_limit_tickets WHERE name = ? AND key = ? AND expires_at <= ?",
            (claim.name, claim.key, now),
        )
    mine = [_mine(cursor, claim, request.token) for claim in claims]
    if all(m is not None and m[0] for m in mine):
        return Admission(True, now, repeated=True)
    since = min((m[1] for m in mine if m is not None and not m[0]), default=now)
    views = [
        _view(cursor, claim, rule, m, request.token, since)
        for claim, rule, m in zip(claims, rules, mine, strict=True)
    ]
    verdict = gcra.judge(claims, views, now)
    if verdict.granted:
        _grant(cursor, request, verdict.tats, now)
        return Admission(True, now)
    expiry = gcra.waiter_expiry(verdict.next_at, now, request.recheck, request.grace)
    _wait(cursor, request, mine, since, expiry)
    blocking = claims[verdict.blocking]
    return Admission(
        False,
        now,
        False,
        verdict.next_at,
        blocking.name,
        blocking.key,
        verdict.position,
        rules[verdict.blocking].rate,
    )


def _rule(cursor: sqlite3.Cursor, claim: RateClaim) -> RateLimitRule:
    row = cursor.execute(_RULE, (claim.name,)).fetchone()
    rule = gcra.require_rule(claim.name, None if row is None else RateLimitRule(*row))
    gcra.require_fits(claim, rule)
    return rule


def _mine(cursor: sqlite3.Cursor, claim: RateClaim, token: str) -> Mine:
    row = cursor.execute(
        "SELECT granted, since FROM rate_limit_tickets WHERE name = ? AND key = ? AND token = ?",
        (claim.name, claim.key, token),
    ).fetchone()
    return None if row is None else (bool(row[0]), float(row[1]))


def _view(
    cursor: sqlite3.Cursor,
    claim: RateClaim,
    rule: RateLimitRule,
    mine: Mine,
    token: str,
    since: float,
) -> gcra.KeyView:
    row = cursor.execute(
        "SELECT tat FROM rate_limit_state WHERE name = ? AND key = ?", (claim.name, claim.key)
    ).fetchone()
    ahead, units = cursor.execute(
        _AHEAD, (claim.name, claim.key, token, since, since, token)
    ).fetchone()
    held = mine is not None and mine[0]
    return gcra.KeyView(rule, 0.0 if row is None else row[0], held, ahead, units)


def _grant(
    cursor: sqlite3.Cursor, request: AdmitRequest, tats: tuple[float | None, ...], now: float
) -> None:
    asker = request.asker
    for claim, tat in zip(request.claims, tats, strict=True):
        if tat is None:
            continue
        cursor.execute(_PUT_TAT, (claim.name, claim.key, tat))
        if request.remember > 0:
            cursor.execute(
                _PUT_TICKET,
                (
                    claim.name,
                    claim.key,
                    request.token,
                    True,
                    claim.units,
                    now,
                    now + request.remember,
                    asker.execution_id,
                    asker.node_id,
                ),
            )
        else:
            cursor.execute(
                "DELETE FROM rate_limit_tickets WHERE name = ? AND key = ? AND token = ?",
                (claim.name, claim.key, request.token),
            )


def _wait(
    cursor: sqlite3.Cursor, request: AdmitRequest, mine: list[Mine], since: float, expiry: float
) -> None:
    asker = request.asker
    for claim, m in zip(request.claims, mine, strict=True):
        if m is not None and m[0]:
            continue
        cursor.execute(
            _PUT_TICKET,
            (
                claim.name,
                claim.key,
                request.token,
                False,
                claim.units,
                since,
                expiry,
                asker.execution_id,
                asker.node_id,
            ),
        )
