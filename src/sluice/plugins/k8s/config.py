"""Operator settings of a Kubernetes plugin (`plugins.config.<plugin id>`), typed and checked."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sluice.errors import InvalidPluginConfigError

ConfigT = TypeVar("ConfigT", bound=BaseModel)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)  # built on first use


class FinalizerBackoff(_Section):
    """Retries of the finalizer removal when the object changed under us (Conflict)."""

    base: float = Field(default=0.01, gt=0)
    factor: float = Field(default=2.0, ge=1)
    jitter: float = Field(default=0.1, ge=0, le=1)
    retries: int = Field(default=5, ge=0)

    def delays(self, rng: random.Random) -> Iterator[float]:
        """`retries` sleeps: base, base*factor, ... each stretched by up to `jitter`."""
        for attempt in range(self.retries):
            yield self.base * self.factor**attempt * (1 + self.jitter * rng.random())


class OwnerReference(_Section):
    """An object that owns every object the plugin creates (same namespace, or cluster-scoped),
    so deleting it garbage-collects them."""

    api_version: str
    kind: str
    name: str
    uid: str

    def to_manifest(self) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "blockOwnerDeletion": False,
            "controller": False,
        }


class KubePluginConfig(_Section):
    namespace: str = "default"
    """Namespace of the objects; may use {project} and {domain}."""
    inject_finalizer: bool = True
    delete_resource_on_finalize: bool = True
    default_labels: dict[str, str] = Field(default_factory=dict)
    default_annotations: dict[str, str] = Field(default_factory=dict)
    owner_reference: OwnerReference | None = None
    finalizer_backoff: FinalizerBackoff = Field(default_factory=FinalizerBackoff)
    watch: bool = True
    """Serve status from a watch and re-evaluate tasks when their object changes."""
    watch_retry_delay: float = Field(default=1.0, gt=0)
    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool | None = None
    """True: the pod's service account; False: kubeconfig; None: kubeconfig if one exists."""

    @field_validator("namespace")
    @classmethod
    def _namespace_template(cls, value: str) -> str:
        try:
            value.format(project="p", domain="d")
        except (KeyError, IndexError, ValueError) as exc:
            raise ValueError(f"only {{project}} and {{domain}} may be used: {exc}") from None
        return value

    def namespace_for(self, project: str, domain: str) -> str:
        return self.namespace.format(project=project, domain=domain)


def parse_config(model: type[ConfigT], plugin_id: str, values: Mapping[str, Any]) -> ConfigT:
    """`values` checked against `model`; InvalidPluginConfigError naming the first bad key."""
    try:
        return model.model_validate(dict(values))
    except ValidationError as exc:
        error = exc.errors()[0]
        key = ".".join(str(part) for part in error["loc"])
        raise InvalidPluginConfigError(
            f"plugins.config.{plugin_id}.{key}: {error['msg']}"
        ) from None
