"""The live proof behind zero incremental demand (preflight/live_proof.py), group by group: the requested
template, workers, preemptibility and the exact STRICT binding; a PROVISIONING-again group with the same
proof counts, one waiting on quota does not."""

from __future__ import annotations

import json
from typing import Any

from npa_pulumi.cloud.port import NodeGroup, NodeGroupCondition
from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.plan import resolve_targets
from npa_pulumi.preflight.live_proof import ExpectedGroup, expected_groups, group_mismatches
from npa_pulumi.spec import parse_spec

BLOCK = "capacityblockgroup-e00reserved0000a1b2"
SPEC = f"""\
apiVersion: npa.fleet/v0.0.1
name: proof
region: us-central1
projects:
  - project_id: project-e00one
    clusters:
      - name: reserved
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
        gpu_nodes:
          {{count: 2, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}
        enable_filestore: false
"""


def _groups() -> tuple[list[NodeGroup], list[ExpectedGroup]]:
    [target] = resolve_targets(parse_spec(SPEC))
    wanted = expected_groups(target)
    assert [(w.kind, w.count) for w in wanted] == [("cpu", 1), ("gpu", 1), ("gpu", 1)]  # split reserved pool
    gpu = wanted[1]
    live = NodeGroup(
        id="mk8snodegroup-e00gpu0",
        cluster_id="mk8scluster-e00one",
        name="reserved-ng-gpu-0",
        state="RUNNING",
        target_node_count=1,
        ready_node_count=1,
        platform=gpu.platform,
        preset=gpu.preset,
        preemptible=False,
        reservation_policy="STRICT",
        reservation_ids=(BLOCK,),
        disk_size_gib=gpu.disk_gib,
    )
    return [live], [gpu]


def test_the_exact_group_is_proven_and_each_change_is_named() -> None:
    [live], [gpu] = _groups()
    assert group_mismatches(live, gpu) == []
    cases: dict[str, tuple[dict[str, Any], str]] = {
        "preset": ({"preset": "1gpu-24vcpu-218gb"}, "preset 1gpu-24vcpu-218gb, 2gpu-48vcpu-436gb requested"),
        "preemptible": ({"preemptible": True}, "a reserved pool must not be preemptible"),
        "auto": ({"reservation_policy": "AUTO"}, "bound to AUTO [capacityblockgroup-…a1b2], STRICT"),
        "block": (
            {"reservation_ids": ("capacityblockgroup-e00other0000ffff",)},
            "bound to STRICT [capacityblockgroup-…ffff]",
        ),
        "unbound": ({"reservation_policy": "", "reservation_ids": ()}, "bound to no reservation"),
        "disk": ({"disk_size_gib": 64}, "boot disk 64 GiB"),
        "count": ({"target_node_count": 2, "ready_node_count": 2}, "target 2 worker(s), 1 requested"),
        "workers": ({"ready_node_count": 0}, "0 of 1 worker(s) running"),
    }
    for name, (change, message) in cases.items():
        problems = group_mismatches(live.model_copy(update=change), gpu)
        assert any(message in p for p in problems), (name, problems)
        assert all(BLOCK not in p for p in problems)  # the block id is masked


def test_provisioning_again_counts_only_with_the_same_proof() -> None:
    [live], [gpu] = _groups()
    again = live.model_copy(update={"state": "PROVISIONING"})
    assert group_mismatches(again, gpu) == []
    starved = again.model_copy(
        update={"conditions": (NodeGroupCondition(kind="QuotaFailure", message="x", quota="compute.gpu"),)}
    )
    assert any("waiting on quota" in p for p in group_mismatches(starved, gpu))
    changed = again.model_copy(update={"preset": "1gpu-24vcpu-218gb"})
    assert group_mismatches(changed, gpu)
    assert group_mismatches(live.model_copy(update={"state": "ERROR"}), gpu)


