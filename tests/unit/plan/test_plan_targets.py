"""Targets: effective values (reference §3) and --only-projects / --only-clusters / --project-prefix."""

from __future__ import annotations

import json
from typing import Any

import pytest

from npa_pulumi.errors import UserInputError
from npa_pulumi.plan import SelectorError, Target, resolve_targets
from npa_pulumi.spec import FleetSpec, parse_spec

CPU = {"count": 1, "platform": "cpu-d3", "preset": "16vcpu-64gb"}
RTX = {"count": 1, "platform": "gpu-rtx6000", "preset": "1gpu-24vcpu-218gb"}
H200 = {"count": 2, "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"}


def spec_of(cluster: dict[str, Any] | None = None, **top: Any) -> FleetSpec:
    doc: dict[str, Any] = {
        "name": "fleet",
        "region": "eu-north1",
        "projects": [{"name": "p", "clusters": [cluster or {"cpu_nodes": CPU}]}],
    }
    doc.update(top)
    return parse_spec(json.dumps(doc))


def target_of(cluster: dict[str, Any]) -> Target:
    [target] = resolve_targets(spec_of(cluster))
    return target


@pytest.mark.parametrize(
    ("pool", "explicit", "expected"),
    [
        (H200, None, True),
        ({**H200, "platform": "gpu-b200-nvl"}, None, True),
        ({"count": 1, "platform": "gpu-rtx6000", "preset": "8gpu-192vcpu-1744gb"}, None, False),
        ({**H200, "preset": "4gpu-64vcpu-800gb"}, None, False),
        ({**H200, "count": 0}, None, False),
        (H200, False, False),
    ],
)
def test_enable_gpu_cluster_auto(pool: dict[str, Any], explicit: bool | None, expected: bool) -> None:
    cluster: dict[str, Any] = {"cpu_nodes": CPU, "gpu_nodes": pool, "infiniband_fabric": "fabric-2"}
    if explicit is not None:
        cluster["enable_gpu_cluster"] = explicit
    assert target_of(cluster).cluster.enable_gpu_cluster is expected


@pytest.mark.parametrize(
    ("cluster", "mode", "preset", "nvswitch"),
    [
        ({"gpu_nodes": RTX}, "managed-image", "cuda13.0", False),
        ({"gpu_nodes": RTX, "managed_driver_preset": "cuda12.8"}, "managed-image", "cuda12.8", False),
        ({"gpu_nodes": RTX, "gpu_driver_mode": "operator"}, "operator", None, False),
        ({"cpu_nodes": CPU}, "auto", None, False),  # CPU-only: the requested mode is reported, inert
        ({"gpu_nodes": H200, "infiniband_fabric": "f"}, "managed-image", "cuda13.0", True),
        ({"gpu_nodes": {**H200, "count": 1}, "enable_gpu_cluster": False}, "managed-image", "cuda13.0", True),
        (
            {"gpu_nodes": {"count": 1, "platform": "gpu-h100-sxm", "preset": "1gpu-16vcpu-200gb"}},
            "managed-image",
            "cuda13.0",
            False,
        ),
        ({"gpu_workload_profile": "rtx-rendering"}, "operator", None, False),
    ],
)
def test_effective_driver_mode(
    cluster: dict[str, Any], mode: str, preset: str | None, nvswitch: bool
) -> None:
    resolved = target_of(cluster).cluster
    assert resolved.gpu_driver_mode == mode
    assert resolved.managed_driver_preset == preset
    assert resolved.nvswitch_topology is nvswitch


def test_mig_resolves_operator_k8s_and_disk() -> None:
    resolved = target_of(
        {"gpu_nodes": {**RTX, "count": 2, "capacity_block_group": "cbg-x"}, "mig": {}}
    ).cluster
    assert resolved.gpu_driver_mode == "operator"
    assert resolved.k8s_version == "1.34"
    assert resolved.gpu_nodes is not None and resolved.gpu_nodes.disk_size_gib == 128
    assert resolved.mig is not None
    assert resolved.mig.versions["gpu_operator_version"] == "v26.3.3"
    assert resolved.mig.resources_per_node == {
        "nvidia.com/gpu": 0,
        "nvidia.com/mig-1g.24gb": 2,
        "nvidia.com/mig-2g.48gb": 1,
    }


def test_disabled_mig_and_kuberay_resolve_to_none() -> None:
    resolved = target_of(
        {"cpu_nodes": CPU, "gpu_nodes": RTX, "mig": {"enabled": False}, "kuberay": {"enabled": False}}
    ).cluster
    assert resolved.mig is None and resolved.kuberay is None
    assert resolved.gpu_driver_mode == "managed-image"


