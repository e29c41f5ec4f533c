"""The plan document (`plan --output json`): required keys, counts, and nothing private in it."""

from __future__ import annotations

import json
from typing import Any

from npa_pulumi.plan import plan_document, render_plan_text, resolve_targets
from npa_pulumi.spec import FleetSpec, parse_spec

CBG = "capacityblockgroup-e00private"
CHART = "oci://registry.private.example/charts"
REPO_TEXT = "deb https://mirror.private.example/ubuntu noble main"

SPEC: dict[str, Any] = {
    "apiVersion": "npa.fleet/v0.0.1",
    "name": "demo",
    "region": "eu-north1",
    "project_prefix": "demo-",
    "defaults": {
        "cpu_nodes": {"count": 1, "platform": "cpu-d3", "preset": "16vcpu-64gb"},
        "enable_filestore": True,
        "filesystem_csi_chart_repository": CHART,
    },
    "projects": [
        {
            "name": "a",
            "object_storage": {"storage_class": "enhanced", "size_gibibytes": 1024},
            "clusters": [
                {
                    "name": "train",
                    "gpu_nodes": {
                        "count": 2,
                        "platform": "gpu-rtx6000",
                        "preset": "1gpu-24vcpu-218gb",
                        "capacity_block_group": CBG,
                    },
                    "mig": {},
                },
                {
                    "name": "render",
                    "gpu_workload_profile": "rtx-rendering",
                    "gpu_driver_package_repositories": {"mirror.list": REPO_TEXT},
                },
            ],
        },
        {
            "project_id": "project-e00existing",
            "clusters": [
                {"name": "ray", "kuberay": {"enabled": True}},
                {
                    "name": "slurm",
                    "backend": "soperator",
                    "soperator": {"workers": [{"name": "cpu", "size": 2}]},
                },
            ],
        },
    ],
}


def spec() -> FleetSpec:
    return parse_spec(json.dumps(SPEC))


def document(**selection: Any) -> dict[str, Any]:
    fleet = spec()
    return plan_document(fleet, resolve_targets(fleet, **selection))


def test_required_keys() -> None:
    doc = document()
    assert {
        "name",
        "tenant_id",
        "region",
        "project_prefix",
        "project_count",
        "cluster_count",
        "projects",
    } <= set(doc)
    project = doc["projects"][0]
    assert {"key", "display_name", "project_id", "will_create", "object_storage", "clusters"} <= set(project)
    cluster = project["clusters"][0]
    assert {
        "name",
        "stack",
        "backend",
        "cpu_nodes",
        "gpu_nodes",
        "gpu_reservation",
        "enable_gpu_cluster",
        "infiniband_fabric",
        "gpu_driver_mode",
        "managed_driver_preset",
        "enable_filestore",
        "filestore_disk_size_gibibytes",
        "filestore_mount_path",
        "filestore_mount_tag",
        "k8s_version",
        "mig",
        "kuberay",
        "gpu_workload_profile",
    } <= set(cluster)
    assert set(cluster["cpu_nodes"]) >= {"count", "platform", "preset", "disk_size_gib"}
    assert set(cluster["gpu_nodes"]) >= {"count", "platform", "preset", "disk_size_gib", "preemptible"}


def test_values() -> None:
    doc = document()
    assert (doc["name"], doc["tenant_id"], doc["region"], doc["project_prefix"]) == (
        "demo",
        None,
        "eu-north1",
        "demo-",
    )
    assert (doc["project_count"], doc["cluster_count"]) == (2, 4)
    assert doc["backend_counts"] == {"mk8s": 3, "soperator": 1}
    a, existing = doc["projects"]
    assert (a["display_name"], a["project_id"], a["will_create"], a["stack"]) == (
        "demo-a",
        None,
        True,
        "demo.a",
    )
    assert a["object_storage"] == {
        "enabled": True,
        "storage_class": "enhanced",
        "size_gibibytes": 1024,
        "bucket_name": None,
    }
    assert (existing["display_name"], existing["project_id"], existing["will_create"]) == (
        "project-e00existing",
        "project-e00existing",
        False,
    )
    train, render = a["clusters"]
    assert train["gpu_reservation"] == "strict"
    assert train["gpu_driver_mode"] == "operator" and train["managed_driver_preset"] is None
    assert train["mig"]["strategy"] == "mixed" and train["k8s_version"] == "1.34"
    assert train["gpu_nodes"] == {
        "count": 2,
        "platform": "gpu-rtx6000",
        "preset": "1gpu-24vcpu-218gb",
        "disk_size_gib": 128,
        "preemptible": False,
        "gpus_per_node": 1,
        "node_groups": 2,
        "nodes_per_group": 1,
    }
    assert train["cpu_nodes"] == {
        "count": 1,
        "platform": "cpu-d3",
        "preset": "16vcpu-64gb",
        "disk_size_gib": 128,
        "preemptible": False,
    }
    assert render["gpu_workload_profile"] == "rtx-rendering"
    assert render["gpu_reservation"] == "on-demand"
    assert render["gpu_driver_package_repositories"] == ["mirror.list"]
    ray, slurm = existing["clusters"]
    assert ray["kuberay"]["worker_replicas"] == 1 and ray["kuberay"]["ray_version"] == "2.58.0"
    assert ray["gpu_reservation"] == "none" and ray["gpu_driver_mode"] == "auto"
    assert slurm["backend"] == "soperator" and slurm["soperator"]["workers"][0]["size"] == 2


def test_nothing_private_is_in_the_plan() -> None:
    text = json.dumps(document()) + render_plan_text(document())
    assert CBG not in text
    assert CHART not in text and "registry.private.example" not in text
    assert REPO_TEXT not in text and "mirror.private.example" not in text


def test_selection_limits_the_document() -> None:
    doc = document(only_projects=["project-e00existing"], only_clusters=["ray"])
    assert (doc["project_count"], doc["cluster_count"]) == (1, 1)
    assert [c["name"] for c in doc["projects"][0]["clusters"]] == ["ray"]


def test_prefix_override_is_reported() -> None:
    fleet = spec()
    doc = plan_document(fleet, resolve_targets(fleet, project_prefix="ops-"), project_prefix="ops-")
    assert doc["project_prefix"] == "ops-"
    assert doc["projects"][0]["display_name"] == "ops-a"


def test_text_has_a_table_per_project() -> None:
    text = render_plan_text(document(), width=160)
    assert "Fleet demo: 4 cluster(s) across 2 project(s)" in text
    assert "Project a → demo-a (will create)" in text
    assert "Project project-e00existing → project-e00existing (existing project-e00existing)" in text
    assert "MIG mixed/all-balanced" in text and "strict" in text and "KubeRay" in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_preemptible_cpu_pool_is_shown() -> None:
    doc = json.loads(json.dumps(SPEC))
    doc["defaults"]["cpu_nodes"]["preemptible"] = True
    fleet = parse_spec(json.dumps(doc))
    plan = plan_document(fleet, resolve_targets(fleet))
    train = plan["projects"][0]["clusters"][0]
    assert train["cpu_nodes"]["preemptible"] is True
    assert "1 × cpu-d3 16vcpu-64gb, 128 GiB disk, preemptible" in render_plan_text(plan, width=200)
