"""The one place that says which names sluice accepts (docs/definitions.md explains why).

- Entity names (task, workflow, launch plan): 1 to 200 ASCII letters, digits and `_ . - < >`
  (`<locals>` appears in the default name of a function defined inside another), starting
  with a letter, a digit or `_`. No `/` (URL paths), `:` (tokens and references), `@` (a task
  key is `name@version`), whitespace or control characters.
- Project and domain: 1 to 63 ASCII letters, digits, `_` and `-`, starting with a letter or a
  digit. They are parts of resource tokens (`ex:<project>:<domain>:...`) and of scopes.
- Quota namespaces: 1 to 200 ASCII letters, digits and `_ . - / :`, starting with a letter, a
  digit or `_`; `:` separates a plugin id from its namespace. `lock:` is reserved for locks.
- Lock names (computed from inputs): 1 to 255 printable characters (no NUL, newline or other
  control character).
- Rate limit names: as quota namespaces (`lock:` included: a rate limit is no lock). Rate
  limit keys (computed from inputs): 0 to 255 printable characters, "" being the one key of
  a limit without a key template.

Each check returns the name or raises the given InvalidArgumentError subclass naming it.
"""

from __future__ import annotations

import re

from sluice.errors import InvalidArgumentError

ENTITY_MAX = 200
SCOPE_MAX = 63
NAMESPACE_MAX = 200
LOCK_NAME_MAX = 255
LOCK_PREFIX = "lock:"

_ENTITY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.<>-]*")
_SCOPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
_NAMESPACE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./:-]*")

_RULES = {
    "entity": (_ENTITY, ENTITY_MAX, "ASCII letters, digits and _ . - < >"),
    "scope": (_SCOPE, SCOPE_MAX, "ASCII letters, digits, _ and -"),
    "namespace": (_NAMESPACE, NAMESPACE_MAX, "ASCII letters, digits and _ . - / :"),
}


def shown(value: object) -> str:
    """repr(value), cut short for a value of thousands of characters."""
    try:
        text = repr(value)
    except RecursionError:
        return f"a value nested too deeply to show ({type(value).__name__})"
    if len(text) <= 80:
        return text
    size = len(value) if isinstance(value, str) else len(text)
    return f"{text[:60]}... ({size} characters)"


def _check(
    rule: str, what: str, value: object, error: type[InvalidArgumentError], where: str
) -> str:
    pattern, longest, allowed = _RULES[rule]
    prefix = f"{where}: " if where else ""
    if not isinstance(value, str):
        raise error(f"{prefix}{what} must be a string, got {shown(value)}")
    if not value or len(value) > longest or not pattern.fullmatch(value):
        raise error(
            f"{prefix}{what} must be 1 to {longest} characters of {allowed} "
            f"(see docs/definitions.md), got {shown(value)}"
        )
    return value


def check_entity_name(
    what: str, value: object, error: type[InvalidArgumentError] = InvalidArgumentError
) -> str:
    """A task, workflow or launch plan name; `what` says which, e.g. "task name"."""
    return _check("entity", what, value, error, "")


def check_scope_name(
    what: str, value: object, error: type[InvalidArgumentError] = InvalidArgumentError
) -> str:
    """A project or a domain."""
    return _check("scope", what, value, error, "")


def check_namespace_name(
    value: object, error: type[InvalidArgumentError] = InvalidArgumentError, where: str = ""
) -> str:
    """A quota namespace a task claims or an operator sets."""
    name = _check("namespace", "quota namespace", value, error, where)
    if name.startswith(LOCK_PREFIX):
        prefix = f"{where}: " if where else ""
        raise error(f"{prefix}quota namespace {name!r}: the prefix {LOCK_PREFIX!r} is for locks")
    return name


def check_rate_limit_name(
    value: object, error: type[InvalidArgumentError] = InvalidArgumentError, where: str = ""
) -> str:
    """A rate limit name a task claims or an operator sets."""
    return _check("namespace", "rate limit name", value, error, where)


def rate_limit_key_problem(value: object) -> str:
    """Why a computed rate limit key is not acceptable, or "" when it is ("" is a key)."""
    if not isinstance(value, str):
        return f"a rate limit key must be a string, got {shown(value)}"
    if len(value) > LOCK_NAME_MAX:
        return f"a rate limit key must be at most {LOCK_NAME_MAX} characters, got {shown(value)}"
    if value and not value.isprintable():
        return f"a rate limit key must not contain control characters, got {shown(value)}"
    return ""


def lock_name_problem(value: object) -> str:
    """Why a computed lock name is not acceptable, or "" when it is."""
    if not isinstance(value, str):
        return f"a lock name must be a string, got {shown(value)}"
    if not value:
        return "a lock name must not be empty"
    if len(value) > LOCK_NAME_MAX:
        return f"a lock name must be at most {LOCK_NAME_MAX} characters, got {shown(value)}"
    if not value.isprintable():
        return f"a lock name must not contain control characters, got {shown(value)}"
    return ""
