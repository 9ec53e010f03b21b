"""The metadata sluice puts on every object it creates: name, namespace, labels, annotations,
finalizer and owner reference."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.k8s.config import KubePluginConfig
from sluice.plugins.k8s.objects import Manifest, dns1123_name, label_value
from sluice.plugins.k8s.plugin import K8sPluginProperties

FINALIZER = "sluice.dev/finalizer-k8s"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
MANAGED_BY = "sluice"
MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
EXECUTION_ID_LABEL = "sluice.dev/execution-id"
PROJECT_LABEL = "sluice.dev/project"
DOMAIN_LABEL = "sluice.dev/domain"
NODE_ID_LABEL = "sluice.dev/node-id"
TASK_NAME_LABEL = "sluice.dev/task-name"
ATTEMPT_LABEL = "sluice.dev/attempt"


@dataclass(frozen=True)
class ObjectMetadataPolicy:
    """Which metadata to add, from the operator's config and the plugin's properties."""

    config: KubePluginConfig
    properties: K8sPluginProperties

    @property
    def inject_finalizer(self) -> bool:
        return self.config.inject_finalizer and not self.properties.disable_inject_finalizer

    @property
    def inject_owner_reference(self) -> bool:
        return (
            self.config.owner_reference is not None
            and not self.properties.disable_inject_owner_references
        )

    def object_name(self, metadata: TaskExecutionMetadata) -> str:
        """The attempt's object name: stable, DNS-1123, at most generated_name_max_length."""
        limit = self.properties.generated_name_max_length
        return dns1123_name(metadata.generated_name(0, limit), limit)

    def namespace(self, metadata: TaskExecutionMetadata) -> str:
        return self.config.namespace_for(metadata.project, metadata.domain)

    def apply(self, manifest: Manifest, metadata: TaskExecutionMetadata) -> Manifest:
        """A copy of `manifest` with sluice's metadata. Labels, lowest precedence first: the
        config's defaults, the execution's, the plugin's own, then sluice's identity labels
        (which always win, the watch selects on them)."""
        result = copy.deepcopy(manifest)
        meta = result.setdefault("metadata", {})
        meta.pop("generateName", None)
        meta["name"] = self.object_name(metadata)
        meta["namespace"] = self.namespace(metadata)
        meta["labels"] = self._labels(meta.get("labels") or {}, metadata)
        meta["annotations"] = {
            **self.config.default_annotations,
            **metadata.annotations,
            **(meta.get("annotations") or {}),
        }
        self._add_finalizer(meta)
        self._add_owner_reference(meta)
        return result

    def _labels(self, own: Mapping[str, str], metadata: TaskExecutionMetadata) -> dict[str, str]:
        execution = {key: label_value(str(value)) for key, value in metadata.labels.items()}
        return {**self.config.default_labels, **execution, **own, **identity_labels(metadata)}

    def _add_finalizer(self, meta: dict[str, Any]) -> None:
        finalizers = list(meta.get("finalizers") or [])
        if self.inject_finalizer and FINALIZER not in finalizers:
            meta["finalizers"] = [*finalizers, FINALIZER]

    def _add_owner_reference(self, meta: dict[str, Any]) -> None:
        owner = self.config.owner_reference
        if owner is None or not self.inject_owner_reference:
            return
        references = list(meta.get("ownerReferences") or [])
        meta["ownerReferences"] = [*references, owner.to_manifest()]


def identity_labels(metadata: TaskExecutionMetadata) -> dict[str, str]:
    """Who the object belongs to, as valid label values."""
    return {
        MANAGED_BY_LABEL: MANAGED_BY,
        EXECUTION_ID_LABEL: label_value(metadata.execution_id),
        PROJECT_LABEL: label_value(metadata.project),
        DOMAIN_LABEL: label_value(metadata.domain),
        NODE_ID_LABEL: label_value(metadata.node_id),
        TASK_NAME_LABEL: label_value(metadata.task_name),
        ATTEMPT_LABEL: str(metadata.attempt),
    }
