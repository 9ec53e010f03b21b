"""Serving the app with uvicorn inside a running event loop, next to the engine and the
controller of `sluice serve` and `sluice ui`: the caller owns the loop and the signals."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import uvicorn

from sluice.errors import InvalidArgumentError
from sluice.http.app import create_app
from sluice.http.auth import authorization, is_loopback
from sluice.service import Sluice

DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8080
SHUTDOWN_GRACE = 3
"""Seconds a stopping server waits for requests in flight before cancelling them: a client
following a log of a running execution would otherwise hold `sluice serve` up forever."""


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the command that runs it handles SIGINT/SIGTERM
    for everything it runs, and stops the server through `should_exit`."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.listening = asyncio.Event()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        self.listening.set()


@dataclass(frozen=True)
class Listening:
    url: str
    """The base URL, e.g. http://127.0.0.1:8080 (the port the OS chose when asked for 0)."""
    needs_token: bool
    taken: int | None = None
    """The port asked for, when it was taken and the server fell forward to another."""


FALL_FORWARD = 20
"""Ports after the default one tried when it is taken (a second `sluice serve` on a host)."""


def listen(host: str, port: int, *, fall_forward: int = 0) -> socket.socket:
    """Bind `port`, or with `fall_forward` the first free one of the next ports: two servers
    on one host with the default port both start (the second says where it listens)."""
    last = min(port + fall_forward, 65535)
    for candidate in range(port, last):
        try:
            return _listen(host, candidate)
        except PortTakenError:
            continue
    return _listen(host, last)


class PortTakenError(InvalidArgumentError):
    """The port is in use (by another server)."""


def _listen(host: str, port: int) -> socket.socket:
    """Bind now, so a taken port or a bad host is one clear error before anything runs."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
    except (OSError, IndexError) as exc:
        raise InvalidArgumentError(f"cannot listen on {host}:{port}: {exc}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortTakenError(
                f"cannot listen on {host}:{port}: the port is in use (another sluice serve?); "
                "choose another with --port, or leave --port out to take the next free one"
            ) from None
        raise InvalidArgumentError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def _url(host: str, sock: socket.socket) -> str:
    port = sock.getsockname()[1]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


@contextlib.asynccontextmanager
async def http_server(
    sluice: Sluice, host: str, port: int, *, fall_forward: int = 0
) -> AsyncIterator[Listening]:
    """Serve the API (and UI) of `sluice` on host:port (or, with `fall_forward`, the next
    free port) for the block. Listening on anything but loopback, every request needs a token
    (see auth.py)."""
    sock = listen(host, port, fall_forward=fall_forward)
    app = create_app(sluice, authorize=authorization(sluice, bind_host=host))
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=SHUTDOWN_GRACE,
    )
    server = _Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        started = asyncio.ensure_future(server.listening.wait())
        await asyncio.wait([started, serving], return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if serving.done():
            serving.result()  # its error, if it failed to start
        bound = sock.getsockname()[1]
        taken = port if port and bound != port else None
        yield Listening(_url(host, sock), needs_token=not is_loopback(host), taken=taken)
    finally:
        server.should_exit = True
        await serving
        sock.close()