# --------------------------------------------------------------------- what a deployed cluster is charged
# The proof compares what decides capacity, not the stack's fingerprint: the cluster's identity, then each
# node group; a change that needs more is charged exactly the difference, one that needs less nothing.

TENANT = "tenant-e00proof"
REGION = "eu-north1"
PROJECT = "project-e00one"
CLUSTER = "mk8scluster-e00one"
GIB = 2**30
SXM_BLOCK = "capacityblockgroup-e00sxmblock0000c3d4"


def _spec(gpu: str, *, filestore: str = "enable_filestore: false", fabric: str = "fabric-3") -> str:
    return f"""\
apiVersion: npa.fleet/v0.0.1
name: proof
region: {REGION}
projects:
  - project_id: {PROJECT}
    clusters:
      - name: train
        cpu_nodes: {{count: 1, platform: cpu-d3, preset: 4vcpu-16gb}}
        gpu_nodes: {gpu}
        infiniband_fabric: {fabric}
        {filestore}
"""


def _sxm(count: int, preset: str = "8gpu-128vcpu-1600gb") -> str:
    return f"{{count: {count}, platform: gpu-h200-sxm, preset: {preset}, capacity_block_group: {SXM_BLOCK}}}"


def _pcie(count: int) -> str:
    return (
        f"{{count: {count}, platform: gpu-rtx6000, preset: 2gpu-48vcpu-436gb, capacity_block_group: {BLOCK}}}"
    )


def _target(text: str) -> Any:
    [target] = resolve_targets(parse_spec(text))
    return target


class Inventory:
    """A live cloud of one project and one cluster, with the reads preflight makes (CloudPort's shape)."""

    name = "fake"

    def __init__(self) -> None:
        from npa_pulumi.cloud.port import CapacityBlockGroup, Cluster, Project, QuotaAllowance

        self.project = Project(id=PROJECT, name="one", tenant_id=TENANT, region=REGION)
        self.cluster: Cluster | None = Cluster(id=CLUSTER, project_id=PROJECT, name="train", state="RUNNING")
        self.groups: list[NodeGroup] = []
        self.gpu_clusters: list[Any] = []
        self.filesystems: list[Any] = []
        self.blocks = [
            CapacityBlockGroup(
                id=block_id,
                parent_id=TENANT,
                region=REGION,
                platform=platform,
                fabric=fabric,
                limit=limit,
                usage=limit,
            )
            for block_id, platform, fabric, limit in (
                (SXM_BLOCK, "gpu-h200-sxm", "fabric-3", 16),
                (BLOCK, "gpu-rtx6000", "", 8),
            )
        ]
        names = [
            "mk8s.cluster.count",
            "vpc.allocation.count",
            "compute.instance.count",
            "compute.disk.count",
            "compute.instance.non-gpu.vcpu",
            "compute.gpucluster.count",
            "compute.filesystem.count",
        ]
        sizes = ["compute.disk.size.network-ssd", "compute.filesystem.size.network-ssd"]
        self.allowances = [
            QuotaAllowance(name=n, region=REGION, limit=1000, usage=0, parent_id=TENANT) for n in names
        ] + [
            QuotaAllowance(name=n, region=REGION, limit=10**6 * GIB, usage=0, unit="byte", parent_id=TENANT)
            for n in sizes
        ]

    def group(self, name: str, count: int, platform: str, preset: str, disk: int, block: str = "") -> None:
        self.groups.append(
            NodeGroup(
                id=f"mk8snodegroup-e00{len(self.groups)}",
                cluster_id=CLUSTER,
                name=name,
                state="RUNNING",
                target_node_count=count,
                ready_node_count=count,
                platform=platform,
                preset=preset,
                disk_size_gib=disk,
                reservation_policy="STRICT" if block else "",
                reservation_ids=(block,) if block else (),
            )
        )

    # CloudPort reads
    def get_project(self, project_id: str) -> Any:
        from npa_pulumi.cloud.errors import NotFound

        if project_id != self.project.id:
            raise NotFound(f"project {project_id}")
        return self.project

    def get_cluster(self, cluster_id: str) -> Any:
        from npa_pulumi.cloud.errors import NotFound

        if self.cluster is None or cluster_id != self.cluster.id:
            raise NotFound(f"cluster {cluster_id}")
        return self.cluster

    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
        return [g for g in self.groups if g.cluster_id == cluster_id]

    def list_gpu_clusters(self, project_id: str) -> list[Any]:
        return self.gpu_clusters

    def list_filesystems(self, project_id: str) -> list[Any]:
        return self.filesystems

    def list_quota_allowances(self, tenant_id: str) -> list[Any]:
        return self.allowances

    def list_capacity_block_groups(self, tenant_id: str) -> list[Any]:
        return self.blocks


