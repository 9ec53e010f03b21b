"""Files Flyte clients hand to sluice: fast-registration code archives and uploaded inputs.

A client asks for an upload location (flyteadmin's DataProxyService), gets a URL signed here
(HMAC-SHA256 over the path, the expiry and the declared MD5, with a key kept in the data
directory so that a restarted server honours what it signed) and PUTs the bytes to sluice's
HTTP server, which stores them under `<data dir>/flyte/uploads/<project>/<domain>/<md5 or root>/
<file>`: that absolute path is the file's "native URL", what the client writes into the task
templates it registers (`pyflyte-fast-execute --additional-distribution <path>`) or into
literals (a FlyteFile input). A file is written under a temporary name and renamed, so a
killed upload leaves nothing under the final name.

A fast-registered task's template runs `pyflyte-fast-execute`, which would download and unpack
the archive in a pod. sluice unpacks it once into `<data dir>/flyte/code/<hash of the archive's
path>` and runs the task's own `pyflyte-execute` command from there (`runnable_template`).
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import json
import os
import re
import secrets
import shutil
import tarfile
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sluice.errors import DefinitionError, InvalidArgumentError, PermissionDeniedError

FAST_EXECUTE = "pyflyte-fast-execute"
_DISTRIBUTION_FLAG = "--additional-distribution"
_CONTEXT = "_F_SS_C"  # flytekit's serialization context, on @dynamic tasks
_KEY_FILE = "upload.key"
_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=-]{0,199}")
MAX_EXPIRY = 7 * 24 * 3600.0
DEFAULT_EXPIRY = 3600.0


@dataclass(frozen=True)
class UploadGrant:
    """Where a client may PUT one file: `path` under the uploads directory, until `expires`
    (epoch seconds), with `md5` (base64, "" if not declared) and the `signature` of the three."""

    path: str
    native_url: str
    expires: float
    md5: str
    signature: str


class FlyteFiles:
    """The uploads and code directories of one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.root = data_dir / "flyte"
        self.uploads = self.root / "uploads"
        self.code = self.root / "code"

    def grant(
        self,
        project: str,
        domain: str,
        filename: str,
        content_md5: bytes,
        filename_root: str,
        expires_in: float | None,
        now: float,
    ) -> UploadGrant:
        """A signed location for one file; InvalidArgumentError naming a bad part."""
        if not content_md5 and not filename_root:
            raise InvalidArgumentError("an upload location needs content_md5 or filename_root")
        folder = filename_root or content_md5.hex()
        parts = [project, domain, _part("filename_root", folder), _part("filename", filename)]
        path = "/".join(parts)
        seconds = DEFAULT_EXPIRY if not expires_in else min(expires_in, MAX_EXPIRY)
        expires = round(now + seconds, 3)
        md5 = base64.b64encode(content_md5).decode() if content_md5 else ""
        signature = self._sign(path, expires, md5)
        return UploadGrant(path, str(self.uploads / path), expires, md5, signature)

    async def store(
        self,
        path: str,
        expires: float,
        md5: str,
        signature: str,
        body: AsyncIterator[bytes],
        now: float,
    ) -> Path:
        """Write an upload signed by `grant`: PermissionDeniedError for a bad or expired
        signature, InvalidArgumentError when the bytes do not have the signed MD5."""
        if not hmac.compare_digest(signature, self._sign(path, expires, md5)):
            raise PermissionDeniedError(f"the signature of the upload to {path!r} is not valid")
        if now > expires:
            raise PermissionDeniedError(f"the upload location {path!r} expired")
        target = self.uploads / path
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".part-")
        digest = hashlib.md5(usedforsecurity=False)
        try:
            with os.fdopen(handle, "wb") as out:
                async for chunk in body:
                    digest.update(chunk)
                    out.write(chunk)
            got = base64.b64encode(digest.digest()).decode()
            if md5 and got != md5:
                raise InvalidArgumentError(f"upload to {path!r}: MD5 {got}, expected {md5}")
            os.replace(temporary, target)
        finally:
            if os.path.exists(temporary):  # noqa: ASYNC240 (a failed upload's remains)
                os.unlink(temporary)
        return target

    def uploaded(self, native_url: str) -> Path | None:
        """The file behind a native URL this server gave, if it is one of its uploads."""
        path = Path(native_url.removeprefix("file://"))
        try:
            path.resolve().relative_to(self.uploads.resolve())
        except ValueError:
            return None
        return path

    def code_dir(self, distribution: str) -> str:
        """Where the archive at `distribution` is (to be) unpacked: a pure function of it."""
        name = hashlib.sha256(distribution.encode()).hexdigest()[:24]
        return str(self.code / name)

    def unpack(self, distribution: str) -> str:
        """Unpack a fast-registration archive once (to a temporary directory, then renamed);
        DefinitionError naming the archive if it is not one of this server's uploads."""
        target = Path(self.code_dir(distribution))
        if target.is_dir():
            return str(target)
        archive = self.uploaded(distribution)
        if archive is None or not archive.is_file():
            raise DefinitionError(
                f"code archive {distribution!r} is not in this sluice's data store: register "
                "with pyflyte or FlyteRemote against this server (fast registration)"
            )
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".unpack-"))
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(staging, filter="data")
            try:
                staging.rename(target)
            except OSError:  # another process unpacked it first
                if not target.is_dir():
                    raise
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return str(target)

    def _sign(self, path: str, expires: float, md5: str) -> str:
        message = f"{path}\n{expires!r}\n{md5}".encode()
        return hmac.new(self._key(), message, hashlib.sha256).hexdigest()

    def _key(self) -> bytes:
        """The signing key, created once per data directory (readable by its owner only)."""
        file = self.root / _KEY_FILE
        try:
            return file.read_bytes()
        except FileNotFoundError:
            pass
        self.root.mkdir(parents=True, exist_ok=True)
        try:
            handle = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return file.read_bytes()
        with os.fdopen(handle, "wb") as out:
            out.write(secrets.token_bytes(32))
        return file.read_bytes()


def _part(what: str, value: str) -> str:
    if not _PART.fullmatch(value) or value in (".", ".."):
        raise InvalidArgumentError(
            f"{what} {value!r}: 1 to 200 ASCII letters, digits and _ . = - expected"
        )
    return value


def distribution_of(template: Any) -> str | None:
    """The code archive a fast-registered task template downloads, or None."""
    args = list(template.container.args) if template.HasField("container") else []
    if not args or args[0] != FAST_EXECUTE or _DISTRIBUTION_FLAG not in args:
        return None
    return str(args[args.index(_DISTRIBUTION_FLAG) + 1])


def runnable_template(template: Any) -> Any:
    """A fast-registered template as the task's own `pyflyte-execute` (or map) command: the
    `pyflyte-fast-execute ... --` prefix dropped and, for a @dynamic task, the fast settings
    removed from its serialization context (the tasks it compiles then run the same way)."""
    if distribution_of(template) is None:
        return template
    runnable = type(template)()
    runnable.CopyFrom(template)
    args = list(template.container.args)
    del runnable.container.args[:]
    runnable.container.args.extend(args[args.index("--") + 1 :])
    for pair in runnable.container.env:
        if pair.key == _CONTEXT:
            pair.value = _without_fast_settings(pair.value)
    return runnable


def _without_fast_settings(context: str) -> str:
    settings = json.loads(gzip.decompress(base64.b64decode(context)))
    settings["fast_serialization_settings"] = None
    packed = gzip.compress(json.dumps(settings).encode(), mtime=0)
    return base64.b64encode(packed).decode()
