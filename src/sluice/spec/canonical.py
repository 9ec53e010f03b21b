"""Canonical JSON: one byte string per value, so hashes of inputs are stable."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, no NaN; equal values give equal strings."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )


def digest(*parts: Any) -> str:
    """A sha256 hex digest of the canonical JSON of `parts`."""
    return hashlib.sha256(canonical_json(list(parts)).encode()).hexdigest()