def _deployed_sxm(nodes: int) -> Inventory:
    """The cluster `_spec(_sxm(nodes))` deploys, running; its block (16 GPUs) is fully used."""
    from npa_pulumi.cloud.port import GpuCluster

    cloud = Inventory()
    cloud.group("train-cpu", 1, "cpu-d3", "4vcpu-16gb", 128)
    cloud.group("train-gpu-0", nodes, "gpu-h200-sxm", "8gpu-128vcpu-1600gb", 1023, SXM_BLOCK)
    cloud.gpu_clusters.append(
        GpuCluster(id="computegpucluster-e00a", project_id=PROJECT, name="x", fabric="fabric-3")
    )
    return cloud


def _preflight(cloud: Inventory, text: str, claim: Any = None) -> Any:
    from typing import cast

    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.engine.backends.registry import backend_for
    from npa_pulumi.preflight.live_proof import ClaimedCluster
    from npa_pulumi.preflight.targets import preflight_targets

    target = _target(text)
    claimed = {target.cluster_stack: claim or ClaimedCluster(PROJECT, CLUSTER)}
    return preflight_targets(
        cast(CloudPort, cloud), TENANT, [target], lambda t: backend_for(t.backend), claimed
    )


def _requirements(report: Any) -> dict[str, int]:
    return {r.name: r.required for r in report.requirements}


def test_a_cluster_that_holds_everything_is_charged_zero_and_says_why() -> None:
    report = _preflight(_deployed_sxm(2), _spec(_sxm(2)))
    assert report.ok and report.requirements == [] and report.capacity_blocks == []  # the block is full
    [line] = report.deployed
    assert (line.target, line.charge, line.charged, line.reserved_gpus) == (
        f"{PROJECT}/train",
        "zero",
        [],
        [],
    )
    assert any("charged zero (live proof)" in n for n in report.notes), report.notes


def test_one_more_node_in_a_reserved_group_charges_exactly_that_node() -> None:
    report = _preflight(_deployed_sxm(2), _spec(_sxm(3)))
    [line] = report.deployed
    assert line.charge == "difference"
    assert [(b.gpus, b.id) for b in line.reserved_gpus] == [(8, mask_id(SXM_BLOCK))]
    [block] = report.capacity_blocks
    assert (block.required_gpus, block.free_gpus, block.status) == (8, 0, "rejected")
    assert block.reason == "needs 8 GPUs, only 0 reserved GPUs remain"
    assert not report.ok
    # One node: its instance, boot disk and addresses; never the cluster, the CPU group or the GPU cluster.
    assert _requirements(report) == {
        "compute.instance.count": 1,
        "compute.disk.count": 1,
        "compute.disk.size.network-ssd": 1023 * GIB,
        "vpc.allocation.count": 2,
    }
    assert any("train-gpu-0: 2 → 3 node(s), 1 charged" in r for r in line.reasons), line.reasons
    text = json.dumps(report.to_json(), ensure_ascii=False)
    assert SXM_BLOCK not in text and mask_id(SXM_BLOCK) in text  # masked in the JSON and the notes
    assert all(SXM_BLOCK not in n for n in report.notes)


