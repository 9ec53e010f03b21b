"""A TCP proxy the test controls, between one engine (host) and a store (PostgreSQL or Redis,
which listen on 127.0.0.1 only): the engine's only way to its store, so the test can cut,
slow or reset that way without touching the server other test sessions use.

- `cut()`: a partition as TCP sees one. Nothing is forwarded any more, in either direction;
  the sockets stay open (no FIN, no RST), what was in flight waits in the proxy and in the
  kernel's buffers, new connections are accepted and hang. `heal()` lets it all flow again.
- `delay(seconds)`: each chunk is forwarded `seconds` after it was read (order kept).
- `reset()`: the store "restarts": every connection is aborted (RST) and new ones are
  refused (accepted and aborted at once) until `heal()`.

Runs its own event loop in a thread; every method is called from the test's thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import Coroutine
from typing import Any

_CHUNK = 64 * 1024


class Proxy:
    def __init__(self, listen_host: str, target: tuple[str, int], name: str = "") -> None:
        self.listen_host, self.target, self.name = listen_host, target, name
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.Server | None = None
        self._open: asyncio.Event | None = None
        self._delay = 0.0
        self._refusing = False
        self._writers: set[asyncio.StreamWriter] = set()
        self.connections = 0

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.port}"

    def start(self) -> Proxy:
        self._thread.start()
        self._call(self._start())
        return self

    async def _start(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._server = await asyncio.start_server(self._serve, self.listen_host, 0)
        self.port = self._server.sockets[0].getsockname()[1]

    def _call(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(30)

    def cut(self) -> None:
        self._call(self._set(open_=False))

    def heal(self) -> None:
        self._call(self._set(open_=True, refusing=False))

    def delay(self, seconds: float) -> None:
        self._call(self._set(delay=seconds))

    def reset(self) -> None:
        """Abort every connection and refuse new ones until heal()."""
        self._call(self._set(refusing=True, abort=True))

    async def _set(
        self,
        *,
        open_: bool | None = None,
        delay: float | None = None,
        refusing: bool | None = None,
        abort: bool = False,
    ) -> None:
        assert self._open is not None
        if delay is not None:
            self._delay = delay
        if refusing is not None:
            self._refusing = refusing
        if abort:
            for writer in list(self._writers):
                _abort(writer)
        if open_ is True:
            self._open.set()
        elif open_ is False:
            self._open.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._refusing:
            _abort(writer)
            return
        self._writers.add(writer)
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            _abort(writer)
            self._writers.discard(writer)
            return
        self._writers.add(up_writer)
        self.connections += 1
        try:
            await asyncio.gather(
                self._pump(reader, up_writer), self._pump(up_reader, writer), return_exceptions=True
            )
        finally:
            for w in (writer, up_writer):
                self._writers.discard(w)
                _abort(w)

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One direction: read while open, forward each chunk `delay` after it was read; the
        chunks read in a cut are held until it heals."""
        assert self._open is not None
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()
        sender = asyncio.ensure_future(self._send(queue, writer))
        try:
            while True:
                await self._open.wait()
                data = await reader.read(_CHUNK)
                if not data:
                    break
                await queue.put((time.monotonic(), data))
        except (ConnectionError, OSError):
            pass
        finally:
            await queue.put((0.0, b""))
            with contextlib.suppress(Exception):
                await sender
            with contextlib.suppress(Exception):
                writer.write_eof()

    async def _send(
        self, queue: asyncio.Queue[tuple[float, bytes]], writer: asyncio.StreamWriter
    ) -> None:
        assert self._open is not None
        while True:
            read_at, data = await queue.get()
            if not data:
                return
            wait = read_at + self._delay - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            await self._open.wait()
            writer.write(data)
            await writer.drain()

    def close(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for writer in list(self._writers):
                _abort(writer)
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                self._call(stop())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()


def _abort(writer: asyncio.StreamWriter) -> None:
    """Close with an RST (SO_LINGER 0), as a restarted server's host answers."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError, AttributeError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    with contextlib.suppress(Exception):
        writer.transport.abort()
