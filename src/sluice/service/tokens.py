"""Bearer tokens of the HTTP API: created for some projects (read-only or not), listed,
revoked, and turned back into the caller's `Scope` on each request.

A token reads `sluice_<id>_<secret>`: the id finds the row, the secret (32 random bytes) is
checked against its stored sha256 in constant time. The secret is shown once, at creation;
the store keeps only its hash, so a leaked database gives no usable token.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Collection
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from sluice.errors import InvalidArgumentError, NotFoundError, PermissionDeniedError
from sluice.service.models import View, utc
from sluice.spec.names import check_entity_name, check_scope_name
from sluice.store.tokens import TokenRecord, TokenRepository

if TYPE_CHECKING:
    from sluice.runtime import Runtime
    from sluice.service.requests import Scope

PREFIX = "sluice"
_ID_BYTES, _SECRET_BYTES = 8, 32


class ApiToken(View):
    id: str
    name: str
    projects: list[str]
    read_only: bool
    created_at: datetime
    revoked_at: datetime | None = None


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str
    """The whole bearer token: shown once, never stored."""


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _view(record: TokenRecord) -> ApiToken:
    return ApiToken(
        id=record.id,
        name=record.name,
        projects=list(record.projects),
        read_only=record.read_only,
        created_at=utc(record.created_at),
        revoked_at=utc(record.revoked_at),
    )


def _split(token: str) -> tuple[str, str] | None:
    prefix, _, rest = token.partition("_")
    token_id, _, secret = rest.partition("_")
    if prefix != PREFIX or not token_id or not secret:
        return None
    return token_id, secret


class Tokens:
    """Token administration (an unscoped caller's: the CLI's) and authentication."""

    def __init__(self, runtime: Runtime, scope: Scope) -> None:
        self.runtime = runtime
        self.scope = scope

    async def create(
        self, projects: Collection[str], *, read_only: bool = False, name: str = ""
    ) -> IssuedToken:
        self._admin()
        if not projects:
            raise InvalidArgumentError("a token needs at least one project (--project P)")
        listed = sorted({check_scope_name("project", p) for p in projects})
        if name:
            check_entity_name("token name", name)
        token_id, secret = secrets.token_hex(_ID_BYTES), secrets.token_urlsafe(_SECRET_BYTES)
        record = TokenRecord(
            token_id, name, _digest(secret), listed, read_only, self.runtime.clock.now()
        )
        async with self.runtime.store.write() as repos:
            await TokenRepository(repos.conn).insert(record)
        return IssuedToken(_view(record), f"{PREFIX}_{token_id}_{secret}")

    async def list(self) -> list[ApiToken]:
        self._admin()
        async with self.runtime.store.read() as repos:
            return [_view(r) for r in await TokenRepository(repos.conn).list()]

    async def revoke(self, token_id: str) -> ApiToken:
        """Revoke at once: the next request with it is refused. NotFoundError if there is no
        live token by that id."""
        self._admin()
        async with self.runtime.store.write() as repos:
            tokens = TokenRepository(repos.conn)
            if not await tokens.revoke(token_id, self.runtime.clock.now()):
                raise NotFoundError(f"token {token_id!r} does not exist or is already revoked")
            record = await tokens.get(token_id)
        assert record is not None
        return _view(record)

    async def authenticate(self, token: str) -> Scope | None:
        """The scope a live token grants, or None for anything else (unknown, revoked,
        malformed): callers answer all of them the same, so none can be told apart."""
        from sluice.service.requests import Scope

        parts = _split(token)
        if parts is None:
            return None
        async with self.runtime.store.read() as repos:
            record = await TokenRepository(repos.conn).get(parts[0])
        if record is None or record.revoked_at is not None:
            return None
        if not hmac.compare_digest(_digest(parts[1]), record.secret_hash):
            return None
        who = f"token {record.name} ({record.id})" if record.name else f"token {record.id}"
        return Scope(projects=frozenset(record.projects), read_only=record.read_only, who=who)

    def _admin(self) -> None:
        if self.scope.projects is not None or self.scope.read_only:
            raise PermissionDeniedError("only an unscoped caller may manage API tokens")
