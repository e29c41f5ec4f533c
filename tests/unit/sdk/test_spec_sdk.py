"""The SDK: specs built in Python validate like YAML ones; npa_pulumi.sdk.fleet exports the surface."""

from __future__ import annotations

from pathlib import Path

import pytest

from npa_pulumi.sdk import fleet as sdk
from npa_pulumi.sdk.fleet import (
    ClusterSpec,
    FleetSpec,
    KubeRaySpec,
    MigSpec,
    NodePoolSpec,
    ObjectStorageSpec,
    ProjectSpec,
    SpecError,
    ensure_valid,
    load_spec,
    plan,
    render_tfvars,
    resolve_targets,
)

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def demo() -> FleetSpec:
    return FleetSpec(
        name="demo",
        region="eu-north1",
        projects=[
            ProjectSpec(
                name="a",
                object_storage=ObjectStorageSpec(size_gibibytes=10),
                clusters=[
                    ClusterSpec(
                        name="cpu",
                        cpu_nodes=NodePoolSpec(count=2, preset="16vcpu-64gb"),
                        kuberay=KubeRaySpec(enabled=True),
                    ),
                    ClusterSpec(
                        name="mig",
                        gpu_nodes=NodePoolSpec(
                            count=2,
                            platform="gpu-rtx6000",
                            preset="1gpu-24vcpu-218gb",
                            capacity_block_group="c",
                        ),
                        mig=MigSpec(),
                    ),
                ],
            ),
        ],
    )


def test_exports() -> None:
    for name in (
        "FleetSpec",
        "ProjectSpec",
        "ClusterSpec",
        "NodePoolSpec",
        "load_spec",
        "plan",
        "resolve_targets",
        "render_tfvars",
    ):
        assert hasattr(sdk, name) and name in sdk.__all__


def test_plan_of_a_python_spec() -> None:
    document = plan(demo())
    assert document["cluster_count"] == 2
    cpu, mig = document["projects"][0]["clusters"]
    assert cpu["kuberay"]["worker_replicas"] == 1
    assert mig["mig"]["config"] == "all-balanced" and mig["gpu_reservation"] == "strict"
    assert document["projects"][0]["object_storage"]["size_gibibytes"] == 10


def test_plan_of_a_file_and_selection() -> None:
    document = plan(EXAMPLES / "fleet1-test.yaml", only_projects=["b"])
    assert [p["key"] for p in document["projects"]] == ["b"]


def test_python_defaults() -> None:
    cluster = ClusterSpec(cpu_nodes=NodePoolSpec(count=1), gpu_nodes=NodePoolSpec(count=1, preset="1gpu-x"))
    assert cluster.cpu_nodes is not None and cluster.cpu_nodes.platform == "cpu-d3"
    assert cluster.gpu_nodes is not None and cluster.gpu_nodes.platform == "gpu-rtx6000"
    assert cluster.name == "cluster" and cluster.gpu_driver_mode == "auto"


def test_shared_pool_objects_are_not_mutated() -> None:
    pool = NodePoolSpec(count=1)
    ClusterSpec(cpu_nodes=pool)
    ClusterSpec(gpu_workload_profile="rtx-rendering", gpu_nodes=pool)
    assert pool.platform is None


def test_invalid_python_spec_lists_every_problem_without_lines() -> None:
    spec = FleetSpec(
        name="Bad Name",
        projects=[
            ProjectSpec(
                name="a",
                clusters=[ClusterSpec(), ClusterSpec(cpu_nodes=NodePoolSpec(count=1, preset="4vcpu-16gb"))],
            )
        ],
    )
    with pytest.raises(SpecError) as caught:
        ensure_valid(spec)
    paths = {p.path for p in caught.value.problems}
    assert paths == {"name", "projects[0].clusters[0]", "projects[0].clusters[1].name"}
    assert all(p.line is None for p in caught.value.problems)
    with pytest.raises(SpecError):
        plan(spec)


def test_python_types_are_checked_at_construction() -> None:
    with pytest.raises(ValueError, match="must be a boolean"):
        ClusterSpec(enable_filestore="yes")
    with pytest.raises(ValueError, match="require enabled: true"):
        KubeRaySpec(worker_replicas=3)


def test_tfvars_from_the_sdk() -> None:
    targets = resolve_targets(load_spec(EXAMPLES / "rtxpro-mig.yaml"))
    assert render_tfvars(targets[0]).file_vars["mig_strategy"] == "mixed"


def test_yaml_data_round_trip() -> None:
    spec = load_spec(EXAMPLES / "mixed-backends.yaml")
    data = spec.to_yaml_data()
    assert data["apiVersion"] == "npa.fleet/v0.0.1"
    assert FleetSpec.model_validate(data).model_dump() == spec.model_dump()
