"""The default recipe applied and destroyed by real terraform against the local cloud, outside the engine:
the work dir the bridge materializes for a stack (upstream k8s-training from ../shared, the fleet's override
files, the tfvars the product renders), the local cloud's providers from the toolchain's mirror. Each
feature path's objects are checked in the simulator's inventory after apply and after destroy, and so are the
failures a user meets: a quota that starves a GPU pool, a create refused until the retries run out, a
transient refusal retried inside the apply, a state lost after the creates, and a name another owner holds."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from upstream_support import PROJECT, LocalTerraform, Workspace

from npa_pulumi.runtime.retry import DEFAULT_ATTEMPTS

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
SHORT_TENANT = REPO / "examples" / "local-tenant-short.yaml"
GIB = 2**30

SPEC = """
apiVersion: npa.fleet/v0.0.1
name: recipe-test
tenant_id: tenant-local
region: us-central1
projects:
  - project_id: project-existing1
    clusters:
      - name: cpu-only
        cpu_nodes: {count: 2, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 0}
        enable_filestore: false
      - name: reserved
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb,
                    capacity_block_group: capacityblockgroup-local1}
        enable_filestore: false
      - name: shared
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb, disk_size_gib: 200}
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: true
        infiniband_fabric: fabric-local
        enable_filestore: true
        filestore_disk_size_gibibytes: 256
        filestore_mount_path: /mnt/shared
      - name: starved
        cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
        gpu_nodes: {count: 2, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
        enable_filestore: false
"""


@pytest.fixture
def make_workspace(tmp_path: Path) -> Iterator[Any]:
    cloud = LocalTerraform(tmp_path)

    def make(cluster: str, fixture: Path | None = None, copy: str = "") -> Workspace:
        if fixture is not None:
            cloud.simulator.initialise(fixture, force=True)
        return cloud.workspace(SPEC, cluster, copy)

    yield make


def _only(records: list[dict[str, Any]], **match: Any) -> dict[str, Any]:
    found = [r for r in records if all(r.get(k) == v for k, v in match.items())]
    assert len(found) == 1, (match, records)
    return found[0]


def _node_group_ids(state: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {a: v["id"] for a, v in state.items() if a.startswith("nebius_mk8s_v1_node_group.")}


def test_a_cpu_only_cluster(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("cpu-only")
    ws.apply()
    state = ws.state()
    inventory = ws.inventory()
    cluster = _only(inventory["mk8s_clusters"], name="cpu-only")
    assert cluster["id"] == state["nebius_mk8s_v1_cluster.k8s-cluster"]["id"]
    assert cluster["state"] == "RUNNING" and cluster["project_id"] == PROJECT
    group = _only(inventory["node_groups"], cluster_id=cluster["id"])
    assert _node_group_ids(state) == {"nebius_mk8s_v1_node_group.cpu-only": group["id"]}
    assert (group["name"], group["state"], group["ready_node_count"]) == ("cpu-only-ng-cpu", "RUNNING", 2)
    assert (group["platform"], group["preset"]) == ("cpu-d3", "4vcpu-16gb")
    assert inventory["filesystems"] == [] and inventory["gpu_clusters"] == []
    assert ws.usage("mk8s.cluster.count") == 1
    assert ws.usage("compute.instance.count") == 2
    assert ws.usage("compute.instance.non-gpu.vcpu") == 8

    ws.destroy()
    inventory = ws.inventory()
    assert inventory["mk8s_clusters"] == [] and inventory["node_groups"] == []
    for name in ("mk8s.cluster.count", "compute.instance.count", "compute.instance.non-gpu.vcpu"):
        assert ws.usage(name) == 0


def test_a_reserved_gpu_pool_draws_on_its_capacity_block(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("reserved")
    assert "capacityblockgroup-local1" not in (ws.directory / "terraform.tfvars.json").read_text()
    ws.apply()
    inventory = ws.inventory()
    gpu_groups = [g for g in inventory["node_groups"] if g["platform"] == "gpu-rtx6000"]
    assert {a for a in _node_group_ids(ws.state()) if ".gpu" in a}, (
        "upstream's GPU node groups are in the state"
    )
    assert sum(g["target_node_count"] for g in gpu_groups) == 2
    for group in gpu_groups:
        assert group["state"] == "RUNNING"
        assert group["reservation_policy"] == "STRICT"
        assert group["reservation_ids"] == ["capacityblockgroup-local1"]
    assert ws.block_usage("capacityblockgroup-local1") == 4  # 2 nodes x 2 GPUs
    assert ws.usage("compute.instance.gpu.rtx6000") == 0  # not on-demand quota
    assert ws.usage("compute.instance.count") == 3

    ws.destroy()
    assert ws.block_usage("capacityblockgroup-local1") == 0
    assert ws.inventory()["node_groups"] == []


def test_a_shared_filesystem_is_attached_to_every_node_group(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("shared")
    ws.apply()
    state = ws.state()
    inventory = ws.inventory()
    (filesystem,) = inventory["filesystems"]
    assert filesystem["id"] == state["nebius_compute_v1_filesystem.shared-filesystem[0]"]["id"]
    assert filesystem["size_bytes"] == 256 * GIB and filesystem["state"] == "READY"
    groups = inventory["node_groups"]
    assert len(groups) == 2
    tags = set()
    for group in groups:
        (attachment,) = group["filesystems"]
        assert attachment["filesystem_id"] == filesystem["id"]
        tags.add(attachment["mount_tag"])
    assert len(tags) == 1  # one filesystem, mounted under one tag on every node
    (gpu_cluster,) = inventory["gpu_clusters"]
    assert _only(groups, platform="gpu-h200-sxm")["gpu_cluster_id"] == gpu_cluster["id"]
    assert ws.usage("compute.filesystem.count") == 1
    assert ws.usage("compute.filesystem.size.network-ssd") == 256 * GIB
    assert ws.usage("compute.gpucluster.count") == 1
    assert ws.usage("compute.instance.gpu.h200") == 8

    ws.destroy()
    inventory = ws.inventory()
    assert (
        inventory["filesystems"] == []
        and inventory["gpu_clusters"] == []
        and inventory["mk8s_clusters"] == []
    )
    for name in (
        "compute.filesystem.count",
        "compute.filesystem.size.network-ssd",
        "compute.gpucluster.count",
    ):
        assert ws.usage(name) == 0


def test_a_quota_starved_gpu_pool_fails_the_apply_naming_the_quota(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("starved", fixture=SHORT_TENANT)  # no on-demand GPU quota
    failed = ws.apply(check=False)
    assert failed.returncode != 0
    message = " ".join((failed.stdout + failed.stderr).split())
    assert "compute.instance.gpu.h200" in message, message[-3000:]
    assert ws.usage("compute.instance.gpu.h200") == 0
    assert len(ws.inventory()["mk8s_clusters"]) == 1

    ws.destroy()
    inventory = ws.inventory()
    assert inventory["mk8s_clusters"] == [] and inventory["node_groups"] == []
    assert ws.usage("compute.instance.count") == 0


def test_a_create_refused_until_the_retries_run_out_fails_and_a_second_apply_converges(
    make_workspace: Any,
) -> None:
    ws: Workspace = make_workspace("cpu-only")
    ws.simulator.add_fault("create_cluster", "unavailable", count=DEFAULT_ATTEMPTS)
    failed = ws.apply(check=False)
    assert failed.returncode != 0
    assert "unavailable" in " ".join((failed.stdout + failed.stderr).split()).lower()
    assert ws.simulator.list_faults() == []  # every attempt was made
    assert ws.inventory()["mk8s_clusters"] == []
    ws.apply()
    (cluster,) = ws.inventory()["mk8s_clusters"]
    assert cluster["id"] == ws.state()["nebius_mk8s_v1_cluster.k8s-cluster"]["id"]
    ws.destroy()
    assert ws.inventory()["mk8s_clusters"] == []


def test_a_transient_refusal_is_retried_within_the_apply(make_workspace: Any) -> None:
    ws: Workspace = make_workspace("cpu-only")
    ws.simulator.add_fault("create_cluster", "unavailable", count=2)
    ws.simulator.add_fault("create_node_group", "unavailable", count=1)
    ws.apply()
    (cluster,) = ws.inventory()["mk8s_clusters"]
    (group,) = ws.inventory()["node_groups"]
    assert cluster["id"] == ws.state()["nebius_mk8s_v1_cluster.k8s-cluster"]["id"]
    assert group["cluster_id"] == cluster["id"]
    assert ws.simulator.list_faults() == []


def test_the_same_work_dir_repeating_its_creates_after_losing_its_state_gets_the_same_objects(
    make_workspace: Any,
) -> None:
    """A run killed after the cloud made an object but before Terraform recorded it: the same stack (work
    dir) sending the identical create again gets the object its first attempt made (the idempotency key),
    so nothing is orphaned and nothing is made twice. (A request that carries upstream's random suffix, a
    filesystem's or a GPU cluster's name, is not identical once the state that held the suffix is lost.)"""
    ws: Workspace = make_workspace("cpu-only")
    ws.apply()
    before = ws.inventory()
    for path in ws.directory.glob("terraform.tfstate*"):
        path.unlink()  # as if the apply had been killed before Terraform wrote its state
    ws.apply()
    after = ws.inventory()
    for kind in ("mk8s_clusters", "node_groups"):
        assert sorted(o["id"] for o in after[kind]) == sorted(o["id"] for o in before[kind]), kind
    ws.destroy()
    after = ws.inventory()
    for kind in ("mk8s_clusters", "node_groups"):
        assert after[kind] == [], kind


def test_a_name_another_owner_holds_is_refused_not_shared(make_workspace: Any) -> None:
    """The same cluster name in one project from two owners (two stacks' work dirs, the identical request)
    is refused as Nebius refuses it, never silently shared."""
    first: Workspace = make_workspace("cpu-only")
    first.apply()
    second: Workspace = make_workspace("cpu-only", copy="-again")
    refused = second.apply(check=False)
    assert refused.returncode != 0
    assert "already exists" in " ".join((refused.stdout + refused.stderr).split()).lower()
    assert len(first.inventory()["mk8s_clusters"]) == 1