@pytest.mark.parametrize(
    ("cluster", "cpu_disk", "gpu_disk"),
    [
        ({"cpu_nodes": CPU, "gpu_nodes": RTX}, 128, 1023),
        ({"cpu_nodes": {**CPU, "disk_size_gib": 64}, "gpu_nodes": RTX, "gpu_disk_size_gib": 512}, 64, 512),
        (
            {"cpu_nodes": CPU, "gpu_nodes": {**RTX, "disk_size_gib": 2048}, "gpu_disk_size_gib": 512},
            128,
            2048,
        ),
    ],
)
def test_disk_sizes(cluster: dict[str, Any], cpu_disk: int, gpu_disk: int) -> None:
    resolved = target_of(cluster).cluster
    assert resolved.cpu_nodes is not None and resolved.cpu_nodes.disk_size_gib == cpu_disk
    assert resolved.gpu_nodes is not None and resolved.gpu_nodes.disk_size_gib == gpu_disk


@pytest.mark.parametrize(
    ("pool", "extra", "layout", "reservation"),
    [
        ({**RTX, "count": 3, "capacity_block_group": "cbg"}, {}, (1, 3), "strict"),
        ({**RTX, "count": 1, "capacity_block_group": "cbg"}, {}, (1, 1), "strict"),
        ({**RTX, "count": 3}, {}, (3, 1), "on-demand"),
        ({**RTX, "count": 3, "preemptible": True}, {}, (3, 1), "on-demand"),
        ({**H200, "count": 4, "capacity_block_group": "cbg"}, {"infiniband_fabric": "f"}, (4, 1), "strict"),
        ({**RTX, "count": 0}, {"cpu_nodes": CPU}, (0, 0), "none"),
    ],
)
def test_gpu_layout_and_reservation(
    pool: dict[str, Any], extra: dict[str, Any], layout: tuple[int, int], reservation: str
) -> None:
    resolved = target_of({"gpu_nodes": pool, **extra}).cluster
    assert (resolved.gpu_nodes_per_group, resolved.gpu_node_groups) == layout
    assert resolved.gpu_reservation == reservation


def test_per_node_resources_come_from_presets() -> None:
    resolved = target_of({"cpu_nodes": CPU, "gpu_nodes": H200, "infiniband_fabric": "f"}).cluster
    assert resolved.gpu_nodes is not None and resolved.cpu_nodes is not None
    assert (resolved.gpu_nodes.gpus_per_node, resolved.gpu_nodes.vcpus_per_node) == (8, 128)
    assert resolved.gpu_nodes.memory_gib_per_node == 1600
    assert (resolved.cpu_nodes.gpus_per_node, resolved.cpu_nodes.vcpus_per_node) == (0, 16)


def test_capacity_block_group_is_a_secret_everywhere_but_its_accessor() -> None:
    target = target_of({"gpu_nodes": {**RTX, "capacity_block_group": "capacityblockgroup-e00secret"}})
    assert target.cluster.capacity_block_group_value() == "capacityblockgroup-e00secret"
    assert "e00secret" not in repr(target)
    assert "e00secret" not in target.model_dump_json()
    assert "e00secret" not in str(target.model_dump())


def test_chart_repository_is_a_secret() -> None:
    target = target_of(
        {
            "cpu_nodes": CPU,
            "enable_filestore": True,
            "filesystem_csi_chart_repository": "oci://private.example/charts",
        }
    )
    assert "private.example" not in target.model_dump_json()


def test_target_identity_and_stacks() -> None:
    spec = parse_spec(
        json.dumps(
            {
                "name": "fleet",
                "region": "eu-north1",
                "project_prefix": "team-",
                "defaults": {"cpu_nodes": CPU},
                "projects": [
                    {
                        "name": "a",
                        "region": "us-central1",
                        "clusters": [{"name": "train"}, {"name": "infer"}],
                    },
                    {"project_id": "project-e00example"},
                ],
            }
        )
    )
    targets = resolve_targets(spec)
    assert [(t.project_key, t.cluster_name) for t in targets] == [
        ("a", "train"),
        ("a", "infer"),
        ("project-e00example", "cluster"),
    ]
    first, _, by_id = targets
    assert (first.display_name, first.project_id, first.region) == ("team-a", None, "us-central1")
    assert (first.project_stack, first.cluster_stack) == ("fleet.a", "fleet.a.train")
    assert (by_id.display_name, by_id.project_id, by_id.region) == (
        "project-e00example",
        "project-e00example",
        "eu-north1",
    )
    assert by_id.cluster_stack == "fleet.project-e00example.cluster"
    assert first.backend == "mk8s" and first.cluster.backend == "mk8s"


