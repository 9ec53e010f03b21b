"""Keyed rate limits in Redis: one Lua script per primitive (`lua/ratelimit_*.lua`, each run
with `lua/_ratelimit_common.lua` first), so an admission is one atomic step on the server,
judged on the server's `TIME` unless a test clock's time is passed. Every per-key entry
carries a TTL reaching just past the moment its key is idle and nothing of it is live: idle
keys cost nothing and need no sweeper."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Mapping, Sequence
from importlib import resources as package_files
from typing import Any

from sluice.errors import BackendUnavailableError, MissingDependencyError, RateLimitNeverFitsError
from sluice.resources.backends.ratelimit_base import RateLimitBackend
from sluice.resources.ratelimit import gcra
from sluice.resources.ratelimit.models import (
    Admission,
    AdmitRequest,
    KeySnapshot,
    LimitSnapshot,
    RateClaim,
    RateLimitSource,
    RateWaiter,
)
from sluice.spec.rates import RateLimitRule

_SCRIPTS = ("admit", "withdraw", "set_rules", "snapshot", "sweep")
_TIMEOUT = 5.0


def _lua(name: str) -> str:
    return package_files.files("sluice.resources.backends").joinpath(f"lua/{name}.lua").read_text()


def _script(name: str) -> str:
    return f"{_lua('_ratelimit_common')}\n{_lua(f'ratelimit_{name}')}"


def _time(now: float | None) -> str:
    return "" if now is None else repr(now)


class RedisRateLimits(RateLimitBackend):
    """Rate limit state in Redis (`redis://host:port/db`), under `<prefix>:{ratelimits}`."""

    def __init__(self, url: str, *, key_prefix: str = "sluice") -> None:
        try:
            import redis.asyncio as aioredis
        except ImportError:
            raise MissingDependencyError(
                "the redis:// rate limit backend needs the redis driver: "
                "pip install 'sluice[redis]'"
            ) from None
        self._module: Any = aioredis
        self._url = url
        self._base = f"{key_prefix}:{{ratelimits}}"
        self._client: Any = None
        self._scripts = {name: _script(name) for name in _SCRIPTS}
        self._shas = {
            name: hashlib.sha1(text.encode()).hexdigest() for name, text in self._scripts.items()
        }

    async def open(self) -> None:
        self._client = self._module.Redis.from_url(
            self._url, decode_responses=True, socket_connect_timeout=_TIMEOUT
        )
        async with self._translated():
            await self._client.ping()

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    @contextlib.asynccontextmanager
    async def _translated(self) -> AsyncIterator[None]:
        from redis.exceptions import RedisError

        try:
            async with asyncio.timeout(_TIMEOUT):
                yield
        except (RedisError, OSError) as exc:  # TimeoutError is an OSError
            raise BackendUnavailableError(f"redis rate limit backend {self._url}: {exc}") from exc

    async def _run(self, name: str, *args: str) -> Any:
        from redis.exceptions import NoScriptError

        if self._client is None:
            raise RuntimeError("RedisRateLimits used before open()")
        async with self._translated():
            try:
                return await self._client.evalsha(self._shas[name], 0, self._base, *args)
            except NoScriptError:  # first use, or the server's script cache was flushed
                await self._client.script_load(self._scripts[name])
                return await self._client.evalsha(self._shas[name], 0, self._base, *args)

    async def admit(self, request: AdmitRequest, now: float | None) -> Admission:
        args = [
            _time(now),
            request.token,
            request.asker.execution_id,
            request.asker.node_id,
            repr(request.remember),
            repr(request.recheck),
            repr(request.grace),
        ]
        for claim in request.claims:
            args += (claim.name, claim.key, str(claim.units))
        return _admission(await self._run("admit", *args))

    async def withdraw(self, claims: Sequence[RateClaim], token: str, now: float | None) -> None:
        args = [token]
        for claim in claims:
            args += (claim.name, claim.key)
        await self._run("withdraw", *args)

    async def set_rules(
        self,
        source: RateLimitSource,
        rules: Mapping[str, RateLimitRule | None],
        now: float | None,
    ) -> None:
        args = [_time(now), source]
        for name, rule in rules.items():
            args += (name, "" if rule is None else f"{rule.rate}\n{rule.interval!r}\n{rule.burst}")
        await self._run("set_rules", *args)

    async def snapshot(self, name: str | None, now: float | None) -> list[LimitSnapshot]:
        answer = json.loads(await self._run("snapshot", _time(now), name or ""))
        at = float(answer["now"])
        limits = [_limit(entry, at) for entry in _list(answer["limits"])]
        return sorted(limits, key=lambda s: s.name)

    async def sweep(self, now: float | None) -> int:
        return int(await self._run("sweep", _time(now)))


def _list(value: Any) -> list[Any]:
    """cjson encodes an empty Lua table as {}."""
    return list(value) if isinstance(value, list) else []


def _admission(answer: list[str]) -> Admission:
    status = answer[0]
    if status == "unknown":
        gcra.require_rule(answer[1], None)
    if status == "too_big":
        name, units, burst, rate = answer[1:5]
        raise RateLimitNeverFitsError(
            f"rate limit {name!r} ({rate}) admits at most {burst} unit(s) at once, but a claim "
            f"takes {units}: it could never be admitted; give the limit a burst of at least "
            f"{units}"
        )
    if status in ("granted", "repeated"):
        return Admission(True, float(answer[1]), status == "repeated")
    now, next_at, name, key, position, rate = answer[1:7]
    return Admission(False, float(now), False, float(next_at), name, key, int(position), rate)


def _limit(entry: dict[str, Any], now: float) -> LimitSnapshot:
    rules: list[tuple[RateLimitSource, RateLimitRule]] = [
        (source, RateLimitRule(rate, float(interval), int(burst)))
        for source, rate, interval, burst in _list(entry["rules"])
    ]
    rule = rules[0][1] if rules else None
    keys = sorted((_key(k, rule, now) for k in _list(entry["keys"])), key=lambda k: k.key)
    return LimitSnapshot(
        entry["name"], rule, rules[0][0] if rules else None, now, tuple(keys), tuple(rules)
    )


def _key(entry: dict[str, Any], rule: RateLimitRule | None, now: float) -> KeySnapshot:
    tat = float(entry["tat"])
    waiters = tuple(
        RateWaiter(i + 1, w["t"], w["e"], w["n"], int(w["u"]), float(w["s"]), float(w["x"]))
        for i, w in enumerate(_list(entry["w"]))
    )
    free = gcra.next_free(rule, tat, now) if rule else max(tat, now)
    units = gcra.available(rule, tat, now) if rule else 0
    return KeySnapshot(entry["key"], tat, free, units, waiters)
