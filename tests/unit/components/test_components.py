"""The components with Pulumi's resource mocks (no engine): each takes one typed args dataclass, every
output it sets is registered with the engine (register_outputs), and the dynamic providers read their
properties through typed models that accept what Pulumi state holds (numbers come back as floats, extra
keys such as `__provider` and earlier outputs are present)."""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
from collections.abc import Callable, Iterator
from typing import Any

import pulumi
import pytest

from npa_pulumi import components
from npa_pulumi.components import (
    FleetProject,
    FleetProjectArgs,
    K8sTrainingCluster,
    K8sTrainingClusterArgs,
    ObjectStorage,
    ObjectStorageArgs,
    ProjectNetwork,
    ProjectNetworkArgs,
)
from npa_pulumi.components.cloud_resources import BucketInputs, NetworkInputs, ProjectInputs
from npa_pulumi.components.terraform_module import TerraformModuleInputs

SCOPE: dict[str, Any] = {"cloud": "local", "profile": "", "fleet": "f1", "project_key": "p1"}
# Upstream k8s-training's outputs (its output.tf) and a Terraform state holding its one node group.
TF_OUTPUTS = {"kube_cluster": {"id": "mk8scluster-1", "endpoints": {"public_endpoint": "k:443"}}}
TF_STATE = json.dumps(
    {
        "version": 4,
        "resources": [
            {
                "mode": "managed",
                "type": "nebius_mk8s_v1_node_group",
                "name": "cpu-only",
                "instances": [{"attributes": {"id": "ng-1", "fixed_node_count": 2}}],
            }
        ],
    }
)
# What each dynamic resource's provider adds (by type name).
PROVIDED: dict[str, dict[str, Any]] = {
    "Project": {"resolved_id": "project-1", "name": "P1", "created": True},
    "Network": {"network_id": "net-1", "subnet_id": "subnet-1", "owned": True},
    "Bucket": {"bucket_id": "bucket-1", "created": True},
    "ServiceAccount": {"service_account_id": "sa-1"},
    "AccessKey": {"access_key_id": "key-1", "aws_access_key_id": "AKIA1", "secret": "s3cr3t"},
    "BucketProbe": {"verified": True},
    "TerraformModule": {"outputs": TF_OUTPUTS, "sensitive_outputs": {}, "tf_state": TF_STATE},
}


class Mocks(pulumi.runtime.Mocks):
    """Every resource gets an id; dynamic resources get the outputs their providers would set."""

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        outputs = dict(args.inputs)
        outputs.update(PROVIDED.get(args.typ.rsplit(":", 1)[-1], {}))
        return f"{args.name}-id", outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        return {}, []


@pytest.fixture
def registered(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, dict[str, Any]]]:
    """What each component registered as its outputs, by component type."""
    # The SDK schedules on the thread's current loop; an earlier `asyncio.run` in this process leaves none.
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(Mocks(), preview=False)
    seen: dict[str, dict[str, Any]] = {}
    original = pulumi.ComponentResource.register_outputs

    def record(self: pulumi.ComponentResource, outputs: dict[str, Any]) -> None:
        seen[type(self).__name__] = dict(outputs)
        original(self, outputs)

    monkeypatch.setattr(pulumi.ComponentResource, "register_outputs", record)
    yield seen


def engine_test(function: Callable[..., Any]) -> Callable[..., Any]:
    """`pulumi.runtime.test` (untyped in the SDK): runs the test, then waits for every output."""
    wrapped: Callable[..., Any] = pulumi.runtime.test(function)  # type: ignore[no-untyped-call]
    return wrapped


def _declared_outputs(component: type) -> set[str]:
    return {name for name, hint in inspect.get_annotations(component).items() if "Output[" in str(hint)}


def test_every_component_takes_one_args_dataclass() -> None:
    for name in components.__all__:
        component = getattr(components, name)
        if name.endswith("Args"):
            assert dataclasses.is_dataclass(component), name
            continue
        parameters = list(inspect.signature(component.__init__).parameters)
        # Dynamic resources name their first argument as pulumi.dynamic.Resource does.
        first = "resource_name" if issubclass(component, pulumi.dynamic.Resource) else "name"
        assert parameters[:3] == ["self", first, "args"], name
        assert parameters[3:] == ["opts"], name


