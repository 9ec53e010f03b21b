"""Big values kept out of views: an execution's inputs over the configured size are refused at
launch, and inputs and outputs are cut for pages and API views (each whole value stays one
request away: `Sluice.value`). A 1 MB string input once made an 18 MB API answer and a page
that froze the browser for seconds: every node repeated it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sluice.errors import InputError
from sluice.service import models as m

ITEMS_SHOWN = 100
"""Items of a list (or keys of an object) kept in a view; a marker says how many were cut."""
DEPTH_SHOWN = 20
ELLIPSIS = "…"


def size_of(value: Any) -> int:
    """Bytes of `value` as compact JSON (what the store keeps)."""
    return len(json.dumps(value, separators=(",", ":"), default=str).encode())


def check_inputs_size(values: Mapping[str, Any], limit: int) -> None:
    """InputError (422) naming the size, the limit and the biggest input when the inputs are
    bigger than `limit` bytes as JSON."""
    size = size_of(dict(values))
    if size <= limit:
        return
    biggest = max(values, key=lambda name: size_of(values[name]))
    raise InputError(
        f"the inputs are {size:,} bytes as JSON ({biggest!r} alone {size_of(values[biggest]):,}); "
        f"this server takes at most {limit:,} (payloads.max_inputs_bytes): pass a reference "
        "(a file path or a URL) to big data instead"
    )


def clip(value: Any, chars: int) -> tuple[Any, bool]:
    """`value` with long strings cut to `chars` characters and long lists and objects to
    ITEMS_SHOWN items (a last item says how many were cut); whether anything was cut."""
    cut = [False]
    shown = _clip(value, chars, cut, 0)
    return shown, cut[0]


def _clip(value: Any, chars: int, cut: list[bool], depth: int) -> Any:
    if isinstance(value, str):
        if len(value) <= chars:
            return value
        cut[0] = True
        return f"{value[:chars]}{ELLIPSIS} ({len(value):,} characters)"
    if depth >= DEPTH_SHOWN and isinstance(value, list | dict):
        cut[0] = True
        return f"{ELLIPSIS} (nested deeper than {DEPTH_SHOWN})"
    if isinstance(value, list):
        kept = [_clip(v, chars, cut, depth + 1) for v in value[:ITEMS_SHOWN]]
        if len(value) > ITEMS_SHOWN:
            cut[0] = True
            kept.append(f"{ELLIPSIS} {len(value) - ITEMS_SHOWN:,} more items")
        return kept
    if isinstance(value, dict):
        keys = list(value)[:ITEMS_SHOWN]
        kept_map = {k: _clip(value[k], chars, cut, depth + 1) for k in keys}
        if len(value) > ITEMS_SHOWN:
            cut[0] = True
            kept_map[ELLIPSIS] = f"{len(value) - ITEMS_SHOWN:,} more keys"
        return kept_map
    return value


SIDES = ("inputs", "outputs")
ERROR_CHARS_FACTOR = 10
"""An error's message (a traceback) may be this many times longer than a value's string."""


def clipped(execution: m.Execution, chars: int) -> m.Execution:
    """The execution view with its own and its nodes' inputs and outputs (and errors) cut;
    `truncated` of each names what was."""
    fields, names = _clipped_fields(execution, chars)
    nodes = []
    for node in execution.nodes:
        node_fields, node_names = _clipped_fields(node, chars)
        nodes.append(
            node.model_copy(update={**node_fields, "truncated": node_names}) if node_names else node
        )
    return execution.model_copy(update={**fields, "truncated": names, "nodes": nodes})


def _clipped_fields(
    view: m.NodeExecution | m.Execution, chars: int
) -> tuple[dict[str, Any], list[str]]:
    fields: dict[str, Any] = {}
    names: list[str] = []
    for side in (*SIDES, "error"):
        value = getattr(view, side)
        if value is None:
            continue
        shown, cut = clip(value, chars * ERROR_CHARS_FACTOR if side == "error" else chars)
        if cut:
            fields[side], names = shown, [*names, side]
    return fields, names
