"""The Ray tests' flows; the session's Ray cluster (`ray_cluster`, `ray_address`) is in
tests/support/clusters.py, shared with the Flyte tests."""

from __future__ import annotations

from pathlib import Path

from support.clusters import require_ray

RAY_FLOWS = Path(__file__).parent / "ray_flows.py"

__all__ = ["RAY_FLOWS", "require_ray"]