def test_a_change_that_needs_less_is_charged_zero() -> None:
    report = _preflight(_deployed_sxm(3), _spec(_sxm(2)))
    [line] = report.deployed
    assert report.ok and line.charge == "zero" and report.requirements == []
    assert any("3 → 2 node(s) needs less: charged zero" in r for r in line.reasons)


def test_a_preset_change_charges_the_whole_new_group() -> None:
    report = _preflight(_deployed_sxm(2), _spec(_sxm(2, preset="8gpu-160vcpu-1600gb")))
    [line] = report.deployed
    assert line.charge == "difference"
    assert [b.gpus for b in line.reserved_gpus] == [16]  # both nodes, none credited from the old template
    assert any("train-gpu-0 charged in full (2 node(s)): preset" in r for r in line.reasons), line.reasons
    assert "mk8s.cluster.count" not in _requirements(report)


def test_a_new_group_of_a_split_reserved_pool_charges_that_group() -> None:
    cloud = Inventory()
    cloud.group("train-cpu", 1, "cpu-d3", "4vcpu-16gb", 128)
    for index in (0, 1):
        cloud.group(f"train-gpu-{index}", 1, "gpu-rtx6000", "2gpu-48vcpu-436gb", 1023, BLOCK)
    same = _preflight(cloud, _spec(_pcie(2)))
    assert same.ok and [line.charge for line in same.deployed] == ["zero"]
    grown = _preflight(cloud, _spec(_pcie(3)))
    [line] = grown.deployed
    assert [b.gpus for b in line.reserved_gpus] == [2]  # one node of one new group
    assert any(r.startswith("new GPU node group: 1 node(s) charged") for r in line.reasons), line.reasons
    assert not grown.ok  # the block (8 GPUs) is full


def test_live_groups_pair_with_the_requested_ones_in_index_order() -> None:
    cloud = Inventory()
    cloud.group("train-cpu", 1, "cpu-d3", "4vcpu-16gb", 128)
    for index in (10, 2, 1, 0):  # listed out of order; `-10` is the last by index, not the second
        cloud.group(f"train-gpu-{index}", 1, "gpu-rtx6000", "2gpu-48vcpu-436gb", 1023, BLOCK)
    cloud.groups[1] = cloud.groups[1].model_copy(update={"preset": "1gpu-24vcpu-218gb"})  # train-gpu-10
    [line] = _preflight(cloud, _spec(_pcie(3))).deployed
    assert line.charge == "zero"  # 0, 1, 2 hold the three requested groups
    assert any("train-gpu-10 (1 node(s)) is no longer asked for" in r for r in line.reasons), line.reasons


def test_a_group_that_does_not_hold_its_workers_is_charged_in_full() -> None:
    cloud = _deployed_sxm(2)
    cloud.groups[1] = cloud.groups[1].model_copy(
        update={
            "state": "PROVISIONING",
            "ready_node_count": 1,
            "conditions": (NodeGroupCondition(kind="QuotaFailure", message="x", quota="compute.gpu"),),
        }
    )
    [line] = _preflight(cloud, _spec(_sxm(2))).deployed
    assert [b.gpus for b in line.reserved_gpus] == [16]
    assert any("charged in full" in r and "waiting on quota" in r for r in line.reasons), line.reasons


