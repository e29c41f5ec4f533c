"""terraform.tfvars.json for representative shapes (reference §4), secrets kept out, recipe-aware."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from npa_pulumi.errors import UserInputError
from npa_pulumi.plan import (
    IDENTITY_VARIABLES,
    MIG_RECIPE_VARIABLES,
    RECIPE_VARIABLES,
    RecipeError,
    RenderedTfvars,
    Target,
    render_tfvars,
    resolve_targets,
)
from npa_pulumi.spec import parse_spec

CPU = {"count": 2, "platform": "cpu-d3", "preset": "16vcpu-64gb"}
RTX = {"count": 1, "platform": "gpu-rtx6000", "preset": "1gpu-24vcpu-218gb"}
H200 = {"count": 2, "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"}
CBG = "capacityblockgroup-e00reserved"


def target_of(cluster: dict[str, Any], name: str = "c1") -> Target:
    doc = {
        "name": "fleet",
        "region": "eu-north1",
        "projects": [{"name": "p", "clusters": [{"name": name, **cluster}]}],
    }
    [target] = resolve_targets(parse_spec(json.dumps(doc)))
    return target


def render(cluster: dict[str, Any], **kwargs: Any) -> RenderedTfvars:
    return render_tfvars(target_of(cluster), **kwargs)


COMMON_HEAD = {
    "mk8s_cluster_public_endpoint": True,
    "enable_k8s_node_group_sa": False,
    "enable_egress_gateway": False,
    "cpu_nodes_public_ips": False,
    "gpu_nodes_public_ips": False,
    "cpu_nodes_preemptible": False,
}
COMMON_TAIL = {
    "enable_nebius_o11y_agent": False,
    "enable_grafana": False,
    "enable_prometheus": False,
    "collectK8sClusterMetrics": False,
}
CSI = {
    "chart_version": "0.1.6",
    "namespace": "kube-system",
    "make_default_storage_class": True,
    "previous_default_storage_class_name": "compute-csi-default-sc",
}
FILESTORE_OFF = {
    "enable_filestore": False,
    "existing_filestore": "",
    "filestore_disk_size_gibibytes": 1024,
    "filestore_mount_path": "/mnt/data",
    "filestore_mount_tag": "data",
    "filesystem_csi": CSI,
}
APPS_OFF = {
    "enable_kuberay_cluster": False,
    "enable_kuberay_service": False,
    "enable_opa_gatekeeper": False,
    "loki": {"enabled": False, "replication_factor": 1},
}


def test_cpu_only_cluster_exactly() -> None:
    rendered = render({"cpu_nodes": CPU})
    assert rendered.file_vars == {
        "cluster_name": "c1",
        **COMMON_HEAD,
        "gpu_nodes_preemptible": False,
        "mig_strategy": "none",
        "custom_driver": False,
        "cpu_nodes_fixed_count": 2,
        "cpu_nodes_platform": "cpu-d3",
        "cpu_nodes_preset": "16vcpu-64gb",
        "cpu_disk_size": "128",
        "gpu_nodes_fixed_count_per_group": 0,
        "gpu_node_groups": 0,
        "enable_gpu_cluster": False,
        **FILESTORE_OFF,
        **COMMON_TAIL,
        **APPS_OFF,
    }
    assert list(rendered.file_vars) == list(dict.fromkeys(rendered.file_vars))
    assert rendered.runtime_vars == {} and rendered.omitted == []


def test_single_rtx_exactly_in_reference_order() -> None:
    rendered = render({"gpu_nodes": RTX})
    assert list(rendered.file_vars.items()) == list(
        {
            "cluster_name": "c1",
            **COMMON_HEAD,
            "gpu_nodes_preemptible": False,
            "mig_strategy": "none",
            "gpu_nodes_driverfull_image": True,
            "gpu_nodes_driver_preset": "cuda13.0",
            "custom_driver": False,
            "cpu_nodes_fixed_count": 0,
            "gpu_nodes_fixed_count_per_group": 1,
            "gpu_node_groups": 1,
            "gpu_nodes_platform": "gpu-rtx6000",
            "gpu_nodes_preset": "1gpu-24vcpu-218gb",
            "gpu_disk_size": "1023",
            "enable_gpu_cluster": False,
            **FILESTORE_OFF,
            **COMMON_TAIL,
            **APPS_OFF,
        }.items()
    )


def test_reserved_strict_pool_keeps_the_block_out_of_the_file() -> None:
    rendered = render({"gpu_nodes": {**RTX, "count": 3, "capacity_block_group": CBG}})
    assert rendered.runtime_vars == {
        "gpu_nodes_reservation_policy": {"policy": "STRICT", "reservation_ids": [CBG]},
    }
    assert "gpu_nodes_reservation_policy" not in rendered.file_vars
    assert CBG not in json.dumps(rendered.file_vars)
    # One node per group, so one stuck reservation slot cannot strand its siblings.
    assert (rendered.file_vars["gpu_nodes_fixed_count_per_group"], rendered.file_vars["gpu_node_groups"]) == (
        1,
        3,
    )


def test_clustered_h200() -> None:
    rendered = render(
        {
            "cpu_nodes": CPU,
            "gpu_nodes": {**H200, "capacity_block_group": CBG},
            "infiniband_fabric": "fabric-2",
            "gpu_disk_size_gib": 2048,
        }
    )
    file_vars = rendered.file_vars
    assert file_vars["enable_gpu_cluster"] is True
    assert file_vars["infiniband_fabric"] == "fabric-2"
    assert (file_vars["gpu_nodes_fixed_count_per_group"], file_vars["gpu_node_groups"]) == (2, 1)
    assert file_vars["gpu_disk_size"] == "2048"
    assert file_vars["gpu_nodes_driverfull_image"] is True
    assert "gpu_nodes_reservation_policy" in rendered.runtime_vars


def test_fabric_is_emitted_even_when_clustering_is_off() -> None:
    file_vars = render({"gpu_nodes": RTX, "infiniband_fabric": "fabric-2"}).file_vars
    assert file_vars["enable_gpu_cluster"] is False and file_vars["infiniband_fabric"] == "fabric-2"


def test_mig() -> None:
    rendered = render(
        {"cpu_nodes": CPU, "gpu_nodes": {**RTX, "count": 2, "capacity_block_group": CBG}, "mig": {}}
    )
    file_vars = rendered.file_vars
    assert file_vars["k8s_version"] == "1.34"
    assert file_vars["mig_strategy"] == "mixed"
    assert file_vars["custom_driver"] is True
    assert file_vars["gpu_nodes_driverfull_image"] is False
    assert "gpu_nodes_driver_preset" not in file_vars
    assert file_vars["mig_parted_config"] == "all-balanced"
    assert {name: file_vars[name] for name in MIG_RECIPE_VARIABLES} == {
        "gpu_operator_version": "v26.3.3",
        "gpu_driver_version": "580.173.02",
        "gpu_device_plugin_version": "v0.19.3",
        "gpu_gfd_version": "v0.19.3",
        "gpu_mig_manager_version": "v0.14.2",
        "gpu_mig_with_reboot": True,
        "gpu_operator_rdma_enabled": False,
    }
    assert file_vars["gpu_disk_size"] == "128"
    assert (file_vars["gpu_nodes_fixed_count_per_group"], file_vars["gpu_node_groups"]) == (1, 2)
    assert list(file_vars).index("mig_strategy") < list(file_vars).index("custom_driver")


def test_rtx_rendering_profile() -> None:
    file_vars = render(
        {
            "gpu_workload_profile": "rtx-rendering",
            "gpu_nodes": {"count": 2, "platform": "gpu-rtx6000-a", "preset": "8gpu-192vcpu-1744gb"},
            "gpu_driver_package_repositories": {"ubuntu.sources": "Types: deb"},
        }
    ).file_vars
    profile = file_vars["gpu_operator_rtx_driver_profile"]
    assert {k: profile[k] for k in ("platform", "preset", "package_repositories")} == {
        "platform": "gpu-rtx6000-a",
        "preset": "8gpu-192vcpu-1744gb",
        "package_repositories": {"ubuntu.sources": "Types: deb"},
    }
    # the operator values: exactly the zonal pool, RDMA off, the toolkit reads the config file, the
    # repositories through repoConfig's ConfigMap; and their revision
    assert profile["values"] == {
        "nebius": {
            "nvidiaDriverCRDPatch": {
                "profiles": [{"platform": "gpu-rtx6000-a", "preset": "8gpu-192vcpu-1744gb"}]
            }
        },
        "driver": {
            "rdma": {"enabled": False},
            "repoConfig": {"configMapName": "gpu-driver-package-repositories"},
        },
        "toolkit": {"env": [{"name": "RUNTIME_CONFIG_SOURCE", "value": "file"}]},
    }
    assert re.fullmatch(r"[0-9a-f]{64}", profile["revision"])
    assert file_vars["gpu_nodes_driverfull_image"] is False
    assert "gpu_nodes_driver_preset" not in file_vars
    assert file_vars["enable_gpu_cluster"] is False


def test_rtx_profile_defaults_the_pool() -> None:
    file_vars = render({"gpu_workload_profile": "rtx-rendering"}).file_vars
    profile = file_vars["gpu_operator_rtx_driver_profile"]
    assert (profile["platform"], profile["preset"]) == ("gpu-rtx6000", "1gpu-24vcpu-218gb")
    assert "package_repositories" not in profile and "repoConfig" not in profile["values"]["driver"]
    assert (file_vars["gpu_nodes_platform"], file_vars["gpu_nodes_fixed_count_per_group"]) == (
        "gpu-rtx6000",
        1,
    )


def test_kuberay_keeps_the_recipes_own_kuberay_off() -> None:
    """The fleet installs its reviewed template itself (components/kuberay.py): the recipe's vendor
    template is never switched on, and its inputs are never rendered."""
    file_vars = render({"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_replicas": 3}}).file_vars
    assert file_vars["enable_kuberay_cluster"] is False
    assert "kuberay_cpu_cluster" not in file_vars
    assert file_vars["enable_kuberay_service"] is False


def test_preemptible_gpu_pool() -> None:
    file_vars = render({"gpu_nodes": {**RTX, "preemptible": True}}).file_vars
    assert file_vars["gpu_nodes_preemptible"] is True
    assert file_vars["cpu_nodes_preemptible"] is False


def test_preemptible_cpu_pool() -> None:
    file_vars = render({"cpu_nodes": {**CPU, "preemptible": True}, "gpu_nodes": RTX}).file_vars
    assert file_vars["cpu_nodes_preemptible"] is True
    assert file_vars["gpu_nodes_preemptible"] is False


def test_filestore_and_chart_repository() -> None:
    file_vars = render(
        {
            "cpu_nodes": CPU,
            "enable_filestore": True,
            "filestore_disk_size_gibibytes": 2048,
            "filestore_mount_tag": "npa-shared-fs",
            "existing_filestore": "",
            "filesystem_csi_chart_repository": "oci://charts.example/csi",
        }
    ).file_vars
    assert file_vars["enable_filestore"] is True
    assert file_vars["existing_filestore"] == ""
    assert file_vars["filestore_disk_size_gibibytes"] == 2048
    assert file_vars["filestore_mount_tag"] == "npa-shared-fs"
    assert file_vars["filesystem_csi"] == {"chart_repository": "oci://charts.example/csi", **CSI}


def test_ssh_key_and_custom_cpu_disk() -> None:
    file_vars = render(
        {"cpu_nodes": {**CPU, "disk_size_gib": 64}}, ssh_public_key="ssh-ed25519 AAAA test"
    ).file_vars
    assert file_vars["ssh_public_key"] == {"key": "ssh-ed25519 AAAA test"}
    assert file_vars["cpu_disk_size"] == "64"
    assert file_vars["cpu_nodes_preset"] == CPU["preset"]  # a pool with nodes names its preset (spec rule)
    assert list(file_vars)[:2] == ["cluster_name", "ssh_public_key"]


def test_managed_driver_preset_is_configurable() -> None:
    assert (
        render({"gpu_nodes": RTX, "managed_driver_preset": "cuda12.8"}).file_vars["gpu_nodes_driver_preset"]
        == "cuda12.8"
    )


SHAPES: list[dict[str, Any]] = [
    {"cpu_nodes": CPU},
    {"gpu_nodes": {**RTX, "capacity_block_group": CBG}},
    {
        "cpu_nodes": CPU,
        "gpu_nodes": {**H200, "capacity_block_group": CBG},
        "infiniband_fabric": "f",
        "enable_filestore": True,
    },
    {"gpu_nodes": {**RTX, "count": 2, "capacity_block_group": CBG}, "mig": {}},
    {"gpu_workload_profile": "rtx-rendering", "gpu_driver_package_repositories": {"a.list": "deb a"}},
    {"cpu_nodes": CPU, "kuberay": {"enabled": True}},
    {"gpu_nodes": {**RTX, "preemptible": True}, "k8s_version": "1.33"},
]


@pytest.mark.parametrize("cluster", SHAPES)
def test_identity_is_never_rendered_and_every_name_is_on_the_surface(cluster: dict[str, Any]) -> None:
    rendered = render(cluster, ssh_public_key="ssh-ed25519 AAAA")
    names = set(rendered.file_vars) | set(rendered.runtime_vars)
    assert names <= set(RECIPE_VARIABLES)
    assert not names & set(IDENTITY_VARIABLES)
    assert CBG not in json.dumps(rendered.file_vars)
    assert "eu-north1" not in json.dumps(
        rendered.file_vars
    )  # the region is identity, passed as TF_VAR_region


def test_the_surface_has_no_duplicates_and_no_identity() -> None:
    assert len(RECIPE_VARIABLES) == len(set(RECIPE_VARIABLES))
    assert not set(RECIPE_VARIABLES) & set(IDENTITY_VARIABLES)


def test_soperator_targets_have_no_k8s_training_tfvars() -> None:
    target = target_of({"backend": "soperator", "soperator": {"workers": [{"name": "cpu"}]}})
    with pytest.raises(UserInputError, match="mk8s"):
        render_tfvars(target)


# --- recipe awareness ----------------------------------------------------------------------------------

CORE = {
    "cluster_name",
    "cpu_nodes_fixed_count",
    "cpu_nodes_platform",
    "cpu_nodes_preset",
    "cpu_disk_size",
    "gpu_nodes_fixed_count_per_group",
    "gpu_node_groups",
    "gpu_nodes_platform",
    "gpu_nodes_preset",
    "gpu_disk_size",
    "infiniband_fabric",
    "enable_filestore",
    "filestore_disk_size_gibibytes",
    "k8s_version",
    "ssh_public_key",
}


def test_variables_the_recipe_lacks_are_left_out_when_harmless() -> None:
    rendered = render(
        {"cpu_nodes": CPU, "gpu_nodes": RTX}, recipe_variables=CORE | {"gpu_nodes_driverfull_image"}
    )
    assert set(rendered.file_vars) <= CORE | {"gpu_nodes_driverfull_image"}
    assert "gpu_nodes_driver_preset" in rendered.omitted  # upstream hardcodes cuda13.0
    assert "loki" in rendered.omitted and "enable_grafana" in rendered.omitted
    assert rendered.file_vars["gpu_nodes_driverfull_image"] is True


def test_recipe_without_enable_gpu_cluster_turns_clustering_off_with_an_empty_fabric() -> None:
    rendered = render(
        {"gpu_nodes": RTX, "infiniband_fabric": "fabric-2"},
        recipe_variables=CORE | {"gpu_nodes_driverfull_image"},
    )
    assert rendered.file_vars["infiniband_fabric"] == ""
    assert "enable_gpu_cluster" in rendered.omitted


def test_recipe_without_enable_gpu_cluster_clusters_through_the_fabric() -> None:
    rendered = render(
        {"gpu_nodes": H200, "infiniband_fabric": "fabric-2"},
        recipe_variables=CORE | {"gpu_nodes_driverfull_image"},
    )
    assert rendered.file_vars["infiniband_fabric"] == "fabric-2"
    assert "enable_gpu_cluster" not in rendered.file_vars


@pytest.mark.parametrize(
    ("cluster", "missing"),
    [
        ({"gpu_nodes": {**RTX, "capacity_block_group": CBG}}, "gpu_nodes_reservation_policy"),
        (
            {"gpu_nodes": {**RTX, "count": 2, "capacity_block_group": CBG}, "mig": {}},
            "gpu_mig_manager_version",
        ),
        ({"gpu_workload_profile": "rtx-rendering"}, "gpu_operator_rtx_driver_profile"),
        ({"gpu_nodes": RTX, "managed_driver_preset": "cuda12.8"}, "gpu_nodes_driver_preset"),
        ({"gpu_nodes": {**RTX, "preemptible": True}}, "gpu_nodes_preemptible"),
        ({"cpu_nodes": {**CPU, "preemptible": True}}, "cpu_nodes_preemptible"),
        (
            {"cpu_nodes": CPU, "enable_filestore": True, "filestore_mount_tag": "shared"},
            "filestore_mount_tag",
        ),
        (
            {"cpu_nodes": CPU, "enable_filestore": True, "filestore_mount_path": "/data"},
            "filestore_mount_path",
        ),
        (
            {"cpu_nodes": CPU, "enable_filestore": True, "filesystem_csi_chart_repository": "oci://x/y"},
            "filesystem_csi",
        ),
        (
            {"cpu_nodes": CPU, "enable_filestore": True, "existing_filestore": "computefilesystem-x"},
            "existing_filestore",
        ),
    ],
)
def test_recipe_missing_a_needed_variable_is_an_error(cluster: dict[str, Any], missing: str) -> None:
    declared = set(RECIPE_VARIABLES) - {missing}
    with pytest.raises(RecipeError) as caught:
        render(cluster, recipe_variables=declared)
    assert missing in str(caught.value)
    assert caught.value.exit_code == 2
    assert CBG not in str(caught.value)


def test_recipe_without_driverfull_flag_cannot_honour_managed_image() -> None:
    with pytest.raises(RecipeError, match="gpu_nodes_driverfull_image"):
        render({"gpu_nodes": RTX}, recipe_variables=CORE)
    # The operator path needs no flag: the recipe's default is the in-cluster driver.
    rendered = render({"gpu_nodes": RTX, "gpu_driver_mode": "operator"}, recipe_variables=CORE)
    assert "gpu_nodes_driverfull_image" in rendered.omitted


def test_core_variables_are_always_needed() -> None:
    with pytest.raises(RecipeError, match="cpu_nodes_fixed_count"):
        render({"cpu_nodes": CPU}, recipe_variables={"cluster_name"})


def test_a_pinned_pool_renders_its_own_version_only_where_it_differs_from_the_cluster_s() -> None:
    """Issue 58: the default recipe's node groups take their pool's variable, else `k8s_version`; only a
    pinned pool held behind its control plane renders one."""
    held = render(
        {"k8s_version": "1.33", "cpu_nodes": CPU, "gpu_nodes": {**RTX, "pin": True, "version": "1.32"}}
    ).file_vars
    assert held["k8s_version"] == "1.33" and held["npa_fleet_gpu_nodes_version"] == "1.32"
    assert "npa_fleet_cpu_nodes_version" not in held  # unpinned: the cluster's version
    level = render(
        {"k8s_version": "1.33", "cpu_nodes": CPU, "gpu_nodes": {**RTX, "pin": True, "version": "1.33"}}
    ).file_vars
    assert not {"npa_fleet_cpu_nodes_version", "npa_fleet_gpu_nodes_version"} & set(level)
    pinned_alone = render({"k8s_version": "1.33", "cpu_nodes": {**CPU, "pin": True}}).file_vars
    assert "npa_fleet_cpu_nodes_version" not in pinned_alone  # a pin with no version: where it is now
    cpu_held = render({"k8s_version": "1.33", "cpu_nodes": {**CPU, "pin": True, "version": "1.31"}})
    assert cpu_held.file_vars["npa_fleet_cpu_nodes_version"] == "1.31"


def test_a_recipe_without_the_pool_version_variables_cannot_hold_a_pin() -> None:
    declared = set(RECIPE_VARIABLES) - {"npa_fleet_gpu_nodes_version"}
    with pytest.raises(RecipeError, match="npa_fleet_gpu_nodes_version"):
        render(
            {"k8s_version": "1.33", "gpu_nodes": {**RTX, "pin": True, "version": "1.32"}},
            recipe_variables=declared,
        )
    # Nothing held: the variable is not needed, and a recipe without it renders as before.
    assert (
        "npa_fleet_gpu_nodes_version"
        not in render({"k8s_version": "1.33", "gpu_nodes": RTX}, recipe_variables=declared).omitted
    )


@pytest.mark.parametrize(
    ("pool", "message"),
    [
        ({**RTX, "version": "1.32"}, "gpu_nodes.version '1.32' needs pin: true"),
        ({**RTX, "pin": True, "version": "1.32.4"}, "is not a Kubernetes minor in the Nebius format"),
        ({**RTX, "pin": True, "version": "1.34"}, "gpu_nodes.version 1.34 is newer than the cluster's"),
    ],
)
def test_a_pool_version_is_refused_at_its_path(pool: dict[str, Any], message: str) -> None:
    from npa_pulumi.spec import SpecError

    with pytest.raises(SpecError) as caught:
        target_of({"k8s_version": "1.33", "gpu_nodes": pool})
    (problem,) = caught.value.problems
    assert message in problem.message and problem.path.endswith("gpu_nodes.version")
