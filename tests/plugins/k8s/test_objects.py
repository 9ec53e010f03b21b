"""Names, label values, merge patches and the metadata sluice puts on its objects."""

from __future__ import annotations

import re

import pytest

from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.k8s import FINALIZER, K8sPluginProperties, KubePluginConfig
from sluice.plugins.k8s.metadata import ObjectMetadataPolicy, identity_labels
from sluice.plugins.k8s.objects import dns1123_name, label_value, merge_patch

DNS = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")


@pytest.mark.parametrize(
    "name", ["Exec_1-Node.2", "--x--", "ÜBER", "a" * 200, "-", "UPPER-" * 30 + "tail"]
)
@pytest.mark.parametrize("limit", [8, 20, 50, 63])
def test_dns1123_names_are_valid_and_fit(name, limit):
    fitted = dns1123_name(name, limit)
    assert DNS.fullmatch(fitted), fitted
    assert len(fitted) <= limit


def test_long_names_stay_distinct_and_stable():
    a, b = "x" * 80 + "-attempt-1", "x" * 80 + "-attempt-2"
    assert dns1123_name(a, 50) != dns1123_name(b, 50)
    assert dns1123_name(a, 50) == dns1123_name(a, 50)
    assert dns1123_name("short-name", 50) == "short-name"


@pytest.mark.parametrize("value", ["team a/b", "_x_", "ok.value-1", "v" * 100, "ünï"])
def test_label_values_are_valid(value):
    fitted = label_value(value)
    assert LABEL.fullmatch(fitted), fitted
    assert len(fitted) <= 63


def test_merge_patch_merges_dicts_replaces_lists_and_deletes_nulls():
    target = {"metadata": {"labels": {"a": "1", "b": "2"}, "finalizers": ["x", "y"]}}
    patch = {"metadata": {"labels": {"a": None, "c": "3"}, "finalizers": ["y"]}}
    assert merge_patch(target, patch) == {
        "metadata": {"labels": {"b": "2", "c": "3"}, "finalizers": ["y"]}
    }
    assert target["metadata"]["finalizers"] == ["x", "y"]  # the target is not changed


def metadata(**values: object) -> TaskExecutionMetadata:
    base: dict[str, object] = {
        "execution_id": "xabc",
        "project": "p",
        "domain": "d",
        "node_id": "n0",
        "attempt": 2,
        "task_name": "my task/v2",
    }
    return TaskExecutionMetadata(**{**base, **values})  # type: ignore[arg-type]


def test_metadata_layers_labels_and_identity_wins():
    config = KubePluginConfig(default_labels={"team": "ml", "sluice.dev/node-id": "forged"})
    policy = ObjectMetadataPolicy(config, K8sPluginProperties())
    manifest = {"metadata": {"labels": {"app": "trainer"}, "generateName": "x-"}}

    result = policy.apply(manifest, metadata(labels={"team": "data", "run": "a b"}))

    labels = result["metadata"]["labels"]
    assert labels["team"] == "data"  # the execution's label beats the default
    assert labels["run"] == "a-b"
    assert labels["app"] == "trainer"
    assert labels["sluice.dev/node-id"] == "n0"
    assert labels == {**labels, **identity_labels(metadata())}
    assert labels["sluice.dev/task-name"] == "my-task-v2"
    assert "generateName" not in result["metadata"]
    assert result["metadata"]["finalizers"] == [FINALIZER]
    assert manifest["metadata"] == {"labels": {"app": "trainer"}, "generateName": "x-"}


def test_plugin_can_disable_finalizer_and_owner_reference():
    owner = {"api_version": "v1", "kind": "ConfigMap", "name": "o", "uid": "u"}
    config = KubePluginConfig(owner_reference=owner)
    properties = K8sPluginProperties(
        disable_inject_finalizer=True, disable_inject_owner_references=True
    )
    result = ObjectMetadataPolicy(config, properties).apply({}, metadata())
    assert "finalizers" not in result["metadata"]
    assert "ownerReferences" not in result["metadata"]


def test_finalizer_is_not_added_twice():
    policy = ObjectMetadataPolicy(KubePluginConfig(), K8sPluginProperties())
    result = policy.apply({"metadata": {"finalizers": [FINALIZER, "other"]}}, metadata())
    assert result["metadata"]["finalizers"] == [FINALIZER, "other"]
