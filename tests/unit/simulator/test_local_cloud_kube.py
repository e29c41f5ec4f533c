"""What a local cluster's API server is made to hold (shapes), and kubeconfig documents."""

from __future__ import annotations

import base64
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from npa_pulumi.kube.kubeconfig import (
    ClientCertificate,
    ClusterAccess,
    ExecCredential,
    dump,
    merge,
    write_private,
)
from npa_pulumi.simulator.kube import shapes

CLUSTER: dict[str, Any] = {"id": "mk8scluster-e00abc", "region": "eu-north1", "addons": {}, "node_faults": {}}


def _group(**overrides: Any) -> dict[str, Any]:
    group = {
        "id": "mk8snodegroup-e00aaaaaaaaaaaaaaa",
        "name": "train-ng-gpu-0",
        "state": "RUNNING",
        "target_node_count": 2,
        "platform": "gpu-h200-sxm",
        "preset": "8gpu-128vcpu-1600gb",
        "gpu_cluster_id": "",
        "labels": {"library-solution": "k8s-training"},
    }
    return {**group, **overrides}


@pytest.mark.parametrize(
    ("preset", "shape"),
    [("8gpu-128vcpu-1600gb", (8, 128, 1600)), ("16vcpu-64gb", (0, 16, 64)), ("", (0, 0, 0))],
)
def test_preset_shape(preset: str, shape: tuple[int, int, int]) -> None:
    assert shapes.preset_shape(preset) == shape


@pytest.mark.parametrize(
    ("platform", "product"),
    [
        ("gpu-h200-sxm", "NVIDIA-H200"),
        ("gpu-b200-sxm-a", "NVIDIA-B200"),
        ("gpu-rtx6000", "NVIDIA-RTX-PRO-6000-Blackwell-Server-Edition"),
        ("gpu-l40s-a", "NVIDIA-L40S"),
    ],
)
def test_gpu_product(platform: str, product: str) -> None:
    assert shapes.gpu_product(platform) == product


def test_a_gpu_group_becomes_tainted_gpu_nodes() -> None:
    nodes = shapes.desired_nodes(CLUSTER, [_group()])
    assert len(nodes) == 2
    node = next(iter(nodes.values()))
    labels = node["metadata"]["labels"]
    assert labels["nebius.com/node-group-id"] == "mk8snodegroup-e00aaaaaaaaaaaaaaa"
    assert labels["node.kubernetes.io/instance-type"] == "gpu-h200-sxm"
    assert labels["nvidia.com/gpu.present"] == "true" and labels["library-solution"] == "k8s-training"
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"
    assert node["status"]["capacity"] == {
        "cpu": "128",
        "memory": "1600Gi",
        "pods": "110",
        "nvidia.com/gpu": "8",
    }
    assert node["spec"]["taints"] == [shapes.GPU_TAINT]


def test_groups_not_running_have_no_nodes_and_scaling_keeps_names() -> None:
    assert shapes.desired_nodes(CLUSTER, [_group(state="PROVISIONING")]) == {}
    two = list(shapes.desired_nodes(CLUSTER, [_group()]))
    three = list(shapes.desired_nodes(CLUSTER, [_group(target_node_count=3)]))
    assert three[:2] == two and len(set(three)) == 3


def test_mig_layout_and_fabric() -> None:
    cluster = {**CLUSTER, "addons": {"mig": {"strategy": "mixed", "config": "all-balanced"}}}
    group = _group(platform="gpu-rtx6000", preset="1gpu-24vcpu-218gb", gpu_cluster_id="gpucluster-e00x")
    node = next(iter(shapes.desired_nodes(cluster, [group]).values()))
    capacity = node["status"]["capacity"]
    assert (
        capacity["nvidia.com/gpu"],
        capacity["nvidia.com/mig-1g.24gb"],
        capacity["nvidia.com/mig-2g.48gb"],
    ) == (
        "0",
        "2",
        "1",
    )
    assert node["metadata"]["labels"]["nvidia.com/mig.config.state"] == "success"
    assert node["metadata"]["annotations"][shapes.FABRIC_STATE] == "complete"


def test_node_faults_shape_the_node() -> None:
    name = shapes.node_names(_group())[0]
    healthy = shapes.desired_nodes(CLUSTER, [_group()])[name]
    faults = {name: {"gpu_missing": True, "not_ready": True, "gpu_error": True, "reboots": 1}}
    faulty = shapes.desired_nodes({**CLUSTER, "node_faults": faults}, [_group()])[name]
    assert faulty["status"]["capacity"]["nvidia.com/gpu"] == "7"
    assert faulty["metadata"]["labels"][shapes.NOT_READY_LABEL] == "true"
    assert faulty["metadata"]["labels"][shapes.GPU_ERROR_LABEL] == "true"
    assert faulty["status"]["nodeInfo"]["bootID"] != healthy["status"]["nodeInfo"]["bootID"]


def test_recipe_objects_follow_the_addons() -> None:
    def names(addons: dict[str, Any]) -> set[str]:
        return {
            f"{o['kind']}/{o['metadata']['name']}"
            for o in shapes.recipe_objects({**CLUSTER, "addons": addons})
        }

    assert names({}) == {"StorageClass/compute-csi-default-sc"}
    managed = names({"gpu_driver": "managed-image", "filestore": True})
    assert {"StorageClass/csi-mounted-fs-path-sc", "DaemonSet/nvidia-device-plugin-daemonset"} <= managed
    operator = names({"gpu_driver": "operator", "mig": {"strategy": "mixed"}})
    assert {"DaemonSet/nvidia-driver-daemonset", "DaemonSet/nvidia-mig-manager"} <= operator
    # KubeRay is the fleet's (its cluster stack installs it, the agent runs the real operator), never a
    # simulated object of the recipe's.
    assert not any("Ray" in n for n in names({"kuberay": {"worker_replicas": 2}}))


def test_pod_failure_stage_selects_the_faulted_nodes() -> None:
    stage = shapes.pod_failure_stage(["b", "a"])
    by_key = {e["key"]: e for e in stage["spec"]["selector"]["matchExpressions"]}
    assert by_key[".spec.nodeName"]["values"] == ["a", "b"]
    assert "phase: Failed" in stage["spec"]["next"]["statusTemplate"]


def test_client_certificate_kubeconfig_and_private_write(tmp_path: Path) -> None:
    access = ClusterAccess("https://127.0.0.1:6443", "CA", ClientCertificate("CERT", "KEY"))
    assert "KEY" not in repr(access)
    config = access.kubeconfig("ctx")
    user = config["users"][0]["user"]
    assert base64.b64decode(user["client-key-data"]).decode() == "KEY"
    path = tmp_path / "sub" / "config"
    write_private(path, dump(config))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert yaml.safe_load(path.read_text())["current-context"] == "ctx"


def test_merge_replaces_by_name_and_keeps_the_current_context() -> None:
    exec_access = ClusterAccess("https://x", "CA", ExecCredential("nebius", ("get-token",)))
    base = exec_access.kubeconfig("one")
    merged = merge(base, exec_access.kubeconfig("two"))
    assert [c["name"] for c in merged["contexts"]] == ["one", "two"]
    assert merged["current-context"] == "one"
    again = merge(merged, ClusterAccess("https://y", "CA", ExecCredential("nebius", ())).kubeconfig("two"))
    assert [c["cluster"]["server"] for c in again["clusters"]] == ["https://x", "https://y"]
