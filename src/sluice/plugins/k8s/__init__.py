"""Kubernetes plugin machinery: the K8sPlugin contract, the PluginManager that drives it, the
KubeClient seam with its errors, a watch cache, and pod-spec and pod-phase helpers.

Nothing here imports kubernetes_asyncio: `kube_asyncio` does, lazily, when a client is made.
"""

from sluice.plugins.k8s.cache import RefreshRegistry, WatchCache
from sluice.plugins.k8s.client import KubeClient, LazyKubeClient
from sluice.plugins.k8s.config import FinalizerBackoff, KubePluginConfig, OwnerReference
from sluice.plugins.k8s.errors import (
    KubeAlreadyExistsError,
    KubeApiError,
    KubeConflictError,
    KubeEntityTooLargeError,
    KubeForbiddenError,
    KubeGoneError,
    KubeInvalidError,
    KubeNotFoundError,
    KubeQuotaExceededError,
    translate_status,
)
from sluice.plugins.k8s.loader import k8s_plugin_entry, kube_client_for
from sluice.plugins.k8s.manager import PluginManager, create_failure
from sluice.plugins.k8s.metadata import FINALIZER, MANAGED_SELECTOR, ObjectMetadataPolicy
from sluice.plugins.k8s.objects import KindRef, Manifest, ObjectList, ObjectRef, WatchEvent
from sluice.plugins.k8s.plugin import (
    AbortBehavior,
    AbortOverride,
    K8sPlugin,
    K8sPluginProperties,
)
from sluice.plugins.k8s.pod_phase import pod_phase_info
from sluice.plugins.k8s.podspec import ContainerTask, PodSettings, build_pod_spec

__all__ = [
    "FINALIZER",
    "MANAGED_SELECTOR",
    "AbortBehavior",
    "AbortOverride",
    "ContainerTask",
    "FinalizerBackoff",
    "K8sPlugin",
    "K8sPluginProperties",
    "KindRef",
    "KubeAlreadyExistsError",
    "KubeApiError",
    "KubeClient",
    "KubeConflictError",
    "KubeEntityTooLargeError",
    "KubeForbiddenError",
    "KubeGoneError",
    "KubeInvalidError",
    "KubeNotFoundError",
    "KubePluginConfig",
    "KubeQuotaExceededError",
    "LazyKubeClient",
    "Manifest",
    "ObjectList",
    "ObjectMetadataPolicy",
    "ObjectRef",
    "OwnerReference",
    "PluginManager",
    "PodSettings",
    "RefreshRegistry",
    "WatchCache",
    "WatchEvent",
    "build_pod_spec",
    "create_failure",
    "k8s_plugin_entry",
    "kube_client_for",
    "pod_phase_info",
    "translate_status",
]
