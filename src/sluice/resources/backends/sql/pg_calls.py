"""The SQL backend's hot paths on PostgreSQL: one call of a server function (migration
0002) per step instead of a statement per row set. The functions do bookkeeping only; the
admission rule still runs here in Python, on what they return, inside the same transaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncConnection

from sluice.resources.admission import Usage
from sluice.resources.backends._shared import WaiterRecord
from sluice.resources.backends.base import AllocationRequest, NamespaceUsage
from sluice.resources.backends.sql.reads import ready_usage, sources_of, usage_of, waiters_of
from sluice.resources.backends.sql.writes import lock_keys
from sluice.resources.models import Claim, QuotaSource

_LOAD = sa.text(
    "SELECT sluice_resources_load(CAST(:keys AS integer[]), CAST(:names AS text[]), :token, :now)"
)
_GRANT = sa.text(
    "SELECT sluice_resources_grant(:token, :project, :domain, :execution_id, :node_id, "
    "CAST(:names AS text[]), CAST(:units AS integer[]), :now, :expiry, "
    "CAST(:waited_in AS text[]))"
)
_RELEASE = sa.text(
    "SELECT sluice_resources_release("
    "CAST(:keys AS integer[]), :token, CAST(:names AS text[]), :now)"
)


@dataclass(frozen=True)
class Rows:
    """What an allocation reads of its namespaces, lapsed leases and waiters reclaimed."""

    sources: dict[str, dict[QuotaSource, int]]
    held: set[str]
    usage: dict[str, Usage]
    waiters: dict[str, list[WaiterRecord]]
    reclaimed: set[str]


async def load(conn: AsyncConnection, names: Sequence[str], token: str, now: float) -> Rows:
    """Lock the namespaces, reclaim what lapsed there, and read them: one round trip."""
    answer: dict[str, Any] = (
        await conn.execute(
            _LOAD, {"keys": lock_keys(names), "names": list(names), "token": token, "now": now}
        )
    ).scalar_one()
    return Rows(
        sources_of(answer["sources"]),
        set(answer["held"]),
        usage_of(names, answer["usage"]),
        waiters_of(answer["waiters"]),
        set(answer["reclaimed"]),
    )


async def grant(
    conn: AsyncConnection,
    request: AllocationRequest,
    new: Sequence[Claim],
    waited_in: Sequence[str],
) -> None:
    """Write holders for the `new` claims, count their units, drop the token's waiter entries
    in `waited_in`: one round trip."""
    holder = request.holder
    await conn.execute(
        _GRANT,
        {
            "token": request.token,
            "project": holder.project,
            "domain": holder.domain,
            "execution_id": holder.execution_id,
            "node_id": holder.node_id,
            "names": [c.namespace for c in new],
            "units": [c.units for c in new],
            "now": request.now,
            "expiry": request.now + request.lease,
            "waited_in": list(waited_in),
        },
    )


async def release(
    conn: AsyncConnection, token: str, names: Sequence[str], now: float
) -> tuple[NamespaceUsage, ...]:
    """Lock, drop the token's holders and waiter entries, forget idle namespaces, and return
    the usage and ready waiters of every namespace that changed: one round trip."""
    answer: Mapping[str, Any] = (
        await conn.execute(
            _RELEASE, {"keys": lock_keys(names), "token": token, "names": list(names), "now": now}
        )
    ).scalar_one()
    changed = sorted(set(answer["changed"]))
    if not changed:
        return ()
    return ready_usage(
        changed,
        sources_of(answer["sources"]),
        usage_of(changed, answer["usage"]),
        waiters_of(answer["waiters"]),
        now,
    )
