"""Keyed rate limits: list them (keys, next free times, waiters), set and clear an operator's
limit. A limit set here wins over the config and plugins, for every engine."""

from __future__ import annotations

from pydantic import BaseModel, Field

from sluice.http.api.base import Service, api_routes
from sluice.service.rate_limits import RateLimitView

router = api_routes()


class RateLimitValue(BaseModel):
    rate: str = Field(min_length=1, description="COUNT/PERIOD, PERIOD one of s, min, hour, day")
    burst: int | None = Field(default=None, ge=1, description="Units that may go at once")


@router.get("/ratelimits", tags=["rate limits"])
async def list_rate_limits(sluice: Service, name: str | None = None) -> list[RateLimitView]:
    """Limits with their rule and sources, their live keys and the tasks waiting in each."""
    return await sluice.rate_limits.describe(name)


@router.put("/ratelimits/{name}", tags=["rate limits"])
async def set_rate_limit(sluice: Service, name: str, body: RateLimitValue) -> RateLimitView:
    """Set a limit for every engine ("100/min"); no window of the period holds more."""
    return await sluice.rate_limits.set(name, body.rate, body.burst)


@router.delete("/ratelimits/{name}", tags=["rate limits"])
async def clear_rate_limit(sluice: Service, name: str) -> RateLimitView:
    """Drop the operator's limit; the configured or registered one applies again."""
    return await sluice.rate_limits.clear(name)
