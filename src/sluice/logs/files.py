"""The log store: segment files under one root, on any fsspec filesystem chosen by URL.

Where the filesystem can append (a local or shared directory, memory), a flush appends the new
lines to the open segment; elsewhere (object stores: s3, gcs, ...) the open segment is
rewritten whole at each flush, which the segment size bounds. Either way a flushed line is in
the store: a killed engine loses only what it had not flushed.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sluice.config import LogsConfig
from sluice.errors import InvalidArgumentError, MissingDependencyError
from sluice.store.database import parse_database_url

_APPENDABLE = {"file", "local", "memory"}


def log_store_url(config: LogsConfig, database_url: str) -> str:
    """The configured URL, or a `logs/` directory beside the SQLite database (`./.sluice/logs`
    for a server database: set logs.url to a shared store when engines run on several hosts)."""
    if config.url:
        return config.url
    path = parse_database_url(database_url).path
    directory = (path.parent if path is not None else Path(".sluice")) / "logs"
    return directory.resolve().as_uri()


class LogFiles:
    def __init__(self, fs: Any, root: str) -> None:
        self.fs = fs
        self.root = root.rstrip("/")
        protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
        self.appendable = bool(_APPENDABLE.intersection(protocols))

    @classmethod
    def from_url(cls, url: str) -> LogFiles:
        """Raises InvalidArgumentError naming the URL, or MissingDependencyError with the
        package fsspec asks for (e.g. s3fs)."""
        local = LocalFiles.root_of(url)
        if local is not None:
            return cls(LocalFiles(), local)
        import fsspec

        try:
            fs, root = fsspec.core.url_to_fs(url)
        except ImportError as exc:
            raise MissingDependencyError(f"log store {url!r}: {exc} (pip install it)") from None
        except ValueError as exc:
            raise InvalidArgumentError(f"log store URL {url!r}: {exc}") from None
        return cls(fs, root)

    def segment_path(self, execution_id: str, node_id: str, attempt: int, segment: int) -> str:
        node = quote(node_id, safe="")
        return f"{self.root}/{execution_id}/{node}/{attempt}/{segment:06d}.jsonl"

    def uri(self, path: str) -> str:
        return str(self.fs.unstrip_protocol(path))

    def _path(self, uri: str) -> str:
        return str(self.fs._strip_protocol(uri))

    def write(self, path: str, new: bytes, whole: bytes | None) -> None:
        """Append `new` to the segment, or (not appendable) replace it with `whole`."""
        if self.appendable:
            self.fs.makedirs(path.rpartition("/")[0], exist_ok=True)
            with self.fs.open(path, "ab") as handle:
                handle.write(new)
        else:
            self.fs.pipe_file(path, whole if whole is not None else new)

    def read(self, uri: str, start: int = 0) -> bytes:
        """The segment's bytes from `start`; empty if it is gone (removed or never written)."""
        try:
            data: bytes = self.fs.cat_file(self._path(uri), start=start or None)
            return data
        except FileNotFoundError:
            return b""

    def remove(self, uri: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.fs.rm_file(self._path(uri))


class LocalFiles:
    """The few calls LogFiles makes of fsspec's local filesystem, for the default store (a
    plain absolute `file:///` URL) without importing fsspec (15-30 ms of every run's start,
    with the compression modules it loads). Paths and URIs are fsspec's: `file://` + the
    absolute path; any other URL goes to fsspec itself."""

    protocol = ("file", "local")
    _PLAIN = re.compile(r"file:///[^%?#:*\\]*")

    @classmethod
    def root_of(cls, url: str) -> str | None:
        """The directory of a plain absolute `file:///` URL; None for anything else."""
        if cls._PLAIN.fullmatch(url) is None or "/../" in url or "/./" in url:
            return None
        return url[len("file://") :].rstrip("/") or "/"

    def makedirs(self, path: str, exist_ok: bool = False) -> None:
        os.makedirs(path, exist_ok=exist_ok)

    def open(self, path: str, mode: str) -> Any:
        return open(path, mode)

    def pipe_file(self, path: str, data: bytes) -> None:
        with open(path, "wb") as handle:
            handle.write(data)

    def cat_file(self, path: str, start: int | None = None) -> bytes:
        with open(path, "rb") as handle:
            if start:
                handle.seek(start)
            return handle.read()

    def rm_file(self, path: str) -> None:
        os.remove(path)

    def unstrip_protocol(self, path: str) -> str:
        return f"file://{path}"

    def _strip_protocol(self, uri: str) -> str:
        if uri.startswith("file:///"):
            return uri[len("file://") :]
        from fsspec.implementations.local import LocalFileSystem

        return str(LocalFileSystem._strip_protocol(uri))
