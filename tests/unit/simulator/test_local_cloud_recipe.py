"""Static checks of the stand-in recipe: its variable surface, its filesystem facts, built-in features only,
and IDs derived the same way in HCL as in the simulator."""

from __future__ import annotations

import re
from pathlib import Path

import hcl2

from npa_pulumi.plan import IDENTITY_VARIABLES, RECIPE_VARIABLES, RUNTIME_VARIABLES, read_recipe_variables
from npa_pulumi.simulator import ids

RECIPE = Path(__file__).resolve().parents[3] / "recipes" / "local-k8s-training"

# The upstream V3/V4 surface and the extras the brief lists, declared whether or not the renderer emits them.
UPSTREAM_AND_EXTRAS = frozenset(
    {
        "tenant_id",
        "parent_id",
        "subnet_id",
        "region",
        "iam_token",
        "cluster_name",
        "k8s_version",
        "etcd_cluster_size",
        "enable_egress_gateway",
        "enable_filestore",
        "existing_filestore",
        "filestore_disk_type",
        "filestore_disk_size_gibibytes",
        "filestore_block_size_kibibytes",
        "filestore_forbid_deletion",
        "filestore_mount_path",
        "ssh_user_name",
        "ssh_public_key",
        "node_group_strategy",
        "cpu_nodes_fixed_count",
        "cpu_nodes_platform",
        "cpu_nodes_preset",
        "cpu_disk_type",
        "cpu_disk_size",
        "gpu_nodes_fixed_count_per_group",
        "gpu_nodes_autoscaling",
        "cpu_nodes_autoscaling",
        "gpu_node_groups",
        "gpu_nodes_platform",
        "gpu_nodes_driverfull_image",
        "gpu_dra",
        "gpu_nodes_preset",
        "gpu_nodes_reservation_policy",
        "gb300",
        "gpu_disk_type",
        "gpu_disk_size",
        "infiniband_fabric",
        "gpu_nodes_public_ips",
        "enable_gpu_kubelet_numa",
        "gpu_kubelet_numa_config",
        "gpu_kubelet_numa_preset",
        "cpu_nodes_public_ips",
        "mk8s_cluster_public_endpoint",
        "enable_k8s_node_group_sa",
        "mig_parted_config",
        "gpu_enable_local_disks",
        "enable_nebius_o11y_agent",
        "collectK8sClusterMetrics",
        "enable_grafana",
        "loki",
        "enable_prometheus",
        "loki_access_key_id",
        "loki_secret_key",
        "loki_custom_replication_factor",
        "test_mode",
        "nccl_test_image",
        "enable_kuberay_cluster",
        "enable_kuberay_service",
        "kuberay_cpu_worker_image",
        "kuberay_gpu_worker_image",
        "kuberay_min_cpu_replicas",
        "kuberay_max_cpu_replicas",
        "kuberay_min_gpu_replicas",
        "kuberay_max_gpu_replicas",
        "kuberay_cpu_resources",
        "kuberay_gpu_resources",
        "kuberay_serve_config_v2",
        "mig_strategy",
        "gpu_operator_toolkit_restart_mode",
        "gpu_operator_toolkit_config_source",
        "mig_reconciler_kubectl_version",
        "cpu_nodes_preemptible",
        "gpu_nodes_preemptible",
        "custom_driver",
        "filesystem_csi",
        "opa_gatekeeper_enable",
        "k8s_rbac_bindings",
        "binpacking_enable",
        "binpacking_kube_sched_ver",
        "binpacking_forced_namespaces",
        "kueue",
        "gpu_nodes_driver_preset",
        "enable_gpu_cluster",
        "gpu_operator_rtx_driver_profile",
        "gpu_operator_version",
        "gpu_driver_version",
        "gpu_device_plugin_version",
        "gpu_gfd_version",
        "gpu_mig_manager_version",
        "gpu_mig_with_reboot",
        "gpu_operator_rdma_enabled",
        "kuberay_cpu_cluster",
        "enable_opa_gatekeeper",
        "filestore_mount_tag",
    }
)


def _tf_text() -> str:
    return "\n".join(path.read_text() for path in sorted(RECIPE.glob("*.tf")))


def test_every_variable_the_renderer_can_emit_is_declared() -> None:
    declared = read_recipe_variables(RECIPE)
    assert set(RECIPE_VARIABLES) - declared == set()
    assert set(RUNTIME_VARIABLES) - declared == set()
    assert set(IDENTITY_VARIABLES) - declared == set()


def test_the_upstream_surface_and_the_extras_are_declared() -> None:
    assert UPSTREAM_AND_EXTRAS - read_recipe_variables(RECIPE) == set()


def test_filesystem_tf_holds_the_mount_settings_statically() -> None:
    parsed = hcl2.loads((RECIPE / "filesystem.tf").read_text())
    found: dict[str, object] = {}
    for block in parsed["locals"]:
        found.update(block)
    mount = found["filesystem_mount"]
    attachments = found["filesystem_attachments"]
    assert isinstance(mount, dict) and isinstance(attachments, list)

    def plain(value: object) -> str:
        return str(value).strip('"')

    assert plain(mount["fs_type"]) == "virtiofs"
    assert "nofail" in plain(mount["options"]).split(",")
    assert plain(mount["path"]) == "${var.filestore_mount_path}"
    assert plain(mount["tag"]) == "${var.filestore_mount_tag}"
    assert sorted(plain(a["node_group"]) for a in attachments) == ["cpu", "gpu"]
    assert {plain(a["attach_mode"]) for a in attachments} == {"READ_WRITE"}
    assert {plain(a["mount_tag"]) for a in attachments} == {"${var.filestore_mount_tag}"}


def test_only_built_in_terraform_features() -> None:
    text = _tf_text()
    assert not re.search(r'^\s*(provider|module|data)\s+"', text, re.MULTILINE)
    assert "required_providers" not in text
    resource_types = set(re.findall(r'^\s*resource\s+"([^"]+)"', text, re.MULTILINE))
    assert resource_types == {"terraform_data"}


def test_ids_are_derived_in_hcl_exactly_as_the_simulator_derives_them() -> None:
    text = _tf_text()
    derived = re.findall(r'"(\w+)-e00\$\{substr\(sha256\("(\w+)/\$\{[^}]+\}"\), 0, (\d+)\)\}"', text)
    prefixes = {prefix for prefix, _, _ in derived}
    assert prefixes == {ids.CLUSTER, ids.NODE_GROUP, ids.FILESYSTEM, ids.GPU_CLUSTER}
    for prefix, hashed_prefix, length in derived:
        assert hashed_prefix == prefix
        assert int(length) == ids.ID_BODY_LENGTH


def test_provisioners_call_the_simulator_through_npa_python() -> None:
    commands = re.findall(r'command\s*=\s*"(.*)"', _tf_text())
    assert commands
    for command in commands:
        assert command.startswith(
            r"\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api"
        ) or command.startswith("${local.npa_api}")
    assert r'"\"$${NPA_PYTHON:-python3}\" -m npa_pulumi.simulator.api"' in _tf_text()
