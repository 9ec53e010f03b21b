"""The log store: segment files under one root, on any fsspec filesystem chosen by URL.

Where the filesystem can append (a local or shared directory, memory), a flush appends the new
lines to the open segment; elsewhere (object stores: s3, gcs, ...) the open segment is
rewritten whole at each flush, which the segment size bounds. Either way a flushed line is in
the store: a killed engine loses only what it had not flushed.
"""

from __future__ import annotations

import contextlib
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