@engine_test
def test_project_stack_components_register_every_output(registered: dict[str, dict[str, Any]]) -> Any:
    project = FleetProject(
        "p1",
        FleetProjectArgs(**SCOPE, tenant_id="t1", region="eu-north1", display_name="P1", project_id=None),
    )
    network = ProjectNetwork(
        "p1-network", ProjectNetworkArgs(**SCOPE, project_id=project.project_id, region="eu-north1")
    )
    storage = ObjectStorage(
        "p1-storage",
        ObjectStorageArgs(
            **SCOPE,
            tenant_id="t1",
            project_id=project.project_id,
            region="eu-north1",
            storage_class="standard",
            size_gibibytes=1024,
        ),
    )

    def check(values: list[Any]) -> None:
        for component in (FleetProject, ProjectNetwork, ObjectStorage):
            assert set(registered[component.__name__]) == _declared_outputs(component), component.__name__
        project_id, subnet_id, bucket_name, verified = values
        assert (project_id, subnet_id, verified) == ("project-1", "subnet-1", True)
        assert bucket_name.startswith("npa-fleet-")  # derived from tenant, project and fleet

    return pulumi.Output.all(
        project.project_id, network.subnet_id, storage.bucket_name, storage.verified
    ).apply(check)


@engine_test
def test_cluster_component_registers_every_output(registered: dict[str, dict[str, Any]]) -> Any:
    cluster = K8sTrainingCluster(
        "c1",
        K8sTrainingClusterArgs(
            **SCOPE,
            cluster="c1",
            work_key="f1.p1.c1",
            identity={"tenant_id": "t1", "parent_id": "project-1", "region": "eu-north1", "subnet_id": "s1"},
            tfvars={"cluster_name": "c1"},
            runtime_tfvars={},
            recipe={"source": "default", "location": "x", "digest": "d"},
            recipe_facts={},
            capacity_block_group="",
            gpu_driver_mode="managed-image",
            allow_unsafe_nvswitch_operator=False,
            nvswitch_topology=False,
            mig_enabled=False,
        ),
    )

    def check(values: list[Any]) -> None:
        assert set(registered["K8sTrainingCluster"]) == _declared_outputs(K8sTrainingCluster)
        cluster_id, node_groups, context, filesystem = values
        assert (cluster_id, node_groups, context) == ("mk8scluster-1", ["ng-1"], "fleet-f1-p1-c1")
        assert filesystem == {"id": "", "mount": None, "attachments": []}

    return pulumi.Output.all(
        cluster.cluster_id, cluster.node_group_ids, cluster.kube_context, cluster.filesystem
    ).apply(check)


def test_provider_inputs_read_what_state_holds() -> None:
    state = {
        **SCOPE,
        "__provider": "pickled",
        "project_id": "project-1",
        "region": "eu-north1",
        "bucket_name": "b",
        "storage_class": "standard",
        "size_gibibytes": 1024.0,  # Pulumi property values are float64
        "bucket_id": "bucket-1",
        "created": True,
        "retain_on_delete": True,
    }
    bucket = BucketInputs.model_validate(state)
    assert bucket.size_gibibytes == 1024 and isinstance(bucket.size_gibibytes, int)
    assert NetworkInputs.model_validate(state).project_id == "project-1"
    with pytest.raises(ValueError, match="display_name"):
        ProjectInputs.model_validate(state)
    module = TerraformModuleInputs.model_validate(
        {
            **SCOPE,
            "cluster": "c1",
            "work_key": "f1.p1.c1",
            "identity": {"tenant_id": "t", "parent_id": "p", "region": "r", "subnet_id": "s"},
            "tfvars": {"n": 2.0},
            "runtime_tfvars": None,
            "recipe": {"source": "dir", "location": "/r", "digest": "d"},
            "outputs": None,
        }
    )
    assert module.identity.region == "r" and module.recipe.digest == "d" and module.runtime_tfvars is None


def test_every_recipe_output_the_cluster_component_reads_is_one_upstream_declares() -> None:
    """No check may read a fact only a stand-in provides: each output name is declared by upstream
    k8s-training's own output.tf (../shared/upstream, the real module)."""
    import re

    from upstream_library import upstream_library

    from npa_pulumi.components.k8s_training_cluster import READ_OUTPUTS

    text = (upstream_library() / "k8s-training" / "output.tf").read_text()
    declared = set(re.findall(r'^output\s+"([^"]+)"', text, flags=re.MULTILINE))
    assert set(READ_OUTPUTS) <= declared, sorted(set(READ_OUTPUTS) - declared)
