"""The stack outputs' models (npa_pulumi/output/stack_outputs.py): the programs export exactly the keys
stacks have always recorded, each a field of the model its readers read; reading is lenient where stored
state may be older or odd; and a name that is no field is refused when exported."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.engine.backends.soperator.outputs import SoperatorOutputs
from npa_pulumi.engine.fingerprint import FINGERPRINT_OUTPUT
from npa_pulumi.engine.programs import export
from npa_pulumi.output.stack_outputs import (
    ClusterOutputs,
    ProjectOutputs,
    StackOutputs,
    referenced_ids,
)
from npa_pulumi.plan.cost import COST_BASIS_OUTPUT
from npa_pulumi.spec.constants import BackendKind

ENGINE = Path(__file__).resolve().parents[3] / "npa_pulumi" / "engine"
MODELS: dict[str, type[StackOutputs]] = {
    "ProjectOutputs": ProjectOutputs,
    "ClusterOutputs": ClusterOutputs,
    "SoperatorOutputs": SoperatorOutputs,
}
# What deployed stacks recorded before the outputs were typed: a stack must read the same.
PROJECT_KEYS = {
    "project_id",
    "project_created",
    "tenant_id",
    "region",
    "network_id",
    "subnet_id",
    "network_owned",
    "npa_fingerprint",
    "cost_basis",
    "bucket_id",
    "bucket_name",
    "storage_access_key_id",
    "storage_secret_access_key",
    "storage_verified",
    "bucket_created",
    "storage_service_account_id",
    "storage_service_account_created",
    "storage_key_id",
}
CLUSTER_KEYS = {
    "project_id",
    "subnet_id",
    "npa_fingerprint",
    "cost_basis",
    "cluster_id",
    "endpoint",
    "node_group_ids",
    "filesystem",
    "kube_context",
    "live_objects",
    "kube_server",
    "fleet_namespace",
    "kuberay_objects",
    "lifecycle",
    "validation",
    "health_evidence",
    "kuberay",
}
SOPERATOR_KEYS = {
    *(CLUSTER_KEYS - {"cost_basis", "filesystem", "kuberay_objects", "kuberay"}),
    "backend",
    "filestores",
    "slurm_cluster",
    "slurm_status",
}


def _exports(path: Path) -> dict[str, set[str]]:
    """model name -> the keys `export(Model, key=...)` calls in `path` write."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "export":
            model = node.args[0]
            assert isinstance(model, ast.Name), f"{path}: export's model must be named"
            found.setdefault(model.id, set()).update(k.arg for k in node.keywords if k.arg)
    return found


def test_the_programs_export_the_keys_stacks_have_always_recorded() -> None:
    project = _exports(ENGINE / "programs.py")
    mk8s = _exports(ENGINE / "backends" / "mk8s" / "program.py")
    soperator = _exports(ENGINE / "backends" / "soperator" / "program.py")
    assert project["ProjectOutputs"] == PROJECT_KEYS
    shared = project["ClusterOutputs"]  # the in-cluster stage and the ungated verdict every backend shares
    assert shared | mk8s["ClusterOutputs"] == CLUSTER_KEYS
    assert shared | soperator["SoperatorOutputs"] == SOPERATOR_KEYS
    for exports in (project, mk8s, soperator):
        for model, keys in exports.items():
            assert keys <= set(MODELS[model].model_fields), model  # every key a field of its model


def test_the_well_known_output_names_are_fields() -> None:
    assert FINGERPRINT_OUTPUT in StackOutputs.model_fields
    assert COST_BASIS_OUTPUT in StackOutputs.model_fields


def test_export_writes_fields_and_refuses_other_names(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi

    written: dict[str, Any] = {}
    monkeypatch.setattr(pulumi, "export", lambda name, value: written.__setitem__(name, value))
    export(ClusterOutputs, cluster_id="c-1", lifecycle="deployed")
    assert written == {"cluster_id": "c-1", "lifecycle": "deployed"}
    with pytest.raises(TypeError, match="ClusterOutputs has no output cluster_idd"):
        export(ClusterOutputs, cluster_idd="c-1")
    with pytest.raises(TypeError, match="slurm_status"):
        export(ClusterOutputs, slurm_status={})  # a soperator stack's output, not every cluster's


def test_reading_is_lenient_where_stored_state_may_be_odd() -> None:
    recorded = ClusterOutputs.read(
        {
            "cluster_id": "mk8scluster-1",
            "project_id": 7,  # not text: not an id
            "node_group_ids": ["ng-1", 2],
            "health_evidence": "junk",
            "kuberay": {"ready": True},
            "some_future_output": 1,  # not this model's: not read
        }
    )
    assert recorded.cluster_id == "mk8scluster-1" and recorded.project_id is None
    assert recorded.node_group_ids == ["ng-1", "2"]
    assert recorded.health_evidence is None and recorded.kuberay == {"ready": True}
    assert ClusterOutputs.read(None) == ClusterOutputs() and ClusterOutputs.of(None) is None
    assert ClusterOutputs.read({"node_group_ids": "ng-1"}).node_group_ids == []


def test_a_flag_is_set_only_when_recorded_as_true() -> None:
    assert ProjectOutputs.read({"project_created": True}).project_created is True
    for odd in ("true", 1, None, "yes"):
        assert ProjectOutputs.read({"project_created": odd}).project_created is False


def test_a_cluster_stack_names_its_backend_and_lifecycle() -> None:
    assert ClusterOutputs.read({}).kind is BackendKind.MK8S  # an mk8s stack records no backend
    assert ClusterOutputs.read({"backend": "soperator"}).kind is BackendKind.SOPERATOR
    assert ClusterOutputs.read({"backend": "napkin"}).kind is None
    assert ClusterOutputs.read({}).recorded_lifecycle == "deployed"  # deployed before gates recorded one
    assert ClusterOutputs.read({"lifecycle": "deployed-mig-not-ready"}).recorded_lifecycle == (
        "deployed-mig-not-ready"
    )
    identity = ClusterOutputs.read({"project_id": "p", "cluster_id": "c", "kube_context": "k", "region": "r"})
    assert identity.identity() == {"project_id": "p", "cluster_id": "c", "kube_context": "k"}


def test_the_ids_a_cloud_sweep_leaves_alone() -> None:
    project = {
        "project_id": "project-1",
        "tenant_id": "tenant-1",
        "network_id": "vpcnetwork-1",
        "subnet_id": "vpcsubnet-1",
        "bucket_id": "bucket-1",
        "storage_access_key_id": "AKIA",
        "storage_service_account_id": "serviceaccount-1",
        "storage_key_id": "accesskey-1",
    }
    assert referenced_ids(project) == {
        "project-1",
        "vpcnetwork-1",
        "vpcsubnet-1",
        "bucket-1",
        "serviceaccount-1",
        "accesskey-1",
    }
    assert referenced_ids(
        {"cluster_id": "mk8scluster-1", "project_id": "project-1", "kube_context": "x"}
    ) == {
        "mk8scluster-1",
        "project-1",
    }
    assert referenced_ids(None) == set()


def test_a_soperator_stack_reads_its_slurm_cluster() -> None:
    assert SoperatorOutputs.read({}).slurm_cluster_name() == ("soperator", "soperator")
    recorded = SoperatorOutputs.read({"slurm_cluster": {"name": "s", "namespace": "ns"}})
    assert recorded.slurm_cluster_name() == ("s", "ns")
