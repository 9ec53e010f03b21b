"""The Dask tests' flows; the session's Dask cluster (`dask_address`) is in
tests/support/clusters.py, shared with the Flyte tests."""

from __future__ import annotations

from pathlib import Path

from support.clusters import require_distributed

DASK_FLOWS = Path(__file__).parent / "dask_flows.py"

__all__ = ["DASK_FLOWS", "require_distributed"]
