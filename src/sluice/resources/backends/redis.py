"""The Redis backend: one Lua script per operation (`lua/*.lua`), so every operation is one
atomic step on the server, never a check and an act across round trips.

All keys live under `<prefix>:{resources}`: the hash tag puts them in one cluster slot, which a
claim on several namespaces needs. Wake-ups are published by the scripts themselves on
`<prefix>:{resources}:wake`, when another instance listens (`lua/_publish.lua`), and received
here through pub/sub.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib
import json
import logging
import os
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from importlib import resources as package_files
from typing import Any, cast

from sluice.cancellation import reraise_cancellation
from sluice.errors import (
    BackendUnavailableError,
    ClaimExceedsQuotaError,
    MissingDependencyError,
    UnknownNamespaceError,
)
from sluice.resources.admission import STARVATION_BOUND, Ask
from sluice.resources.backends._shared import (
    ALSO_ELSEWHERE,
    WaiterRecord,
    build_snapshot,
    stored_waiter,
)
from sluice.resources.backends.base import (
    AllocationOutcome,
    AllocationRequest,
    NamespaceUsage,
    ResourceBackend,
    WakeCallback,
)
from sluice.resources.models import (
    AllocationResult,
    AllocationStatus,
    HolderInfo,
    NamespaceSnapshot,
    QuotaSource,
)

log = logging.getLogger(__name__)
_SCRIPTS = ("allocate", "release", "renew", "transfer", "sweep", "set_quotas", "snapshot")
_PRELUDES = ("_common", "_writes", "_admission")
_GENERAL = "\n-- GENERAL PATH"
_RETRY_PAUSE = 1.0
_TIMEOUT = 5.0
"""Seconds a command may take (redis-py 8's default socket timeout), unless the URL sets its
own `socket_timeout`. Our client leaves redis-py's socket timeout unset and bounds each
script with `asyncio.timeout` instead: redis-py wraps every send under a socket timeout in
`asyncio.wait_for`, a task of its own before Python 3.12, which cost about 19 us of CPU per
command here."""
_GRANTED = AllocationResult(AllocationStatus.GRANTED)


def _import_redis() -> Any:
    try:
        import redis.asyncio as aioredis
    except ImportError:
        raise MissingDependencyError(
            "the redis:// resource backend needs the redis driver: pip install 'sluice[redis]'"
        ) from None
    return aioredis


def _pack_in_python(args: tuple[Any, ...]) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for arg in args:
        data = arg if type(arg) is bytes else str(arg).encode()
        parts.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(parts)


def _fast_packer() -> Callable[[tuple[Any, ...]], bytes]:
    """How a command of plain str/bytes/int arguments becomes its RESP bytes: hiredis's C
    packer when hiredis is installed (`sluice[redis]` brings it), else `_pack_in_python`.
    Both give the bytes redis-py's own `pack_command` gives (UTF-8, ints in decimal), which
    took 8.5 us for an allocate's 18 arguments here, against 1.0 and 2.7 us."""
    try:
        hiredis = importlib.import_module("hiredis")
    except ImportError:
        return _pack_in_python
    return cast(Callable[[tuple[Any, ...]], bytes], hiredis.pack_command)


_PACK = _fast_packer()
_PLAIN = frozenset((str, bytes, int))


def _with_fast_packing(connection_class: type[Any]) -> type[Any]:
    """`connection_class` (plain, TLS or Unix socket) whose `pack_command` packs plain
    arguments with `_PACK`; anything else (a command name with a space, such as "SCRIPT
    LOAD", floats, memoryviews, another encoding) goes through redis-py's own."""

    class FastPacking(connection_class):  # type: ignore[misc]
        def pack_command(self, *args: Any) -> list[bytes]:
            encoder = self.encoder
            if (
                encoder.encoding == "utf-8"
                and encoder.encoding_errors == "strict"
                and type(args[0]) is str
                and " " not in args[0]
                and all(type(arg) in _PLAIN for arg in args)
            ):
                return [_PACK(args)]
            return super().pack_command(*args)  # type: ignore[no-any-return]

    FastPacking.__name__ = FastPacking.__qualname__ = f"FastPacking{connection_class.__name__}"
    return FastPacking


def _lua(name: str) -> str:
    return package_files.files("sluice.resources.backends").joinpath(f"lua/{name}.lua").read_text()


_CLOCK_ARGS: dict[str, tuple[int, int | None]] = {
    "allocate": (2, 3),
    "release": (4, None),
    "renew": (4, 5),
    "sweep": (2, None),
    "transfer": (4, 5),
    "snapshot": (3, None),
}
"""Per script, the ARGV positions of its time and of its expiry (`lua/_clock.lua`)."""


def _times(now: float | None, lease: float) -> tuple[str, str]:
    """The time and expiry arguments: a test clock's time and its absolute expiry, or none
    and the lease, for the script to read the server's TIME (`lua/_clock.lua`)."""
    if now is None:
        return "", repr(lease)
    return repr(now), repr(now + lease)  # times computed here keep full precision


def _script(name: str) -> str:
    """A script as Redis runs it: `_publish.lua`, the store's clock where the script judges
    time (`_clock.lua`), the script's fast path (what comes before its GENERAL PATH line, if
    any), then the rest as a function with the preludes at its top. The preludes' functions
    are made on every run of that function, a cost the fast path spares when it answers
    alone."""
    fast, marker, general = _lua(name).partition(_GENERAL)
    if not marker:
        fast, general = "", fast
    constants = (
        f"local STARVATION_BOUND = {STARVATION_BOUND!r}\n"
        f"local ALSO_ELSEWHERE = {json.dumps(ALSO_ELSEWHERE)}"
    )
    prelude = "\n".join([constants, *(_lua(prelude) for prelude in _PRELUDES)])
    general = f"local function general()\n{prelude}\n{marker}{general}\nend\nreturn general()\n"
    clock = ""
    if name in _CLOCK_ARGS:
        now_i, expiry_i = _CLOCK_ARGS[name]
        clock = f"{_lua('_clock')}\nstore_clock({now_i}, {'nil' if expiry_i is None else expiry_i})"
    return f"{_lua('_publish')}\n{clock}\n{fast}\n{general}"


def _unavailable(url: str, exc: Exception) -> BackendUnavailableError:
    """What a redis error becomes (in `_translated` and `RedisBackend._run`)."""
    return BackendUnavailableError(f"redis resource backend {url}: {exc}")


@contextlib.asynccontextmanager
async def _translated(url: str) -> AsyncIterator[None]:
    from redis.exceptions import RedisError

    try:
        yield
    except (RedisError, OSError) as exc:
        raise _unavailable(url, exc) from exc


class RedisBackend(ResourceBackend):
    """Resource bookkeeping in Redis (`redis://host:port/db`)."""

    def __init__(self, url: str, *, key_prefix: str = "sluice") -> None:
        self._module = _import_redis()
        from redis.exceptions import ConnectionError, NoScriptError, RedisError, TimeoutError

        self._no_script: type[Exception] = NoScriptError
        self._lost: tuple[type[Exception], ...] = (ConnectionError, TimeoutError)
        self._failures: tuple[type[Exception], ...] = (RedisError, OSError)
        self._url = url
        self._base = f"{key_prefix}:{{resources}}"
        self._origin = uuid.uuid4().hex
        self._own_wake = f'{{"o":"{self._origin}"'  # how this instance's wake-ups begin
        self._client: Any = None
        self._scripts: dict[str, tuple[str, str]] = {}  # name -> (sha1, text)
        self._callbacks: list[WakeCallback] = []
        self._pubsub: Any = None
        self._running = 0  # commands in flight, which close() lets finish
        self._idle: list[Any] = []  # pool connections between two scripts (`_evalsha`)
        self._idle_pid = os.getpid()
        self._drained: asyncio.Event | None = None
        self._listener: asyncio.Task[None] | None = None

    async def open(self) -> None:
        # Options in the URL win over these (redis-py's from_url).
        self._client = self._module.Redis.from_url(
            self._url, decode_responses=True, socket_timeout=None, socket_connect_timeout=_TIMEOUT
        )
        pool = self._client.connection_pool
        pool.connection_class = _with_fast_packing(pool.connection_class)
        for name in _SCRIPTS:
            text = _script(name)
            self._scripts[name] = (hashlib.sha1(text.encode()).hexdigest(), text)
        try:
            async with _translated(self._url):
                async with asyncio.timeout(self._timeout()):
                    await self._client.ping()
                # Subscribed here, not in the listener task: a task cancelled while it
                # subscribes leaves the pub/sub connection unable to close.
                self._pubsub = self._client.pubsub(ignore_subscribe_messages=True)
                # Both in one SUBSCRIBE (redis-py subscribes again the same way after a lost
                # connection), so the scripts can count who else listens (_publish.lua).
                wake = f"{self._base}:wake"
                await self._pubsub.subscribe(wake, f"{wake}:{self._origin}")
        except BaseException:
            await self.close()
            raise
        self._listener = asyncio.create_task(self._listen(), name="sluice-resources-wake")

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        while self._running:
            self._drained = asyncio.Event()
            await self._drained.wait()
        if self._pubsub is not None:
            await self._pubsub.aclose()
            self._pubsub = None
        if self._client is not None:
            while self._idle:
                await self._client.connection_pool.release(self._idle.pop())
            await self._client.aclose()
            self._client = None

    async def _run(self, script: str, *args: str) -> Any:
        """The script's answer; a JSON answer is left for the caller to decode."""
        client = self._client
        if client is None:
            raise RuntimeError("RedisBackend used before open()")
        sha, text = self._scripts[script]
        # The command runs in the caller's task, not in a task of its own behind
        # asyncio.shield, which cost a few event-loop turns per command. A cancellation in
        # the middle of it makes redis-py close the connection (it reconnects on its next
        # use; a grant the caller did not see lapses with its lease). One that is swallowed
        # on the way (redis-py's asyncio.wait_for around a send under a socket timeout, before
        # Python 3.12, on the fallback paths when the URL sets one) lets the command run on
        # to its answer: the task's count of cancel requests still shows it, so it is raised
        # here instead of being lost.
        task = asyncio.current_task()
        cancels = task.cancelling() if task is not None else 0
        self._running += 1
        try:
            # TimeoutError, when it expires, is an OSError: one of the failures below.
            async with asyncio.timeout(self._timeout()):
                try:
                    answer = await self._evalsha(client, sha, args)
                except self._no_script:  # first use, or the server's script cache was flushed
                    await client.script_load(text)
                    answer = await self._evalsha_again(client, sha, text, args)
                except self._lost:  # again through redis-py's command path, with its retries
                    answer = await self._evalsha_again(client, sha, text, args)
        except self._failures as exc:
            if task is not None and task.cancelling() > cancels:
                raise asyncio.CancelledError from exc
            raise _unavailable(self._url, exc) from exc
        finally:
            self._running -= 1
            if not self._running and self._drained is not None:
                self._drained.set()
        if task is not None and task.cancelling() > cancels:
            raise asyncio.CancelledError
        return answer

    async def _evalsha_again(self, client: Any, sha: str, text: str, args: tuple[str, ...]) -> Any:
        """The script through redis-py's own command path (its retries on a lost
        connection), loading it first if the server does not know it (a restarted server
        after a lost connection)."""
        try:
            return await client.evalsha(sha, 0, self._base, *args)
        except self._no_script:
            await client.script_load(text)
            return await client.evalsha(sha, 0, self._base, *args)

    def _timeout(self) -> float:
        configured = self._client.connection_pool.connection_kwargs.get("socket_timeout")
        return float(configured) if configured else _TIMEOUT

    async def _evalsha(self, client: Any, sha: str, args: tuple[str, ...]) -> Any:
        """One EVALSHA on a connection of the client's pool: the send and the read of
        redis-py's `execute_command` without its wrapping (the retry closure, the
        observability hooks, the reply callbacks, none of which EVALSHA uses here). The
        connection is kept between commands in `_idle` rather than handed back to the pool
        each time (the pool's lock and bookkeeping cost as much as the send). The
        connection's own methods close it on an error or a cancellation halfway; it then
        goes back to the pool, and a lost connection is retried by the caller through
        redis-py."""
        idle = self._idle
        if self._idle_pid != os.getpid():  # forked: those sockets are the parent's, and
            idle.clear()  # are forgotten, not closed, as redis-py's pool does after a fork
            self._idle_pid = os.getpid()
        connection = idle.pop() if idle else await client.connection_pool.get_connection()
        try:
            await connection.send_packed_command(
                connection.pack_command("EVALSHA", sha, 0, self._base, *args)
            )
            answer = await connection.read_response()
        except BaseException:
            await client.connection_pool.release(connection)
            raise
        idle.append(connection)
        return answer

    async def allocate(self, request: AllocationRequest) -> AllocationOutcome:
        holder = request.holder
        args = [
            *_times(request.now, request.lease),
            request.token,
            self._origin,
            holder.project,
            holder.domain,
            holder.execution_id,
            holder.node_id,
            str(holder.priority),
        ]
        for claim in request.claims:
            caps = claim.constraints
            args += (
                claim.namespace,
                str(claim.units),
                _optional(claim.default_quota),
                _optional(caps.project_scope if caps else None),
                _optional(caps.namespace_scope if caps else None),
            )
        answer = await self._run("allocate", *args)
        if isinstance(answer, list):  # granted at once, nobody waiting
            usage = tuple(
                NamespaceUsage(claim.namespace, in_use, 0)
                for claim, in_use in zip(request.claims, answer, strict=True)
            )
            return AllocationOutcome(_GRANTED, None, usage)
        decoded = json.loads(answer)
        if "unknown" in decoded:
            raise UnknownNamespaceError(
                f"unknown resource namespace {decoded['unknown']!r}: no quota registered, "
                "configured or set, and the claim brings no default"
            )
        if "too_big" in decoded:
            raise ClaimExceedsQuotaError(
                decoded["too_big"], int(decoded["units"]), int(decoded["quota"])
            )
        return _outcome(decoded)

    async def release(
        self, token: str, namespaces: Sequence[str], now: float | None
    ) -> tuple[NamespaceUsage, ...]:
        names = dict.fromkeys(namespaces)
        answer = await self._run("release", token, self._origin, _times(now, 0)[0], *names)
        if isinstance(answer, list):  # nobody waits there: [namespace, in_use, ...]
            return tuple(
                NamespaceUsage(answer[i], answer[i + 1], 0) for i in range(0, len(answer), 2)
            )
        return _usage(json.loads(answer))

    async def renew(
        self, token: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        names = json.dumps(list(namespaces))
        answer = await self._run("renew", token, names, *_times(now, lease))
        return frozenset(_list(json.loads(answer)))

    async def transfer(
        self, old: str, new: str, namespaces: Sequence[str], now: float | None, lease: float
    ) -> frozenset[str]:
        names = json.dumps(list(namespaces))
        answer = await self._run("transfer", old, new, *_times(now, lease), names)
        return frozenset(_list(json.loads(answer)))

    async def sweep(self, now: float | None) -> tuple[NamespaceUsage, ...]:
        answer = await self._run("sweep", _times(now, 0)[0], self._origin)
        return _usage(json.loads(answer))

    async def set_quotas(
        self, source: QuotaSource, quotas: Mapping[str, int | None], now: float | None
    ) -> None:
        if quotas:
            entries = json.dumps([[ns, q or 0] for ns, q in quotas.items()])
            await self._run("set_quotas", source, entries, self._origin)

    async def snapshot(self, namespace: str | None, now: float | None) -> list[NamespaceSnapshot]:
        answer = await self._run("snapshot", namespace or "", _times(now, 0)[0])
        answer = _list(json.loads(answer))
        return sorted((_snapshot(entry) for entry in answer), key=lambda s: s.namespace)

    def listen(self, callback: WakeCallback) -> Callable[[], None]:
        self._callbacks.append(callback)

        def stop() -> None:
            with contextlib.suppress(ValueError):
                self._callbacks.remove(callback)

        return stop

    async def _listen(self) -> None:
        # Waiters still ask on their own while wake-ups are interrupted.
        while True:
            try:
                await self._receive()
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                reraise_cancellation()
                if self.health is not None:  # one line per outage, with the commands'
                    self.health.lost(BackendUnavailableError(f"wake-ups interrupted: {exc}"))
                else:
                    log.warning("resource wake-ups from redis interrupted: %s", exc)
                await asyncio.sleep(_RETRY_PAUSE)

    async def _receive(self) -> None:
        # After a lost connection, redis-py reconnects and subscribes again on the next read.
        while True:
            message = await self._pubsub.get_message(timeout=None)
            if message is not None:
                self._deliver(str(message.get("data", "")))

    def _deliver(self, payload: str) -> None:
        if payload.startswith(self._own_wake):
            return  # caused through this instance: the policy wakes its own subscribers
        try:
            notice = json.loads(payload)
        except ValueError:
            log.warning("ignoring malformed resource wake-up %r", payload)
            return
        if notice.get("o") == self._origin:
            return
        for entry in _list(notice.get("w")):
            ready = tuple(_list(entry[1])) if len(entry) > 1 else None
            for callback in list(self._callbacks):
                callback(entry[0], ready)


def _optional(number: int | None) -> str:
    return "" if number is None else str(number)


def _list(value: Any) -> list[Any]:
    """cjson encodes an empty Lua table as {}."""
    return list(value) if isinstance(value, list) else []


def _usage(answer: Any) -> tuple[NamespaceUsage, ...]:
    return tuple(
        NamespaceUsage(
            u["namespace"],
            int(u["in_use"]),
            int(u["waiters"]),
            tuple(_list(u["ready"])) if "ready" in u else None,
        )
        for u in _list(answer)
    )


def _outcome(answer: dict[str, Any]) -> AllocationOutcome:
    usage, reclaimed = _usage(answer["usage"]), tuple(_list(answer.get("reclaimed")))
    if answer["status"] == "granted":
        waited, now = answer.get("waited_since"), answer.get("now")
        result = AllocationResult(AllocationStatus.GRANTED)
        return AllocationOutcome(
            result,
            float(waited) if waited else None,
            usage,
            reclaimed,
            float(now) if now else None,
        )
    status = (
        AllocationStatus.EXHAUSTED
        if answer["scope"] == "global"
        else AllocationStatus.NAMESPACE_QUOTA_EXCEEDED
    )
    result = AllocationResult(
        status,
        answer["ns"],
        answer["scope"],
        int(answer["in_use"]),
        int(answer["limit"]),
        int(answer["position"]),
    )
    return AllocationOutcome(result, None, usage, reclaimed)


def _snapshot(entry: dict[str, Any]) -> NamespaceSnapshot:
    quotas = entry["quotas"] if isinstance(entry["quotas"], dict) else {}
    holders = [
        HolderInfo(
            h["t"], h["p"], h["d"], h["e"], h["n"], int(h["u"]), float(h["g"]), float(h["x"])
        )
        for h in _list(entry["holders"])
    ]
    waiters = [_waiter(w) for w in _list(entry["waiters"])]
    return build_snapshot(entry["ns"], {k: int(v) for k, v in quotas.items()}, holders, waiters)


def _waiter(w: dict[str, Any]) -> WaiterRecord:
    ask = Ask(
        w["t"],
        w["p"],
        w["d"],
        int(w["u"]),
        w.get("pc"),
        w.get("dc"),
        int(w["pr"]),
        float(w["s"]),
    )
    return stored_waiter(ask, w["e"], w["n"], float(w["x"]), w["b"])
