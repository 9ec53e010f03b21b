"""Keyed rate limits: list them (keys, next free times, waiters), set and clear an operator's
limit. A limit set here wins over the config and plugins, for every engine."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from sluice.http.api.base import Service, api_routes
from sluice.http.api.params import NAMESPACE
from sluice.service.rate_limits import RateLimitView
from sluice.spec.names import NAMESPACE_MAX
from sluice.spec.rates import LARGEST_COUNT

router = api_routes()


RATE = r"^\s*[0-9]+\s*/\s*[A-Za-z]+\s*(,?\s*burst\s+[0-9]+)?\s*$"
RateLimitName = Annotated[
    str, Path(min_length=1, max_length=NAMESPACE_MAX, pattern=NAMESPACE, description="A limit")
]


class RateLimitValue(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rate: str = Field(
        min_length=1,
        max_length=100,
        pattern=RATE,
        description="COUNT/PERIOD[, burst B]: COUNT 1 to 1,000,000,000, PERIOD one of s, min, "
        "hour, day (and their long forms), B at most COUNT",
    )
    burst: int | None = Field(
        default=None, ge=1, le=LARGEST_COUNT, description="Units that may go at once"
    )


@router.get("/ratelimits", tags=["rate limits"])
async def list_rate_limits(
    sluice: Service,
    name: Annotated[
        str | None, Query(min_length=1, max_length=NAMESPACE_MAX, pattern=NAMESPACE)
    ] = None,
) -> list[RateLimitView]:
    """Limits with their rule and sources, their live keys and the tasks waiting in each."""
    return await sluice.rate_limits.describe(name)


@router.put("/ratelimits/{name}", tags=["rate limits"])
async def set_rate_limit(
    sluice: Service, name: RateLimitName, body: RateLimitValue
) -> RateLimitView:
    """Set a limit for every engine ("100/min"); no window of the period holds more."""
    return await sluice.rate_limits.set(name, body.rate, body.burst)


@router.delete("/ratelimits/{name}", tags=["rate limits"])
async def clear_rate_limit(sluice: Service, name: RateLimitName) -> RateLimitView:
    """Drop the operator's limit; the configured or registered one applies again."""
    return await sluice.rate_limits.clear(name)
