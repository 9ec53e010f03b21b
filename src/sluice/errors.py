"""Every error sluice raises on purpose, under one root.

Hierarchy::

    SluiceError
    ├── ConfigError                 a config key has a bad value (names the key)
    ├── InvalidArgumentError        a bad value passed to an API (also a ValueError)
    │   ├── DefinitionError         a task, workflow or launch plan cannot be defined
    │   ├── InputError              workflow inputs do not match the interface
    │   │   └── ClaimNeverFitsError a launch claims more than a quota or lock can ever grant
    │   │       └── ClaimExceedsQuotaError  the resource manager's (also an InvalidQuotaError)
    │   ├── InvalidQuotaError       quota, constraint or units out of range
    │   ├── InvalidRateLimitError   a rate limit, its burst, units or key template is malformed
    │   │   └── RateLimitNeverFitsError  a claim takes more units at once than a burst allows
    │   └── InvalidPolicyError      a concurrency policy or schedule is malformed
    ├── PermissionDeniedError       the caller's scope (an API token's) does not allow a write
    ├── ConflictError               an idempotency key already names another request
    ├── AlreadyExistsError          a name given to something new is taken (a Flyte execution's)
    ├── NotFoundError               an unknown execution, workflow, launch plan, namespace...
    │   ├── UnknownNamespaceError   a resource namespace with no quota
    │   ├── UnknownRateLimitError   a rate limit name with no limit set anywhere
    │   └── PluginNotFoundError     no plugin for a task type (names the registered ones)
    ├── StoreError                  the state store failed
    │   ├── StoreUnavailableError   cannot connect to the database, or its file fails I/O
    │   │   └── StoreGoneError      the database does not exist (dropped, file removed/replaced)
    │   └── NotADatabaseError       the file is not a SQLite database
    ├── BackendUnavailableError     a resource or cache backend cannot be reached
    ├── MissingDependencyError      an optional driver is not installed (gives the pip hint)
    ├── PluginError                 a plugin failed to load or broke its contract
    │   ├── InvalidPluginConfigError
    │   └── PluginUnavailableError  a task's plugin lacks its optional driver (exit 2, not 4)
    └── OutputsError                task outputs are not JSON-typed

Expected outcomes (a quota exhausted, a reservation held by someone else, a compare-and-swap
that lost) are return values, never exceptions.
"""

from __future__ import annotations


class SluiceError(Exception):
    """Root of every error sluice raises on purpose."""


class ConfigError(SluiceError):
    """A configuration key has a bad value; the message names the key and what was expected."""


class InvalidArgumentError(SluiceError, ValueError):
    """A value passed to sluice is out of range or malformed; the message names the value."""


class DefinitionError(InvalidArgumentError):
    """A task, workflow or launch plan definition is invalid."""


class InputError(InvalidArgumentError):
    """Inputs given to a workflow or task do not match its interface."""


class ClaimNeverFitsError(InputError):
    """A launch claims more units than a quota or a lock's capacity: it could never run."""


class InvalidQuotaError(InvalidArgumentError):
    """A quota, a constraint or a claim's units are out of the accepted range."""


class InvalidRateLimitError(InvalidArgumentError):
    """A rate limit ("100/min"), its burst, a claim's units or its key template is malformed."""


class RateLimitNeverFitsError(InvalidRateLimitError):
    """A claim takes more units at once than its rate limit's burst: it could never be
    admitted; nothing was written."""


class InvalidPolicyError(InvalidArgumentError):
    """A concurrency policy or a schedule is malformed."""


class ClaimExceedsQuotaError(ClaimNeverFitsError, InvalidQuotaError):
    """A claim needs more units than its namespace's quota (or a lock's capacity) allows, so
    it could never be granted; nothing was written."""

    def __init__(self, namespace: str, units: int, quota: int) -> None:
        super().__init__(
            f"claim of {units} unit(s) on {namespace!r} exceeds its quota of {quota}: "
            "it could never be granted"
        )
        self.namespace, self.units, self.quota = namespace, units, quota

    def __reduce__(self) -> tuple[type[ClaimExceedsQuotaError], tuple[str, int, int]]:
        return (type(self), (self.namespace, self.units, self.quota))


class PermissionDeniedError(SluiceError):
    """The caller may not do this: its token is read-only, or the change is not its project's."""


class ConflictError(SluiceError):
    """The request conflicts with what exists: its idempotency key was used, within the
    retention window, for a different request (the message names the key)."""


class AlreadyExistsError(SluiceError):
    """A caller named something new (a Flyte execution) with a name that is taken."""


class NotFoundError(SluiceError, LookupError):
    """Something named does not exist."""


class UnknownNamespaceError(NotFoundError):
    """A resource namespace has no quota registered or configured."""


class UnknownRateLimitError(NotFoundError):
    """A rate limit name has no limit set by an operator, the config or a plugin."""


class PluginNotFoundError(NotFoundError):
    """No plugin handles a task type."""


class StoreError(SluiceError):
    """The state store failed."""


class StoreUnavailableError(StoreError):
    """The database cannot be reached."""


class StoreGoneError(StoreUnavailableError):
    """The database itself is gone: dropped, or its file removed or replaced under us."""


class NotADatabaseError(StoreError):
    """A file given as a SQLite database is not one."""


class BackendUnavailableError(SluiceError):
    """A resource or cache backend cannot be reached."""


class MissingDependencyError(SluiceError, ImportError):
    """An optional driver is not installed."""


class PluginError(SluiceError):
    """A plugin failed to load or broke its contract."""


class InvalidPluginConfigError(PluginError, InvalidArgumentError):
    """A plugin's configuration is out of range; the message names the field."""


class PluginUnavailableError(PluginError):
    """A launch names a task whose plugin cannot run here: its optional driver is missing.

    Not a MissingDependencyError: the launch is refused as bad input (nothing is written),
    the message names the task, the plugin and the install hint."""


class OutputsError(SluiceError):
    """A task produced outputs that are not JSON-typed or do not match its interface."""