def test_region_may_be_left_for_deploy_time() -> None:
    [target] = resolve_targets(
        parse_spec(json.dumps({"name": "f", "projects": [{"name": "a", "clusters": [{"cpu_nodes": CPU}]}]}))
    )
    assert target.region == ""


def test_object_storage_is_normalized() -> None:
    spec = spec_of(
        projects=[
            {
                "name": "a",
                "clusters": [{"cpu_nodes": CPU}],
                "object_storage": {"storage_class": "Enhanced-Throughput", "size_gibibytes": 2},
            }
        ]
    )
    [target] = resolve_targets(spec)
    storage = target.object_storage
    assert storage is not None
    assert (storage.storage_class, storage.display_storage_class) == ("enhanced_throughput", "enhanced")
    assert storage.size_bytes == 2 * 2**30 and storage.bucket_name is None


def test_disabled_object_storage_resolves_to_none() -> None:
    spec = spec_of(
        projects=[{"name": "a", "clusters": [{"cpu_nodes": CPU}], "object_storage": {"enabled": False}}]
    )
    assert resolve_targets(spec)[0].object_storage is None


# --- selection ------------------------------------------------------------------------------------------

FLEET = {
    "name": "fleet",
    "region": "eu-north1",
    "project_prefix": "team-",
    "defaults": {"cpu_nodes": CPU},
    "projects": [
        {"name": "a", "clusters": [{"name": "train"}, {"name": "infer"}]},
        {"name": "b", "clusters": [{"name": "train"}]},
        {"project_id": "project-e00c"},
    ],
}


def pick(
    *, projects: tuple[str, ...] = (), clusters: tuple[str, ...] = (), prefix: str | None = None
) -> list[str]:
    spec = parse_spec(json.dumps(FLEET))
    return [f"{t.project_key}/{t.cluster_name}" for t in resolve_targets(spec, projects, clusters, prefix)]


def test_no_selectors_selects_everything() -> None:
    assert pick() == ["a/train", "a/infer", "b/train", "project-e00c/cluster"]


@pytest.mark.parametrize("selector", ["b", "team-b"])
def test_projects_by_key_or_display_name(selector: str) -> None:
    assert pick(projects=(selector,)) == ["b/train"]


def test_comma_separated_and_repeated_selectors() -> None:
    assert pick(projects=("a,project-e00c",)) == ["a/train", "a/infer", "project-e00c/cluster"]
    assert pick(projects=("b", "a")) == ["a/train", "a/infer", "b/train"]


def test_clusters_across_selected_projects() -> None:
    assert pick(clusters=("train",)) == ["a/train", "b/train"]
    assert pick(projects=("a",), clusters=("infer",)) == ["a/infer"]


def test_project_prefix_override_changes_display_names() -> None:
    spec = parse_spec(json.dumps(FLEET))
    [target] = resolve_targets(spec, ["ops-b"], [], "ops-")
    assert target.display_name == "ops-b"
    assert pick(projects=("ops-a",), prefix="ops-") == ["a/train", "a/infer"]


def test_unknown_project_selector_names_the_choices() -> None:
    with pytest.raises(SelectorError) as caught:
        pick(projects=("c",))
    message = str(caught.value)
    assert "unknown project selector(s): c" in message
    assert "a (team-a)" in message and "project-e00c" in message
    assert caught.value.valid_choices == ["a (team-a)", "b (team-b)", "project-e00c"]
    assert isinstance(caught.value, UserInputError) and caught.value.exit_code == 2
    assert caught.value.to_dict()["valid_choices"] == caught.value.valid_choices


def test_unknown_cluster_selector_names_the_choices_of_selected_projects() -> None:
    with pytest.raises(SelectorError) as caught:
        pick(projects=("b",), clusters=("infer",))
    assert "valid choices in the selected project(s): train" in str(caught.value)


def test_sdk_built_invalid_spec_is_rejected_by_resolution() -> None:
    from npa_pulumi.spec import ClusterSpec, NodePoolSpec, ProjectSpec, SpecError

    spec = FleetSpec(
        name="f",
        projects=[
            ProjectSpec(
                name="a",
                clusters=[
                    ClusterSpec(gpu_nodes=NodePoolSpec(count=1, platform="gpu-rtx6000", preset="banana"))
                ],
            )
        ],
    )
    with pytest.raises(SpecError) as caught:
        resolve_targets(spec)
    assert caught.value.problems[0].path == "projects[0].clusters[0].gpu_nodes.preset"
    assert caught.value.problems[0].line is None
