"""Concurrency key templates: `"{customer}"` or `"{tier}/{region}"` over an execution's inputs.

The syntax is Python's `str.format` with named fields, as for lock names; a field may reach
into an input (`{order.customer}`, `{tags[0]}`). A key is computed once, when the execution is
created, from its inputs as merged with the launch plan's defaults and fixed inputs.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

KEY_MAX_LENGTH = 255
"""The longest key a template may give (the column's width)."""


def key_fields(template: str) -> list[str]:
    """The input names a key template reads (`a` for `{a.b}`), in order.

    Raises ValueError for a malformed template, a positional field or a nested one."""
    fields: list[str] = []
    for _, field, spec, _ in string.Formatter().parse(template):
        if field is None:
            continue
        root = field.split(".", 1)[0].split("[", 1)[0]
        if not root or root.isdigit():
            raise ValueError(f"positional field {{{field}}}: name an input instead")
        if spec and "{" in spec:
            raise ValueError(f"field {{{field}}} has a nested field in its format spec")
        fields.append(root)
    return fields


def fill_key(template: str, inputs: Mapping[str, Any]) -> str:
    """The key these inputs give. Raises ValueError naming what does not fit."""
    try:
        key = template.format_map(dict(inputs))
    except (KeyError, IndexError, AttributeError, TypeError, ValueError) as exc:
        raise ValueError(f"concurrency key {template!r} cannot be filled: {exc!r}") from None
    if len(key) > KEY_MAX_LENGTH:
        raise ValueError(
            f"concurrency key {template!r} gives a key of {len(key)} characters "
            f"(at most {KEY_MAX_LENGTH}): {key[:40]!r}..."
        )
    if not key.isprintable():
        raise ValueError(f"concurrency key {template!r} gives {key!r}, with control characters")
    return key