def test_a_cluster_the_live_cloud_does_not_prove_is_charged_in_full() -> None:
    from npa_pulumi.cloud.port import Project
    from npa_pulumi.preflight.live_proof import ClaimedCluster

    def full(cloud: Inventory, claim: Any = None) -> Any:
        report = _preflight(cloud, _spec(_sxm(2)), claim)
        [line] = report.deployed
        assert line.charge == "full" and not report.ok, line
        assert [b.gpus for b in line.reserved_gpus] == [16]
        assert "mk8s.cluster.count" in _requirements(report)
        return line

    gone = _deployed_sxm(2)
    gone.cluster = None
    assert "no longer exists" in full(gone).reasons[0]
    stopped = _deployed_sxm(2)
    assert stopped.cluster is not None
    stopped.cluster = stopped.cluster.model_copy(update={"state": "PROVISIONING"})
    assert "state PROVISIONING" in full(stopped).reasons[0]
    foreign = _deployed_sxm(2)
    foreign.project = Project(id=PROJECT, name="one", tenant_id="tenant-e00other", region=REGION)
    assert "tenant tenant-e00other" in full(foreign).reasons[0]
    refused = full(_deployed_sxm(2), ClaimedCluster(PROJECT, CLUSTER, refused="its identity moved"))
    assert refused.reasons == ["its identity moved"]
    assert any(
        n.startswith(f"{PROJECT}/train: deployed, but charged in full")
        for n in _preflight(gone, _spec(_sxm(2))).notes
    )


def test_the_gpu_cluster_and_the_filesystem_are_charged_only_when_not_held() -> None:
    from npa_pulumi.cloud.port import Filesystem
    from npa_pulumi.preflight.live_proof import ClaimedCluster

    filestore = "enable_filestore: true\n        filestore_disk_size_gibibytes: 2048"
    # The upstream recipe records neither: a GPU cluster on the fabric in the project's listing is its own.
    assert _preflight(_deployed_sxm(2), _spec(_sxm(2))).deployed[0].charge == "zero"
    other_fabric = _preflight(_deployed_sxm(2), _spec(_sxm(2), fabric="fabric-5"))
    assert _requirements(other_fabric) == {"compute.gpucluster.count": 1}
    # A filesystem now asked for, that the project does not have: count and size.
    added = _preflight(_deployed_sxm(2), _spec(_sxm(2), filestore=filestore))
    assert _requirements(added) == {
        "compute.filesystem.count": 1,
        "compute.filesystem.size.network-ssd": 2048 * GIB,
    }
    # The one the stack recorded, smaller than asked: only the missing size.
    cloud = _deployed_sxm(2)
    cloud.filesystems.append(
        Filesystem(id="computefilesystem-e00mine", project_id=PROJECT, name="fs", size_bytes=1024 * GIB)
    )
    grown = _preflight(
        cloud,
        _spec(_sxm(2), filestore=filestore),
        ClaimedCluster(PROJECT, CLUSTER, records_objects=True, filesystem_ids=("computefilesystem-e00mine",)),
    )
    assert _requirements(grown) == {
        "compute.filesystem.size.network-ssd": 1024 * GIB,
        "compute.gpucluster.count": 1,
    }
    assert any("1024 → 2048 GiB, 1024 GiB charged" in r for r in grown.deployed[0].reasons)


def test_a_listed_gpu_cluster_is_credited_to_one_cluster_only() -> None:
    from typing import cast

    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.preflight.live_proof import ClaimedCluster, ProjectObjects, prove_capacity

    cloud, target = _deployed_sxm(2), _target(_spec(_sxm(2)))
    shared = ProjectObjects()
    first = prove_capacity(cast(CloudPort, cloud), TENANT, target, ClaimedCluster(PROJECT, CLUSTER), shared)
    assert first.gpu_cluster_held and shared.credited == {"computegpucluster-e00a"}
    second = prove_capacity(cast(CloudPort, cloud), TENANT, target, ClaimedCluster(PROJECT, CLUSTER), shared)
    assert not second.gpu_cluster_held
    assert "no live GPU cluster of its own: a GPU cluster charged" in second.reasons()
    # A recipe that declares its objects names its own: a listed one of another is never taken.
    declared = ClaimedCluster(PROJECT, CLUSTER, records_objects=True)
    assert not prove_capacity(cast(CloudPort, cloud), TENANT, target, declared).gpu_cluster_held
