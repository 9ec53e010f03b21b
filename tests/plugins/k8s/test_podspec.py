"""The pod-spec helper: GPUs, requests and limits, env, inputs, tolerations."""

from __future__ import annotations

import pytest

from sluice.errors import InvalidPluginConfigError
from sluice.plugins.core.context import TaskExecutionMetadata
from sluice.plugins.k8s import ContainerTask, PodSettings, build_pod_spec
from sluice.spec.models import TaskSpec

META = TaskExecutionMetadata(
    execution_id="xabc",
    project="p",
    domain="d",
    node_id="n0",
    attempt=1,
    task_name="train",
    environment={"MODE": "from-execution", "EXTRA": "1"},
)


def spec_of(settings: PodSettings | None = None, inputs: dict | None = None, **custom):
    task = ContainerTask.model_validate({"image": "img:1", **custom})
    return build_pod_spec(task, META, settings or PodSettings(), inputs)


def test_gpu_accelerator_maps_to_node_selector_and_resource_name():
    spec = spec_of(
        resources={"limits": {"gpu": 2}},
        accelerator={"device": "nvidia-a100", "partition_size": "1g.5gb"},
    )
    container = spec["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "2"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "2"
    assert spec["nodeSelector"] == {
        "k8s.amazonaws.com/accelerator": "nvidia-a100",
        "k8s.amazonaws.com/gpu-partition-size": "1g.5gb",
    }


def test_gpu_names_come_from_config_and_an_accelerator_alone_asks_for_one_gpu():
    settings = PodSettings(
        gpu_device_node_label="cloud.google.com/gke-accelerator",
        gpu_resource_name="amd.com/gpu",
        resource_tolerations={"amd.com/gpu": [{"key": "gpu", "operator": "Exists"}]},
    )
    spec = spec_of(settings, accelerator="mi300")
    assert spec["containers"][0]["resources"]["limits"] == {"amd.com/gpu": "1"}
    assert spec["nodeSelector"] == {"cloud.google.com/gke-accelerator": "mi300"}
    assert spec["tolerations"] == [{"key": "gpu", "operator": "Exists"}]


def test_no_gpu_no_selector_no_toleration():
    settings = PodSettings(resource_tolerations={"nvidia.com/gpu": [{"key": "gpu"}]})
    spec = spec_of(settings, resources={"requests": {"cpu": 1}})
    assert "nodeSelector" not in spec
    assert "tolerations" not in spec


def test_limits_default_to_requests_and_requests_to_limits():
    spec = spec_of(
        resources={
            "requests": {"cpu": "500m", "memory": "1Gi"},
            "limits": {"memory": "2Gi", "ephemeral_storage": "10Gi"},
        }
    )
    resources = spec["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "500m", "memory": "1Gi", "ephemeral-storage": "10Gi"}
    assert resources["limits"] == {"cpu": "500m", "memory": "2Gi", "ephemeral-storage": "10Gi"}


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"requests": {"memory": "3Gi"}, "limits": {"memory": "2Gi"}}, "above its limit"),
        ({"requests": {"cpu": "lots"}}, "not a Kubernetes quantity"),
        ({"requests": {"gpu": 1}, "limits": {"gpu": 2}}, "must be equal"),
    ],
)
def test_bad_resources_are_refused_naming_the_task(resources, message):
    task = TaskSpec(name="t1", version="1", custom={"image": "i", "resources": resources})
    with pytest.raises(InvalidPluginConfigError, match=message) as caught:
        ContainerTask.from_task(task)
    assert "task 't1': custom.resources" in str(caught.value)


def test_env_task_then_execution_then_identity():
    spec = spec_of(env={"MODE": "from-task", "SLUICE_ATTEMPT": "forged", "ONLY_TASK": "t"})
    env = {item["name"]: item["value"] for item in spec["containers"][0]["env"]}
    assert env["MODE"] == "from-execution"
    assert env["ONLY_TASK"] == "t"
    assert env["EXTRA"] == "1"
    assert env["SLUICE_ATTEMPT"] == "1"
    assert env["SLUICE_EXECUTION_ID"] == "xabc"


def test_command_args_render_inputs():
    spec = spec_of(
        inputs={"n": 3, "name": "bob", "cfg": {"b": 1, "a": [1, 2]}},
        command=["python", "-c"],
        args=["print({{inputs.n}} * 2)", "{{ inputs.name }}", "{{inputs.cfg}}", "${HOME}"],
    )
    container = spec["containers"][0]
    assert container["command"] == ["python", "-c"]
    assert container["args"] == ["print(3 * 2)", "bob", '{"a":[1,2],"b":1}', "${HOME}"]


def test_unknown_input_reference_is_an_error():
    with pytest.raises(InvalidPluginConfigError, match="unknown input 'nope'"):
        spec_of(args=["{{inputs.nope}}"])


def test_pod_runs_once_with_optional_fields():
    spec = spec_of(
        service_account="runner",
        image_pull_policy="Always",
        tolerations=[{"key": "spot", "operator": "Exists"}],
        node_selector={"pool": "batch"},
    )
    assert spec["restartPolicy"] == "Never"
    assert spec["serviceAccountName"] == "runner"
    assert spec["containers"][0]["imagePullPolicy"] == "Always"
    assert spec["containers"][0]["name"] == "main"
    assert spec["tolerations"] == [{"key": "spot", "operator": "Exists"}]
    assert spec["nodeSelector"] == {"pool": "batch"}


def test_unknown_task_config_keys_are_refused():
    task = TaskSpec(name="t1", version="1", custom={"image": "i", "imagee": "typo"})
    with pytest.raises(InvalidPluginConfigError, match=r"custom\.imagee"):
        ContainerTask.from_task(task)
