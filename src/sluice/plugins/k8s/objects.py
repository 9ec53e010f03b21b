"""Kubernetes objects as plain JSON dicts (manifests), how sluice names them, and the few
value types the KubeClient seam speaks in."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sluice.ids import fit_name

Manifest = dict[str, Any]
"""A Kubernetes object as JSON: apiVersion, kind, metadata, spec, status."""

MAX_LABEL_VALUE_LENGTH = 63
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class KindRef:
    """A kind of object: `apiVersion` ("v1", "ray.io/v1") and `kind` ("Pod")."""

    api_version: str
    kind: str


@dataclass(frozen=True)
class ObjectRef:
    """One object: its kind, namespace and name. Hashable, so it keys caches and callbacks."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @property
    def kind_ref(self) -> KindRef:
        return KindRef(self.api_version, self.kind)

    @classmethod
    def of(cls, manifest: Mapping[str, Any]) -> ObjectRef:
        meta = manifest.get("metadata") or {}
        return cls(
            str(manifest.get("apiVersion", "")),
            str(manifest.get("kind", "")),
            str(meta.get("namespace", "")),
            str(meta.get("name", "")),
        )

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True)
class WatchEvent:
    type: Literal["ADDED", "MODIFIED", "DELETED"]
    object: Manifest


@dataclass(frozen=True)
class ObjectList:
    """A list of objects, and the resourceVersion to start watching from after it."""

    items: list[Manifest]
    resource_version: str


def meta(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The object's metadata (an empty dict when it has none)."""
    value = manifest.get("metadata")
    return value if isinstance(value, dict) else {}


def is_being_deleted(manifest: Mapping[str, Any]) -> bool:
    return bool(meta(manifest).get("deletionTimestamp"))


def dns1123_name(name: str, max_length: int) -> str:
    """`name` made a valid DNS-1123 label of at most `max_length` characters: lower case,
    [a-z0-9-] only, alphanumeric at both ends; a name that is too long keeps a readable prefix
    and ends with a hash of the whole name (so it stays unique)."""
    cleaned = re.sub(r"[^a-z0-9-]", "-", name.lower()).strip("-") or "x"
    return fit_name(cleaned, 0, max_length).strip("-")


def label_value(value: str) -> str:
    """`value` made a valid label value: [A-Za-z0-9-_.], alphanumeric at both ends, at most
    63 characters (hashed to fit when longer)."""
    cleaned = re.sub(r"[^A-Za-z0-9_.-]", "-", value)
    cleaned = re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", cleaned)
    return fit_name(cleaned, 0, MAX_LABEL_VALUE_LENGTH)


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386 JSON merge patch: dicts merge, None deletes a key, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def parse_label_selector(selector: str) -> dict[str, str]:
    """An equality selector "a=b,c=d" as a dict; other selector forms are not supported."""
    pairs = (item.split("=", 1) for item in selector.split(",") if "=" in item)
    return {key.strip(): value.strip() for key, value in pairs}


def matches_labels(manifest: Mapping[str, Any], selector: Mapping[str, str]) -> bool:
    labels = meta(manifest).get("labels") or {}
    return all(labels.get(key) == value for key, value in selector.items())
