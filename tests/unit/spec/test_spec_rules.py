"""Every spec rule, accepted and rejected, with the exact spec path of the rejection (reference §2–§3)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from npa_pulumi.spec import FleetSpec, SpecError, SpecProblem, parse_spec

CPU = {"count": 1, "platform": "cpu-d3", "preset": "16vcpu-64gb"}
RTX = {"count": 1, "platform": "gpu-rtx6000", "preset": "1gpu-24vcpu-218gb"}
H200 = {"count": 2, "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"}
MIG_POOL = {**RTX, "count": 2, "capacity_block_group": "cbg-test"}
C = "projects[0].clusters[0]"


def fleet(
    cluster: dict[str, Any] | None = None,
    *,
    defaults: dict[str, Any] | None = None,
    projects: list[dict[str, Any]] | None = None,
    **top: Any,
) -> dict[str, Any]:
    doc: dict[str, Any] = {"apiVersion": "npa.fleet/v0.0.1", "name": "f", "region": "eu-north1"}
    if defaults is not None:
        doc["defaults"] = defaults
    doc["projects"] = projects if projects is not None else [{"name": "p", "clusters": [cluster or {}]}]
    doc.update(top)
    return doc


def parse(doc: dict[str, Any]) -> FleetSpec:
    return parse_spec(json.dumps(doc), "spec.yaml")  # JSON is YAML


def problems(doc: dict[str, Any]) -> list[SpecProblem]:
    with pytest.raises(SpecError) as caught:
        parse(doc)
    return caught.value.problems


def assert_rejected(doc: dict[str, Any], path: str, fragment: str) -> None:
    found = problems(doc)
    matching = [p for p in found if p.path == path and fragment in p.message]
    assert matching, f"expected {path!r} ~ {fragment!r}; got {[(p.path, p.message) for p in found]}"
    assert all(p.line is not None for p in found), "every problem from YAML carries a line"


REJECTED: list[tuple[str, dict[str, Any], str, str]] = [
    # kuberay (rule 1)
    (
        "kuberay-no-cpu",
        fleet({"gpu_nodes": RTX, "kuberay": {"enabled": True}}),
        f"{C}.kuberay",
        "nonempty CPU node pool",
    ),
    (
        "kuberay-cpu-preset",
        fleet({"cpu_nodes": {"count": 1, "preset": "big"}, "kuberay": {"enabled": True}}),
        f"{C}.cpu_nodes.preset",
        "explicit CPU platform and preset",
    ),
    (
        "kuberay-cpu-platform",
        fleet({"cpu_nodes": {**CPU, "platform": "CPU_D3"}, "kuberay": {"enabled": True}}),
        f"{C}.cpu_nodes.platform",
        "explicit CPU platform and preset",
    ),
    (
        "kuberay-settings-need-enabled",
        fleet({"cpu_nodes": CPU, "kuberay": {"worker_replicas": 2}}),
        f"{C}.kuberay",
        "require enabled: true",
    ),
    (
        "kuberay-disabled-settings",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": False, "worker_cpus": 1}}),
        f"{C}.kuberay",
        "require enabled: true",
    ),
    (
        "kuberay-bool-number",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_cpus": True}}),
        f"{C}.kuberay.worker_cpus",
        "must be an integer",
    ),
    (
        "kuberay-string-number",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_cpus": "2"}}),
        f"{C}.kuberay.worker_cpus",
        "must be an integer",
    ),
    (
        "kuberay-zero",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_replicas": 0}}),
        f"{C}.kuberay.worker_replicas",
        "positive integer",
    ),
    (
        "kuberay-enabled-not-bool",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": "true"}}),
        f"{C}.kuberay.enabled",
        "boolean",
    ),
    (
        "kuberay-pool-capacity",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_replicas": 8}}),
        f"{C}.kuberay",
        "exceeds the declared CPU pool",
    ),
    (
        "kuberay-worker-too-big",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": True, "worker_cpus": 17}}),
        f"{C}.kuberay",
        "exceeds one declared 16 vCPU/64 GiB CPU node",
    ),
    (
        "kuberay-head-too-big",
        fleet({"cpu_nodes": {**CPU, "preset": "2vcpu-2gb"}, "kuberay": {"enabled": True}}),
        f"{C}.cpu_nodes.preset",
        "head pod",
    ),
    (
        "kuberay-unknown-key",
        fleet({"cpu_nodes": CPU, "kuberay": {"enabled": True, "gpus": 1}}),
        f"{C}.kuberay.gpus",
        "unknown field 'gpus'",
    ),
    # backends (rule 2)
    (
        "backend-unknown",
        fleet({"cpu_nodes": CPU, "backend": "slurm"}),
        f"{C}.backend",
        "unsupported cluster backend",
    ),
    (
        "backend-unknown-default",
        fleet({"cpu_nodes": CPU}, defaults={"backend": "eks"}),
        "defaults.backend",
        "unsupported cluster backend 'eks'",
    ),
    (
        "mk8s-with-soperator-block",
        fleet({"cpu_nodes": CPU, "soperator": {"workers": [{"name": "w"}]}}),
        f"{C}.soperator",
        "not supported for backend 'mk8s'",
    ),
    (
        "envelope-mixed-with-flat",
        fleet({"backend": "mk8s", "mk8s": {"cpu_nodes": CPU}, "enable_filestore": True}),
        f"{C}.enable_filestore",
        "cannot be mixed",
    ),
    ("envelope-not-mapping", fleet({"backend": "mk8s", "mk8s": "yes"}), f"{C}.mk8s", "must be a mapping"),
    (
        "envelope-unknown-key",
        fleet({"mk8s": {"cpu_nodes": CPU, "enable_filestor": True}}),
        f"{C}.mk8s.enable_filestor",
        "unknown field",
    ),
    (
        "envelope-pool-unknown-key",
        fleet({"mk8s": {"cpu_nodes": {**CPU, "size": 2}}}),
        f"{C}.mk8s.cpu_nodes.size",
        "unknown field",
    ),
    (
        "soperator-with-flat",
        fleet({"backend": "soperator", "cpu_nodes": CPU, "soperator": {"workers": [{"name": "w"}]}}),
        f"{C}.cpu_nodes",
        "soperator cluster cannot have",
    ),
    # names (rule 3)
    ("cluster-name-too-long", fleet({"cpu_nodes": CPU, "name": "x" * 64}), f"{C}.name", "DNS-1123 label"),
    # package repositories (rule 4)
    (
        "repos-need-rtx",
        fleet({"gpu_nodes": RTX, "gpu_driver_package_repositories": {"a.list": "deb x"}}),
        f"{C}.gpu_driver_package_repositories",
        "require the RTX rendering profile",
    ),
    (
        "repos-bad-filename",
        fleet(
            {"gpu_workload_profile": "rtx-rendering", "gpu_driver_package_repositories": {"../x": "deb x"}}
        ),
        f'{C}.gpu_driver_package_repositories["../x"]',
        "file names",
    ),
    (
        "repos-dot-filename",
        fleet({"gpu_workload_profile": "rtx-rendering", "gpu_driver_package_repositories": {"..": "deb x"}}),
        f'{C}.gpu_driver_package_repositories[".."]',
        "file names",
    ),
    (
        "repos-empty-content",
        fleet({"gpu_workload_profile": "rtx-rendering", "gpu_driver_package_repositories": {"a.list": "  "}}),
        f'{C}.gpu_driver_package_repositories["a.list"]',
        "non-empty",
    ),
    (
        "repos-not-text",
        fleet({"gpu_workload_profile": "rtx-rendering", "gpu_driver_package_repositories": {"a.list": 3}}),
        f'{C}.gpu_driver_package_repositories["a.list"]',
        "must be a string",
    ),
    # nodes (rules 5–8)
    ("no-nodes", fleet({"cpu_nodes": {"count": 0}}), C, "at least one CPU or GPU node"),
    ("no-pools", fleet({}), C, "at least one CPU or GPU node"),
    (
        "negative-count",
        fleet({"cpu_nodes": {**CPU, "count": -1}, "gpu_nodes": RTX}),
        f"{C}.cpu_nodes.count",
        "cannot be negative",
    ),
    (
        "negative-disk",
        fleet({"gpu_nodes": {**RTX, "disk_size_gib": -5}}),
        f"{C}.gpu_nodes.disk_size_gib",
        "cannot be negative",
    ),
    (
        "cbg-on-cpu",
        fleet({"cpu_nodes": {**CPU, "capacity_block_group": "cbg-x"}}),
        f"{C}.cpu_nodes.capacity_block_group",
        "only valid for gpu_nodes",
    ),
    (
        "gpu-platform",
        fleet({"gpu_nodes": {**RTX, "platform": "cpu-d3"}}),
        f"{C}.gpu_nodes.platform",
        "must start with 'gpu-'",
    ),
    (
        "gpu-preset",
        fleet({"gpu_nodes": {**RTX, "preset": "24vcpu-218gb"}}),
        f"{C}.gpu_nodes.preset",
        "positive GPU count",
    ),
    (
        "gpu-preset-zero",
        fleet({"gpu_nodes": {**RTX, "preset": "0gpu-24vcpu-218gb"}}),
        f"{C}.gpu_nodes.preset",
        "positive GPU count",
    ),
    (
        "gpu-count-text",
        fleet({"gpu_nodes": {**RTX, "count": "two"}}),
        f"{C}.gpu_nodes.count",
        "must be an integer",
    ),
    ("gpu-count-bool", fleet({"gpu_nodes": {**RTX, "count": True}}), f"{C}.gpu_nodes.count", "not a boolean"),
    ("pool-not-mapping", fleet({"gpu_nodes": 3}), f"{C}.gpu_nodes", "must be a mapping"),
    # reservations (rules 9–10)
    (
        "cbg-without-gpus",
        fleet({"cpu_nodes": CPU, "gpu_nodes": {**RTX, "count": 0, "capacity_block_group": "cbg"}}),
        f"{C}.gpu_nodes.capacity_block_group",
        "requires a GPU node pool",
    ),
    (
        "cbg-preemptible",
        fleet({"gpu_nodes": {**RTX, "capacity_block_group": "cbg", "preemptible": True}}),
        f"{C}.gpu_nodes.preemptible",
        "cannot also be preemptible",
    ),
    # GPU clustering (rule 11)
    (
        "cluster-needs-8gpu",
        fleet({"gpu_nodes": RTX, "enable_gpu_cluster": True, "infiniband_fabric": "f"}),
        f"{C}.enable_gpu_cluster",
        "fabric-capable 8-GPU SXM/NVL preset",
    ),
    (
        "cluster-rtx-8gpu",
        fleet(
            {
                "gpu_nodes": {**RTX, "preset": "8gpu-192vcpu-1744gb"},
                "enable_gpu_cluster": True,
                "infiniband_fabric": "f",
            }
        ),
        f"{C}.enable_gpu_cluster",
        "fabric-capable",
    ),
    (
        "auto-cluster-needs-fabric",
        fleet({"gpu_nodes": H200}),
        f"{C}.infiniband_fabric",
        "requires 'infiniband_fabric'",
    ),
    (
        "explicit-cluster-needs-fabric",
        fleet({"gpu_nodes": H200, "enable_gpu_cluster": True}),
        f"{C}.infiniband_fabric",
        "requires 'infiniband_fabric'",
    ),
    (
        "cluster-flag-not-bool",
        fleet({"gpu_nodes": H200, "enable_gpu_cluster": "no"}),
        f"{C}.enable_gpu_cluster",
        "boolean",
    ),
    # filestore (rule 12)
    (
        "filestore-size",
        fleet({"cpu_nodes": CPU, "enable_filestore": True, "filestore_disk_size_gibibytes": 0}),
        f"{C}.filestore_disk_size_gibibytes",
        "must be positive",
    ),
    (
        "filestore-path",
        fleet({"cpu_nodes": CPU, "enable_filestore": True, "filestore_mount_path": "mnt"}),
        f"{C}.filestore_mount_path",
        "must be absolute",
    ),
    (
        "filestore-tag-comma",
        fleet({"cpu_nodes": CPU, "enable_filestore": True, "filestore_mount_tag": "a,b"}),
        f"{C}.filestore_mount_tag",
        "without whitespace or commas",
    ),
    (
        "filestore-tag-space",
        fleet({"cpu_nodes": CPU, "enable_filestore": True, "filestore_mount_tag": "a b"}),
        f"{C}.filestore_mount_tag",
        "without whitespace or commas",
    ),
    (
        "filestore-tag-empty",
        fleet({"cpu_nodes": CPU, "enable_filestore": True, "filestore_mount_tag": ""}),
        f"{C}.filestore_mount_tag",
        "non-empty",
    ),
    (
        "csi-repo-space",
        fleet({"cpu_nodes": CPU, "enable_filestore": True, "filesystem_csi_chart_repository": "oci://a b"}),
        f"{C}.filesystem_csi_chart_repository",
        "whitespace",
    ),
    # GPU disk (rule 13)
    (
        "gpu-disk-zero",
        fleet({"gpu_nodes": RTX, "gpu_disk_size_gib": 0}),
        f"{C}.gpu_disk_size_gib",
        "must be positive",
    ),
    # MIG (rule 14)
    (
        "mig-platform",
        fleet({"gpu_nodes": {**MIG_POOL, "platform": "gpu-h100"}, "mig": {}}),
        f"{C}.gpu_nodes.platform",
        "only for RTX PRO 6000",
    ),
    (
        "mig-preset",
        fleet({"gpu_nodes": {**MIG_POOL, "preset": "8gpu-192vcpu-1744gb"}, "mig": {}}),
        f"{C}.gpu_nodes.preset",
        "one-GPU preset",
    ),
    (
        "mig-count",
        fleet({"gpu_nodes": {**MIG_POOL, "count": 3}, "mig": {}}),
        f"{C}.gpu_nodes.count",
        "exactly two GPU workers",
    ),
    (
        "mig-cbg",
        fleet({"gpu_nodes": {**MIG_POOL, "capacity_block_group": ""}, "mig": {}}),
        f"{C}.gpu_nodes.capacity_block_group",
        "requires gpu_nodes.capacity_block_group",
    ),
    (
        "mig-disk",
        fleet({"gpu_nodes": {**MIG_POOL, "disk_size_gib": 256}, "mig": {}}),
        f"{C}.gpu_nodes.disk_size_gib",
        "128 GiB",
    ),
    (
        "mig-strategy",
        fleet({"gpu_nodes": MIG_POOL, "mig": {"strategy": "single"}}),
        f"{C}.mig.strategy",
        "must be 'mixed'",
    ),
    (
        "mig-config",
        fleet({"gpu_nodes": MIG_POOL, "mig": {"config": "all-1g.24gb"}}),
        f"{C}.mig.config",
        "must be 'all-balanced'",
    ),
    (
        "mig-k8s",
        fleet({"gpu_nodes": MIG_POOL, "mig": {}, "k8s_version": "1.33"}),
        f"{C}.k8s_version",
        "requires Kubernetes 1.34",
    ),
    (
        "mig-managed-image",
        fleet({"gpu_nodes": MIG_POOL, "mig": {}, "gpu_driver_mode": "managed-image"}),
        f"{C}.gpu_driver_mode",
        "incompatible",
    ),
    (
        "mig-needs-smoke",
        fleet({"gpu_nodes": MIG_POOL, "mig": {}, "gpu_cuda_smoke": False}),
        f"{C}.gpu_cuda_smoke",
        "gpu_cuda_smoke: true",
    ),
    (
        "mig-enabled-not-bool",
        fleet({"gpu_nodes": MIG_POOL, "mig": {"enabled": "true"}}),
        f"{C}.mig.enabled",
        "boolean",
    ),
    (
        "mig-strategy-not-text",
        fleet({"gpu_nodes": MIG_POOL, "mig": {"strategy": 1}}),
        f"{C}.mig.strategy",
        "must be a string",
    ),
    (
        "mig-unknown-key",
        fleet({"gpu_nodes": MIG_POOL, "mig": {"profile": "x"}}),
        f"{C}.mig.profile",
        "unknown field",
    ),
    (
        "mig-disabled-strategy",
        fleet({"gpu_nodes": RTX, "mig": {"enabled": False, "strategy": "mixed"}}),
        f"{C}.mig",
        "disabled MIG requires strategy 'none'",
    ),
    ("mig-not-mapping", fleet({"gpu_nodes": MIG_POOL, "mig": True}), f"{C}.mig", "must be a mapping"),
    # driver strategy (rule 15)
    (
        "driver-mode",
        fleet({"gpu_nodes": RTX, "gpu_driver_mode": "bundled"}),
        f"{C}.gpu_driver_mode",
        "unsupported GPU driver mode",
    ),
    (
        "driver-mode-cpu-only",
        fleet({"cpu_nodes": CPU, "gpu_driver_mode": "bundled"}),
        f"{C}.gpu_driver_mode",
        "unsupported GPU driver mode",
    ),
    (
        "driver-preset",
        fleet({"gpu_nodes": RTX, "managed_driver_preset": "-cuda"}),
        f"{C}.managed_driver_preset",
        "letter or digit",
    ),
    (
        "operator-on-nvswitch-cluster",
        fleet({"gpu_nodes": H200, "infiniband_fabric": "f", "gpu_driver_mode": "operator"}),
        f"{C}.gpu_driver_mode",
        "unsafe for this NVSwitch topology",
    ),
    (
        "operator-on-nvswitch-single-node",
        fleet(
            {"gpu_nodes": {**H200, "count": 1}, "enable_gpu_cluster": False, "gpu_driver_mode": "operator"}
        ),
        f"{C}.gpu_driver_mode",
        "unsafe for this NVSwitch topology",
    ),
    # health (rule 16)
    (
        "health-stabilization",
        fleet({"gpu_nodes": RTX, "gpu_health_stabilization_seconds": -1}),
        f"{C}.gpu_health_stabilization_seconds",
        "cannot be negative",
    ),
    (
        "health-timeout",
        fleet({"gpu_nodes": RTX, "gpu_health_timeout_minutes": 0}),
        f"{C}.gpu_health_timeout_minutes",
        "must be positive",
    ),
    (
        "health-smoke-image",
        fleet({"gpu_nodes": RTX, "gpu_cuda_smoke_image": "   "}),
        f"{C}.gpu_cuda_smoke_image",
        "cannot be empty",
    ),
    # RTX rendering profile (§3.5)
    (
        "rtx-unknown-profile",
        fleet({"gpu_nodes": RTX, "gpu_workload_profile": "gaming"}),
        f"{C}.gpu_workload_profile",
        "unsupported GPU workload profile",
    ),
    (
        "rtx-zero-gpus",
        fleet({"cpu_nodes": CPU, "gpu_nodes": {"count": 0}, "gpu_workload_profile": "rtx-rendering"}),
        f"{C}.gpu_nodes.count",
        "at least one GPU node",
    ),
    (
        "rtx-platform",
        fleet({"gpu_nodes": {**RTX, "platform": "gpu-h100-sxm"}, "gpu_workload_profile": "rtx-rendering"}),
        f"{C}.gpu_nodes.platform",
        "requires platform",
    ),
    (
        "rtx-platform-suffix",
        fleet(
            {"gpu_nodes": {**RTX, "platform": "gpu-rtx6000-preview"}, "gpu_workload_profile": "rtx-rendering"}
        ),
        f"{C}.gpu_nodes.platform",
        "requires platform",
    ),
    (
        "rtx-preset",
        fleet({"gpu_nodes": {**RTX, "preset": "2gpu-48vcpu-436gb"}, "gpu_workload_profile": "rtx-rendering"}),
        f"{C}.gpu_nodes.preset",
        "RTX PRO 6000 preset",
    ),
    (
        "rtx-managed-image",
        fleet({"gpu_workload_profile": "rtx-rendering", "gpu_driver_mode": "managed-image"}),
        f"{C}.gpu_driver_mode",
        "GPU Operator driver",
    ),
    (
        "graphics-image-by-tag",
        fleet(
            {
                "gpu_workload_profile": "rtx-rendering",
                "gpu_graphics_smoke_image": "nvcr.io/nvidia/cuda:13.0.1-runtime-ubuntu24.04",
            }
        ),
        f"{C}.gpu_graphics_smoke_image",
        "must be pinned by digest",
    ),
    (
        "graphics-image-short-digest",
        fleet(
            {"gpu_workload_profile": "rtx-rendering", "gpu_graphics_smoke_image": "r.example/g@sha256:abc"}
        ),
        f"{C}.gpu_graphics_smoke_image",
        "must be pinned by digest",
    ),
    (
        "graphics-image-upper-hex",
        fleet(
            {
                "gpu_workload_profile": "rtx-rendering",
                "gpu_graphics_smoke_image": "r.example/g@sha256:" + "A" * 64,
            }
        ),
        f"{C}.gpu_graphics_smoke_image",
        "must be pinned by digest",
    ),
    # types
    (
        "bool-as-text",
        fleet({"cpu_nodes": CPU, "enable_filestore": "true"}),
        f"{C}.enable_filestore",
        "boolean",
    ),
    (
        "text-as-list",
        fleet({"cpu_nodes": CPU, "infiniband_fabric": ["a"]}),
        f"{C}.infiniband_fabric",
        "must be text",
    ),
]


@pytest.mark.parametrize(("doc", "path", "fragment"), [r[1:] for r in REJECTED], ids=[r[0] for r in REJECTED])
def test_cluster_rule_rejects_with_exact_path(doc: dict[str, Any], path: str, fragment: str) -> None:
    assert_rejected(doc, path, fragment)


ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("cpu-only", {"cpu_nodes": CPU}),
    ("gpu-only", {"gpu_nodes": RTX}),
    ("empty-gpu-pool-is-none", {"cpu_nodes": CPU, "gpu_nodes": {}}),
    (
        "kuberay-fits",
        {
            "cpu_nodes": CPU,
            "kuberay": {"enabled": True, "worker_replicas": 2, "worker_cpus": 2, "worker_memory_gib": 4},
        },
    ),
    (
        "kuberay-exact-fit",
        {
            "cpu_nodes": {**CPU, "count": 2},
            "kuberay": {"enabled": True, "worker_replicas": 3, "worker_cpus": 10, "worker_memory_gib": 40},
        },
    ),
    ("kuberay-disabled", {"cpu_nodes": CPU, "kuberay": {"enabled": False}}),
    ("cbg-strict", {"gpu_nodes": {**RTX, "capacity_block_group": "cbg-x"}}),
    ("preemptible-on-demand", {"gpu_nodes": {**RTX, "preemptible": True}}),
    ("h200-cluster", {"gpu_nodes": H200, "infiniband_fabric": "fabric-2"}),
    ("h200-no-cluster-managed", {"gpu_nodes": H200, "enable_gpu_cluster": False}),
    (
        "nvswitch-operator-acknowledged",
        {
            "gpu_nodes": H200,
            "infiniband_fabric": "f",
            "gpu_driver_mode": "operator",
            "allow_unsafe_nvswitch_operator": True,
        },
    ),
    ("operator-on-pcie", {"gpu_nodes": RTX, "gpu_driver_mode": "operator"}),
    ("operator-upper-case", {"gpu_nodes": RTX, "gpu_driver_mode": "Operator"}),
    ("mig", {"gpu_nodes": MIG_POOL, "mig": {"enabled": True, "strategy": "Mixed", "config": "all-balanced"}}),
    ("mig-compact", {"gpu_nodes": {**MIG_POOL, "disk_size_gib": 128}, "mig": {}, "k8s_version": "1.34"}),
    ("mig-disabled", {"gpu_nodes": RTX, "mig": {"enabled": False}}),
    ("rtx-no-pool", {"gpu_workload_profile": "rtx-rendering"}),
    (
        "rtx-own-graphics-image",
        {
            "gpu_workload_profile": "rtx-rendering",
            "gpu_graphics_smoke_image": "registry.example:5000/team/render-probe:v2@sha256:" + "0f" * 32,
        },
    ),
    (
        "rtx-zonal-8gpu",
        {
            "gpu_workload_profile": "rtx-rendering",
            "gpu_nodes": {"count": 2, "platform": "gpu-rtx6000-a", "preset": "8gpu-192vcpu-1744gb"},
        },
    ),
    (
        "rtx-repos",
        {
            "gpu_workload_profile": "rtx-rendering",
            "gpu_driver_package_repositories": {
                "ubuntu.sources": "Types: deb\nURIs: https://archive.ubuntu.com/ubuntu\n"
            },
        },
    ),
    (
        "filestore-off-ignores-mount",
        {"cpu_nodes": CPU, "enable_filestore": False, "filestore_mount_path": "x"},
    ),
    (
        "filestore-existing",
        {"cpu_nodes": CPU, "enable_filestore": True, "existing_filestore": "computefilesystem-x"},
    ),
    ("numbers-as-text", {"cpu_nodes": {**CPU, "count": "2"}, "k8s_version": 1.34}),
    ("nulls-are-unset", {"cpu_nodes": {**CPU, "disk_size_gib": None}, "k8s_version": None, "mig": None}),
]


@pytest.mark.parametrize("cluster", [a[1] for a in ACCEPTED], ids=[a[0] for a in ACCEPTED])
def test_cluster_rule_accepts(cluster: dict[str, Any]) -> None:
    spec = parse(fleet(cluster))
    assert len(spec.projects[0].clusters) == 1


PROJECT_AND_FLEET_REJECTED: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "api-version",
        fleet({"cpu_nodes": CPU}, apiVersion="npa.fleet/v0.0.2"),
        "apiVersion",
        "unsupported apiVersion",
    ),
    (
        "fleet-name-missing",
        {k: v for k, v in fleet({"cpu_nodes": CPU}).items() if k != "name"},
        "name",
        "DNS-1123 label",
    ),
    ("fleet-name-too-long", fleet({"cpu_nodes": CPU}, name="f" * 64), "name", "DNS-1123 label"),
    ("projects-missing", {"name": "f"}, "projects", "non-empty list"),
    ("projects-empty", fleet(projects=[]), "projects", "non-empty list"),
    ("projects-not-list", fleet(projects={"name": "a"}), "projects", "must be a list"),  # type: ignore[arg-type]
    ("project-not-mapping", fleet(projects=["a"]), "projects[0]", "must be a mapping"),  # type: ignore[list-item]
    ("defaults-not-mapping", fleet({"cpu_nodes": CPU}, defaults=["x"]), "defaults", "must be a mapping"),  # type: ignore[arg-type]
    (
        "project-needs-name-or-id",
        fleet(projects=[{"clusters": [{"cpu_nodes": CPU}]}]),
        "projects[0]",
        "needs a 'name' or 'project_id'",
    ),
    (
        "project-name-label",
        fleet(projects=[{"name": "!!!", "clusters": [{"cpu_nodes": CPU}]}]),
        "projects[0].name",
        "not a valid label",
    ),
    (
        "project-clusters-empty",
        fleet(projects=[{"name": "a", "clusters": []}]),
        "projects[0].clusters",
        "non-empty list",
    ),
    (
        "project-cluster-not-mapping",
        fleet(projects=[{"name": "a", "clusters": ["train"]}]),
        "projects[0].clusters[0]",
        "must be a mapping",
    ),
    (
        "duplicate-project-key",
        fleet(
            projects=[
                {"name": "a", "clusters": [{"cpu_nodes": CPU}]},
                {"name": "A", "clusters": [{"cpu_nodes": CPU}]},
            ]
        ),
        "projects[1].name",
        "duplicate project key 'a'",
    ),
    (
        "duplicate-cluster-name",
        fleet(
            projects=[
                {"name": "a", "clusters": [{"name": "x", "cpu_nodes": CPU}, {"name": "X", "cpu_nodes": CPU}]}
            ]
        ),
        "projects[0].clusters[1].name",
        "duplicate cluster name 'x'",
    ),
    (
        "storage-disabled-size",
        fleet(
            projects=[
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU}],
                    "object_storage": {"enabled": False, "size_gibibytes": 5},
                }
            ]
        ),
        "projects[0].object_storage.size_gibibytes",
        "must be enabled",
    ),
    (
        "storage-disabled-bucket",
        fleet(
            projects=[
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU}],
                    "object_storage": {"enabled": False, "bucket_name": "b"},
                }
            ]
        ),
        "projects[0].object_storage.bucket_name",
        "must be enabled",
    ),
    (
        "storage-class",
        fleet(
            projects=[
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU}],
                    "object_storage": {"storage_class": "cold", "size_gibibytes": 5},
                }
            ]
        ),
        "projects[0].object_storage.storage_class",
        "unsupported storage class",
    ),
    (
        "storage-size",
        fleet(projects=[{"name": "a", "clusters": [{"cpu_nodes": CPU}], "object_storage": {}}]),
        "projects[0].object_storage.size_gibibytes",
        "must be positive",
    ),
    (
        "storage-bucket-name",
        fleet(
            projects=[
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU}],
                    "object_storage": {"size_gibibytes": 5, "bucket_name": "My_Bucket"},
                }
            ]
        ),
        "projects[0].object_storage.bucket_name",
        "DNS-style",
    ),
    (
        "storage-unknown-key",
        fleet(
            projects=[
                {
                    "name": "a",
                    "clusters": [{"cpu_nodes": CPU}],
                    "object_storage": {"size_gibibytes": 5, "class": "standard"},
                }
            ]
        ),
        "projects[0].object_storage.class",
        "unknown field",
    ),
    (
        "storage-not-mapping",
        fleet(projects=[{"name": "a", "clusters": [{"cpu_nodes": CPU}], "object_storage": "yes"}]),
        "projects[0].object_storage",
        "must be a mapping",
    ),
    (
        "stack-name-too-long",
        fleet(
            projects=[{"name": "p" * 40, "clusters": [{"name": "c" * 40, "cpu_nodes": CPU}]}], name="f" * 30
        ),
        "projects[0].clusters[0].name",
        "Pulumi allows at most 100",
    ),
    (
        "project-stack-name-too-long",
        fleet(projects=[{"project_id": "project-" + "e" * 95, "clusters": [{"cpu_nodes": CPU}]}]),
        "projects[0].project_id",
        "Pulumi allows at most 100",
    ),
    (
        "stack-name-characters",
        fleet(projects=[{"name": "café", "clusters": [{"cpu_nodes": CPU}]}]),
        "projects[0].name",
        "may only contain",
    ),
]


@pytest.mark.parametrize(
    ("doc", "path", "fragment"),
    [r[1:] for r in PROJECT_AND_FLEET_REJECTED],
    ids=[r[0] for r in PROJECT_AND_FLEET_REJECTED],
)
def test_project_and_fleet_rule_rejects_with_exact_path(
    doc: dict[str, Any], path: str, fragment: str
) -> None:
    assert_rejected(doc, path, fragment)


SOPERATOR_WORKER = {"name": "cpu", "platform": "cpu-d3", "preset": "16vcpu-64gb", "size": 2}


def soperator(payload: dict[str, Any], name: str = "slurm") -> dict[str, Any]:
    return {"name": name, "backend": "soperator", "soperator": payload}


SOPERATOR_REJECTED: list[tuple[str, dict[str, Any], str, str]] = [
    ("no-workers", soperator({}), f"{C}.soperator.workers", "at least one worker pool"),
    (
        "worker-size",
        soperator({"workers": [{**SOPERATOR_WORKER, "size": 0}]}),
        f"{C}.soperator.workers[0].size",
        ">= 1",
    ),
    (
        "worker-name",
        soperator({"workers": [{**SOPERATOR_WORKER, "name": "a_b"}]}),
        f"{C}.soperator.workers[0].name",
        "alphanumeric/dash",
    ),
    (
        "worker-duplicate",
        soperator({"workers": [SOPERATOR_WORKER, SOPERATOR_WORKER]}),
        f"{C}.soperator.workers[1].name",
        "duplicate worker pool name",
    ),
    (
        "gpu-worker-fabric",
        soperator({"workers": [{"name": "g", "platform": "gpu-h200-sxm", "preset": "8gpu-128vcpu-1600gb"}]}),
        f"{C}.soperator.workers[0].fabric",
        "requires a non-empty 'fabric'",
    ),
    (
        "cpu-worker-fabric",
        soperator({"workers": [{**SOPERATOR_WORKER, "fabric": "f"}]}),
        f"{C}.soperator.workers[0].fabric",
        "must not set 'fabric'",
    ),
    (
        "docker-cache",
        soperator({"workers": [{**SOPERATOR_WORKER, "docker_cache": True, "docker_cache_gib": 100}]}),
        f"{C}.soperator.workers[0].docker_cache_gib",
        "divisible by 93",
    ),
    (
        "boot-disk",
        soperator({"workers": [{**SOPERATOR_WORKER, "boot_disk_gib": 100}]}),
        f"{C}.soperator.workers[0].boot_disk_gib",
        ">= 512",
    ),
    (
        "worker-unknown-key",
        soperator({"workers": [{**SOPERATOR_WORKER, "nodes": 2}]}),
        f"{C}.soperator.workers[0].nodes",
        "unknown field",
    ),
    (
        "identity-tenant",
        soperator({"tenant_id": "t", "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.tenant_id",
        "target identity",
    ),
    (
        "identity-subnet",
        soperator({"subnet_id": "", "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.subnet_id",
        "target identity",
    ),
    (
        "payload-unknown-key",
        soperator({"partitions": [], "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.partitions",
        "unknown field",
    ),
    (
        "control-plane-role",
        soperator({"control_plane": {"worker": {}}, "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.control_plane.worker",
        "unknown field",
    ),
    (
        "control-plane-size-only-system",
        soperator({"control_plane": {"login": {"min_size": 2}}, "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.control_plane.login.min_size",
        "unknown field",
    ),
    (
        "system-min-size",
        soperator({"control_plane": {"system": {"min_size": 2}}, "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.control_plane.system.min_size",
        ">= 3",
    ),
    (
        "embedded-name",
        soperator({"name": "other", "workers": [SOPERATOR_WORKER]}),
        f"{C}.soperator.name",
        "must match the fleet target name",
    ),
    ("payload-not-mapping", soperator("x"), f"{C}.soperator", "must be a mapping"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("cluster", "path", "fragment"),
    [r[1:] for r in SOPERATOR_REJECTED],
    ids=[r[0] for r in SOPERATOR_REJECTED],
)
def test_soperator_rule_rejects_with_exact_path(cluster: dict[str, Any], path: str, fragment: str) -> None:
    assert_rejected(fleet(cluster), path, fragment)


def test_soperator_names_are_unique_across_the_fleet() -> None:
    payload = {"workers": [SOPERATOR_WORKER]}
    doc = fleet(
        projects=[
            {"name": "a", "clusters": [soperator(payload)]},
            {"name": "b", "clusters": [soperator(payload)]},
        ]
    )
    assert_rejected(doc, "projects[1].clusters[0].name", "duplicate soperator cluster name 'slurm'")


def test_mk8s_cluster_names_may_repeat_across_projects() -> None:
    doc = fleet(
        projects=[
            {"name": "a", "clusters": [{"name": "x", "cpu_nodes": CPU}]},
            {"name": "b", "clusters": [{"name": "x", "cpu_nodes": CPU}]},
        ]
    )
    assert [c.name for _, c in parse(doc).cluster_targets()] == ["x", "x"]


def test_a_valid_soperator_cluster_is_accepted() -> None:
    spec = parse(
        fleet(
            soperator(
                {
                    "workers": [
                        SOPERATOR_WORKER,
                        {
                            "name": "gpu",
                            "platform": "gpu-h200-sxm",
                            "preset": "8gpu-128vcpu-1600gb",
                            "fabric": "f",
                        },
                    ]
                }
            )
        )
    )
    cluster = spec.projects[0].clusters[0]
    assert cluster.backend == "soperator"
    assert cluster.soperator is not None and [w.name for w in cluster.soperator.workers] == ["cpu", "gpu"]


def test_every_problem_is_reported_not_just_the_first() -> None:
    doc = fleet(
        projects=[
            {
                "name": "a",
                "clusters": [{"gpu_nodes": {**RTX, "platform": "cpu-x"}, "gpu_health_timeout_minutes": 0}],
            },
            {"name": "b", "clusters": [{"cpu_nodes": {**CPU, "count": -2}}], "object_storage": {}},
        ],
        apiVersion="v1",
    )
    paths = {p.path for p in problems(doc)}
    assert {
        "apiVersion",
        "projects[0].clusters[0].gpu_nodes.platform",
        "projects[0].clusters[0].gpu_health_timeout_minutes",
        "projects[1].clusters[0].cpu_nodes.count",
        "projects[1].object_storage.size_gibibytes",
    } <= paths


def test_problems_never_echo_a_capacity_block_id() -> None:
    secret = "capacityblockgroup-e00secret"
    doc = fleet({"gpu_nodes": {**RTX, "capacity_block_group": secret, "preemptible": True, "count": "x"}})
    text = json.dumps([p.model_dump() for p in problems(doc)])
    assert secret not in text
    doc = fleet({"cpu_nodes": {**CPU, "capacity_block_group": secret}})
    found = problems(doc)
    assert found and secret not in json.dumps([p.model_dump() for p in found])


def test_the_graphics_image_is_set_per_cluster_or_defaulted_by_digest() -> None:
    """`gpu_graphics_smoke_image` is a cluster (or `defaults`) field; unset, the digest-pinned default."""
    from npa_pulumi.spec import constants

    own = "registry.example/render-probe@sha256:" + "1" * 64
    spec = parse(fleet({"gpu_workload_profile": "rtx-rendering", "gpu_graphics_smoke_image": own}))
    assert spec.projects[0].clusters[0].gpu_graphics_smoke_image == own
    default = parse(fleet({"gpu_workload_profile": "rtx-rendering"})).projects[0].clusters[0]
    assert default.gpu_graphics_smoke_image == constants.DEFAULT_GRAPHICS_SMOKE_IMAGE
    assert "@sha256:" in default.gpu_graphics_smoke_image
