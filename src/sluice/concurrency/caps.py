"""Platform caps: the most active executions a project, or a project/domain, may have.

Caps come from config (`concurrency.max_per_project`, `concurrency.max_per_domain` keyed
"project/domain") and from operators at run time (`sluice concurrency caps set`); both are
stored, so every process sees them, and an operator value wins over the config one. The live
controller writes the config values when it takes the lead.
"""

from __future__ import annotations

from dataclasses import dataclass

from sluice.clock import Clock
from sluice.config import ConcurrencyConfig
from sluice.errors import ConfigError, InvalidArgumentError
from sluice.executions.policies import CAPS_CHANNEL
from sluice.store.notify import Notifier
from sluice.store.repositories import CapsRepository
from sluice.store.store import Store

CapKey = tuple[str, str]  # (project, domain); domain "" for a whole-project cap


@dataclass(frozen=True)
class CapRow:
    project: str
    domain: str
    config_max: int | None
    operator_max: int | None

    @property
    def effective(self) -> int | None:
        return self.operator_max if self.operator_max is not None else self.config_max

    @property
    def scope(self) -> str:
        return f"{self.project}/{self.domain}" if self.domain else self.project


def config_caps(config: ConcurrencyConfig) -> dict[CapKey, int]:
    """The caps the config asks for; a malformed key or value is a ConfigError naming it."""
    caps: dict[CapKey, int] = {}
    for project, value in config.max_per_project.items():
        caps[(project, "")] = _checked(f"concurrency.max_per_project[{project!r}]", value)
    for key, value in config.max_per_domain.items():
        project, sep, domain = key.partition("/")
        if not (sep and project and domain):
            raise ConfigError(f"concurrency.max_per_domain key {key!r} is not 'project/domain'")
        caps[(project, domain)] = _checked(f"concurrency.max_per_domain[{key!r}]", value)
    return caps


def _checked(where: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be an int >= 1, got {value!r}")
    return value


class CapsService:
    def __init__(self, store: Store, notifier: Notifier | None, clock: Clock) -> None:
        self.store, self.notifier, self.clock = store, notifier, clock

    async def set(self, project: str, domain: str, value: int) -> None:
        """Set the operator cap of `project` (domain "") or `project/domain`."""
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidArgumentError(f"a concurrency cap must be an int >= 1, got {value!r}")
        if not project:
            raise InvalidArgumentError(f"a concurrency cap needs a project, got {project!r}")
        await self._write({(project, domain): value}, "operator_max")

    async def unset(self, project: str, domain: str) -> None:
        """Remove the operator cap; a config cap of the same scope applies again."""
        await self._write({(project, domain): None}, "operator_max")

    async def sync_config(self, config: ConcurrencyConfig) -> None:
        """Store the config caps, clearing config caps no longer in the config."""
        wanted: dict[CapKey, int | None] = dict(config_caps(config))
        current = {(r.project, r.domain): r.config_max for r in await self.list()}
        for key, value in current.items():
            if value is not None and key not in wanted:
                wanted[key] = None
        changed = {k: v for k, v in wanted.items() if current.get(k) != v}
        if changed:
            await self._write(changed, "config_max")

    async def list(self) -> list[CapRow]:
        async with self.store.read() as repos:
            rows = await CapsRepository(repos.conn).rows()
        return [CapRow(r["project"], r["domain"], r["config_max"], r["operator_max"]) for r in rows]

    async def _write(self, values: dict[CapKey, int | None], column: str) -> None:
        now = self.clock.now()
        async with self.store.write() as repos:
            caps = CapsRepository(repos.conn)
            for (project, domain), value in values.items():
                await caps.set_value(column, project, domain, value, now)
            if self.notifier is not None:
                await self.notifier.publish(repos.conn, CAPS_CHANNEL, column)
