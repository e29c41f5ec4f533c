"""Demand arithmetic of the quota preflight (reference §5), with exact byte counts (GiB = 2**30)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from npa_pulumi.preflight.demand import (
    BucketDemandInput,
    CapacityDemand,
    CapacityDemandConflict,
    ClusterDemandInput,
    ProjectDemandInput,
    capacity_demand,
    compute_requirements,
    gpu_family,
    preset_gpus,
    preset_vcpus,
)
from npa_pulumi.spec.effective import resolved_gpu_disk_gib

R = "eu-north1"
CBG = "capacityblockgroup-e00reserved0000h200a1b2"


def demand(*clusters: ClusterDemandInput, projects: list[ProjectDemandInput] | None = None) -> dict[str, int]:
    """Requirements of one region as {name: amount}; fails if a second region shows up."""
    reqs = compute_requirements(clusters, projects or [])
    assert {r.region for r in reqs} <= {R}
    return {r.name: r.amount for r in reqs}


def test_preset_and_platform_parsing() -> None:
    assert gpu_family("gpu-h200-sxm") == "h200"
    assert gpu_family("gpu-rtx6000-a") == "rtx6000"
    assert gpu_family("cpu-d3") == ""
    assert preset_gpus("8gpu-128vcpu-1600gb") == 8
    assert preset_vcpus("8gpu-128vcpu-1600gb") == 128
    assert preset_gpus("16vcpu-64gb") == 0
    assert preset_vcpus("") == 0


def test_resolved_gpu_disk() -> None:
    assert resolved_gpu_disk_gib(0, 1023, mig_enabled=False) == 1023
    assert resolved_gpu_disk_gib(0, 1023, mig_enabled=True) == 128
    assert resolved_gpu_disk_gib(500, 1023, mig_enabled=True) == 500


def test_cpu_only_cluster() -> None:
    c = ClusterDemandInput(region=R, cpu_count=3, cpu_preset="16vcpu-64gb")
    assert demand(c) == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 6,
        "compute.instance.count": 3,
        "compute.disk.count": 3,
        "compute.disk.size.network-ssd": 412_316_860_416,  # 3 × 128 GiB default CPU disk
        "compute.instance.non-gpu.vcpu": 48,
    }


def test_empty_cpu_preset_adds_no_vcpu_and_zero_amounts_are_dropped() -> None:
    c = ClusterDemandInput(region=R, cpu_count=1, cpu_preset="")
    d = demand(c)
    assert "compute.instance.non-gpu.vcpu" not in d
    assert "compute.instance.preemptible.count" not in d
    assert all(v > 0 for v in d.values())
    assert d["compute.disk.size.network-ssd"] == 137_438_953_472  # 128 GiB


def test_mixed_cluster_with_new_filesystem() -> None:
    c = ClusterDemandInput(
        region=R,
        cpu_count=2,
        cpu_preset="8vcpu-32gb",
        cpu_disk_gib=200,
        gpu_count=4,
        gpu_platform="gpu-h100-sxm",
        gpu_preset="1gpu-16vcpu-200gb",
        gpu_disk_gib=1023,
        enable_filestore=True,
        filestore_gib=1024,
    )
    assert demand(c) == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 12,
        "compute.instance.count": 6,
        "compute.instance.gpu.h100": 4,
        "compute.disk.count": 6,
        "compute.disk.size.network-ssd": 4_823_248_273_408,  # 2 × 200 + 4 × 1023 = 4492 GiB
        "compute.instance.non-gpu.vcpu": 16,  # GPU-node vCPUs are never added
        "compute.filesystem.count": 1,
        "compute.filesystem.size.network-ssd": 1_099_511_627_776,  # 1024 GiB
    }


def test_reserved_clustered_h200_takes_no_gpu_family_quota() -> None:
    c = ClusterDemandInput(
        target="p/train",
        region=R,
        gpu_count=2,
        gpu_platform="gpu-h200-sxm",
        gpu_preset="8gpu-128vcpu-1600gb",
        capacity_block_group=CBG,
        enable_gpu_cluster=True,
        infiniband_fabric="fabric-2",
    )
    assert demand(c) == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 4,
        "compute.instance.count": 2,
        "compute.disk.count": 2,
        "compute.disk.size.network-ssd": 2_196_875_771_904,  # 2 × 1023 GiB
        "compute.gpucluster.count": 1,
    }
    assert capacity_demand([c]) == [
        CapacityDemand(CBG, R, "gpu-h200-sxm", "fabric-2", required_gpus=16, targets=("p/train",))
    ]


def test_clustered_on_demand_h200() -> None:
    c = ClusterDemandInput(
        region=R,
        gpu_count=2,
        gpu_platform="gpu-h200-sxm",
        gpu_preset="8gpu-128vcpu-1600gb",
        enable_gpu_cluster=True,
        infiniband_fabric="fabric-3",
    )
    d = demand(c)
    assert d["compute.instance.gpu.h200"] == 16
    assert d["compute.gpucluster.count"] == 1
    assert d["compute.instance.count"] == 2
    assert "compute.instance.non-gpu.vcpu" not in d  # 128 vCPUs per GPU node never count
    assert capacity_demand([c]) == []


def test_preemptible_gpu_pool() -> None:
    c = ClusterDemandInput(
        region=R,
        cpu_count=1,
        cpu_preset="4vcpu-16gb",
        gpu_count=3,
        gpu_platform="gpu-h100-sxm",
        gpu_preset="1gpu-16vcpu-200gb",
        gpu_disk_gib=100,
        gpu_preemptible=True,
    )
    assert demand(c) == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 8,
        "compute.instance.count": 1,  # CPU only: preemptible GPU nodes are counted separately
        "compute.instance.preemptible.count": 3,
        "compute.disk.count": 4,
        "compute.disk.size.network-ssd": 459_561_500_672,  # 128 + 3 × 100 = 428 GiB
        "compute.instance.non-gpu.vcpu": 4,
    }


def test_preemptible_cpu_pool() -> None:
    c = ClusterDemandInput(
        region=R,
        cpu_count=2,
        cpu_preset="4vcpu-16gb",
        cpu_preemptible=True,
        gpu_count=1,
        gpu_platform="gpu-h100-sxm",
        gpu_preset="1gpu-16vcpu-200gb",
        gpu_disk_gib=100,
    )
    assert demand(c) == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 6,
        "compute.instance.count": 1,  # the on-demand GPU node only
        "compute.instance.preemptible.count": 2,  # preemptible CPU nodes, as the cloud charges them
        "compute.instance.gpu.h100": 1,
        "compute.disk.count": 3,
        "compute.disk.size.network-ssd": 356 * 2**30,  # 2 × 128 + 100 GiB
        "compute.instance.non-gpu.vcpu": 8,  # CPU vCPUs count whether or not the nodes are preemptible
    }


def test_mig_cluster_uses_128_gib_boot_disks_and_reserved_rtx6000() -> None:
    c = ClusterDemandInput(
        region=R,
        cpu_count=1,
        cpu_preset="8vcpu-32gb",
        gpu_count=2,
        gpu_platform="gpu-rtx6000",
        gpu_preset="1gpu-24vcpu-218gb",
        gpu_disk_gib=resolved_gpu_disk_gib(0, 1023, mig_enabled=True),
        capacity_block_group=CBG,
    )
    assert demand(c) == {
        "mk8s.cluster.count": 1,
        "vpc.allocation.count": 6,
        "compute.instance.count": 3,
        "compute.disk.count": 3,
        "compute.disk.size.network-ssd": 412_316_860_416,  # 128 + 2 × 128 GiB
        "compute.instance.non-gpu.vcpu": 8,
    }
    [cap] = capacity_demand([c])
    assert (cap.platform, cap.fabric, cap.required_gpus) == ("gpu-rtx6000", "", 2)


def test_reused_filesystem_is_not_counted() -> None:
    c = ClusterDemandInput(
        region=R,
        cpu_count=1,
        enable_filestore=True,
        existing_filestore="computefilesystem-e00x",
        filestore_gib=4096,
    )
    d = demand(c)
    assert "compute.filesystem.count" not in d
    assert "compute.filesystem.size.network-ssd" not in d
    assert d["compute.disk.count"] == 1


def test_new_projects_need_creation_topology() -> None:
    projects = [
        ProjectDemandInput(key="a", region=R),
        ProjectDemandInput(key="b", region=R),
        ProjectDemandInput(key="c", region=R, exists=True),
    ]
    assert demand(projects=projects) == {
        "vpc.network.count": 2,
        "vpc.subnet.count": 2,
        "vpc.pool.count": 4,
        "vpc.routetable.count": 2,
        "vpc.route.count": 2,
    }


def test_new_buckets_per_storage_class() -> None:
    buckets = [
        BucketDemandInput(key="a", region=R, storage_class="standard", size_gib=100),
        BucketDemandInput(key="b", region=R, storage_class="enhanced", size_gib=50),
        BucketDemandInput(key="c", region=R, storage_class="Enhanced-Throughput", size_gib=1),
        BucketDemandInput(key="d", region=R, storage_class="intelligent", size_gib=10, exists_verified=True),
    ]
    reqs = compute_requirements([], buckets=buckets)
    assert {r.name: (r.amount, r.unit) for r in reqs} == {
        "storage.bucket.count": (3, "count"),
        "storage.bucket.size.standard": (107_374_182_400, "byte"),  # 100 GiB
        "storage.bucket.size.enhanced-throughput": (54_760_833_024, "byte"),  # 50 + 1 GiB
    }


def test_bucket_storage_class_is_validated() -> None:
    with pytest.raises(ValidationError, match="storage_class"):
        BucketDemandInput(region=R, storage_class="glacier", size_gib=1)
    with pytest.raises(ValidationError):
        BucketDemandInput(region=R, size_gib=0)


def test_aggregates_per_name_and_region_and_sorts() -> None:
    a = ClusterDemandInput(region="eu-north1", cpu_count=2, cpu_preset="4vcpu-16gb")
    b = ClusterDemandInput(region="eu-north1", cpu_count=1, cpu_preset="4vcpu-16gb")
    c = ClusterDemandInput(region="us-central1", cpu_count=5, cpu_preset="4vcpu-16gb")
    reqs = compute_requirements([c, a, b])
    amounts = {(r.name, r.region): r.amount for r in reqs}
    assert amounts[("compute.instance.count", "eu-north1")] == 3
    assert amounts[("mk8s.cluster.count", "eu-north1")] == 2
    assert amounts[("compute.instance.count", "us-central1")] == 5
    assert amounts[("compute.instance.non-gpu.vcpu", "us-central1")] == 20
    assert [(r.region, r.name) for r in reqs] == sorted((r.region, r.name) for r in reqs)


def test_unchanged_live_verified_targets_count_zero() -> None:
    same = dict(
        region=R,
        gpu_count=2,
        gpu_platform="gpu-h200-sxm",
        gpu_preset="8gpu-128vcpu-1600gb",
        capacity_block_group=CBG,
    )
    verified = ClusterDemandInput(**same, unchanged_live_verified=True)
    fresh = ClusterDemandInput(**same)
    assert compute_requirements([verified]) == []
    assert capacity_demand([verified]) == []
    assert capacity_demand([verified, fresh])[0].required_gpus == 16
    assert demand(verified, fresh)["mk8s.cluster.count"] == 1


def test_gpu_pool_inputs_are_validated() -> None:
    with pytest.raises(ValidationError, match="gpu-"):
        ClusterDemandInput(region=R, gpu_count=1, gpu_platform="cpu-d3", gpu_preset="1gpu-16vcpu-200gb")
    with pytest.raises(ValidationError, match="positive GPU count"):
        ClusterDemandInput(region=R, gpu_count=1, gpu_platform="gpu-h100-sxm", gpu_preset="16vcpu-64gb")
    with pytest.raises(ValidationError):
        ClusterDemandInput(region=R, cpu_count=-1)
    with pytest.raises(ValidationError):
        ClusterDemandInput(region=R, bogus=1)  # type: ignore[call-arg]


def test_capacity_demand_sums_per_block() -> None:
    pools = [
        ClusterDemandInput(
            target=f"p/c{i}",
            region=R,
            gpu_count=n,
            gpu_platform="gpu-h200-sxm",
            gpu_preset="8gpu-128vcpu-1600gb",
            capacity_block_group=block,
            enable_gpu_cluster=True,
            infiniband_fabric="fabric-2",
        )
        for i, (n, block) in enumerate([(2, CBG), (3, CBG), (1, CBG + "x")])
    ]
    result = {d.block_id: (d.required_gpus, d.targets) for d in capacity_demand(pools)}
    assert result == {CBG: (40, ("p/c0", "p/c1")), CBG + "x": (8, ("p/c2",))}


@pytest.mark.parametrize(
    ("other", "what"),
    [
        ({"gpu_platform": "gpu-b200-sxm"}, "platform='gpu-b200-sxm'"),
        ({"infiniband_fabric": "fabric-7"}, "fabric='fabric-7'"),
        ({"enable_gpu_cluster": False}, "fabric=''"),  # non-clustered: no required fabric, still a mismatch
        ({"region": "us-central1"}, "region='us-central1'"),
    ],
)
def test_one_block_backing_different_shapes_is_an_error(other: dict[str, object], what: str) -> None:
    base: dict[str, object] = dict(
        target="p/a",
        region=R,
        gpu_count=1,
        gpu_platform="gpu-h200-sxm",
        gpu_preset="8gpu-128vcpu-1600gb",
        capacity_block_group=CBG,
        enable_gpu_cluster=True,
        infiniband_fabric="fabric-2",
    )
    a = ClusterDemandInput(**base)
    b = ClusterDemandInput(**{**base, "target": "p/b", **other})
    with pytest.raises(CapacityDemandConflict) as info:
        capacity_demand([a, b])
    message = str(info.value)
    assert what in message
    assert "p/b" in message and "p/a" in message
    assert CBG not in message  # the id is masked
    assert "capacityblockgroup-…a1b2" in message
    assert info.value.exit_code == 2


def test_a_preemptible_cpu_pool_reaches_the_demand_from_the_spec() -> None:
    import json

    from npa_pulumi.plan import resolve_targets
    from npa_pulumi.preflight.targets import cluster_demand
    from npa_pulumi.spec import parse_spec

    doc = {
        "name": "f",
        "region": R,
        "projects": [
            {
                "name": "p",
                "clusters": [{"cpu_nodes": {"count": 2, "preset": "4vcpu-16gb", "preemptible": True}}],
            }
        ],
    }
    [target] = resolve_targets(parse_spec(json.dumps(doc)))
    assert cluster_demand(target).cpu_preemptible is True
    assert demand(cluster_demand(target))["compute.instance.preemptible.count"] == 2
