"""Helpers for REST plugins: `{name}` templates filled from task inputs, dotted field paths
into JSON responses, and the HTTP Retry-After header.

Template syntax: `{name}` is replaced by the value called `name`; `{{` and `}}` are literal
braces. A JSON body template keeps the value's type when a string is exactly one placeholder
(`"{count}"` becomes the integer input `count`). Headers may also use `{secret:NAME}`.
"""

from __future__ import annotations

import email.utils
import json
import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from sluice.errors import InvalidArgumentError

_PLACEHOLDER = re.compile(r"\{\{|\}\}|\{([^{}]*)\}")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|secret:[A-Za-z0-9_.\-/]+")


class TemplateError(InvalidArgumentError):
    """A template names a value that does not exist, or is malformed."""


def placeholders(template: str) -> set[str]:
    """The names a template uses; raises TemplateError on a malformed placeholder."""
    names = set()
    for match in _PLACEHOLDER.finditer(template):
        name = match.group(1)
        if name is None:
            continue
        if not _NAME.fullmatch(name):
            raise TemplateError(f"bad placeholder {{{name}}} in {template!r}")
        names.add(name)
    return names


def json_placeholders(value: Any) -> set[str]:
    """Every placeholder used in the strings of a JSON template."""
    if isinstance(value, str):
        return placeholders(value)
    if isinstance(value, Mapping):
        return set().union(*(json_placeholders(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(json_placeholders(v) for v in value))
    return set()


def render(template: str, lookup: Callable[[str], Any], *, url: bool = False) -> str:
    """Fill `template`; with `url`, each value is percent-encoded to fit in a URL path."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            return match.group(0)[0]
        text = _text(lookup(name))
        return quote(text, safe="") if url else text

    return _PLACEHOLDER.sub(replace, template)


def render_json(value: Any, lookup: Callable[[str], Any]) -> Any:
    """Fill every string of a JSON template; a lone placeholder keeps the value's JSON type."""
    if isinstance(value, str):
        lone = _PLACEHOLDER.fullmatch(value)
        if lone and lone.group(1):
            return lookup(lone.group(1))
        return render(value, lookup)
    if isinstance(value, Mapping):
        return {key: render_json(item, lookup) for key, item in value.items()}
    if isinstance(value, list):
        return [render_json(item, lookup) for item in value]
    return value


def lookup_in(values: Mapping[str, Any], what: str) -> Callable[[str], Any]:
    """A lookup over `values` whose error says which name is missing and what exists."""

    def lookup(name: str) -> Any:
        if name not in values:
            raise TemplateError(f"{what} has no value {name!r}; known: {sorted(values)}")
        return values[name]

    return lookup


def read_field(data: Any, path: str) -> Any:
    """`data["a"]["b"][0]` for the path "a.b.0"; KeyError naming the path when absent."""
    current = data
    for part in path.split("."):
        if isinstance(current, Mapping) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise KeyError(path)
    return current


def retry_after(header: str | None, now: float) -> float | None:
    """Seconds to wait from a Retry-After header (seconds or an HTTP date); None if absent."""
    if not header:
        return None
    text = header.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        return max(0.0, email.utils.parsedate_to_datetime(text).timestamp() - now)
    except (TypeError, ValueError):
        return None


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)
