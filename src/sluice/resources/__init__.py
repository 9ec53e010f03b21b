"""Token quotas on the external systems tasks call (DESIGN.md section 5).

`QuotaManager` is the policy; `backends.from_url` picks where tokens are kept (memory,
SQLite, PostgreSQL, Redis). Plugins see only `ResourceRegistrar` and `ResourceManager`.
"""

from __future__ import annotations

from sluice.resources.backends import from_url
from sluice.resources.backends.base import ResourceBackend
from sluice.resources.manager import QuotaManager
from sluice.resources.models import (
    AllocationResult,
    AllocationStatus,
    Claim,
    Holder,
    HolderInfo,
    NamespaceSnapshot,
    NoopResourceManager,
    ResourceConstraintsSpec,
    ResourceManager,
    ResourceNamespace,
    ResourceRegistrar,
    WaiterInfo,
)
from sluice.resources.proxy import TaskResourceManager, compose_token, with_epoch

__all__ = [
    "AllocationResult",
    "AllocationStatus",
    "Claim",
    "Holder",
    "HolderInfo",
    "NamespaceSnapshot",
    "NoopResourceManager",
    "QuotaManager",
    "ResourceBackend",
    "ResourceConstraintsSpec",
    "ResourceManager",
    "ResourceNamespace",
    "ResourceRegistrar",
    "TaskResourceManager",
    "WaiterInfo",
    "compose_token",
    "from_url",
    "with_epoch",
]
