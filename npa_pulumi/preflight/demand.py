"""What the selected fleet targets need from the tenant: quota requirements and reserved GPU capacity.

The arithmetic follows the original `npa fleet` quota preflight (reference §5) exactly. The inputs are this
module's own small models, so preflight does not depend on how the spec or the plan represent a target;
`npa_pulumi.preflight.targets` converts resolved targets into them.

Every amount is the *incremental* demand of a deploy: a deployed cluster whose live cluster holds everything
its target asks for is `unchanged_live_verified`, one that holds part of it is charged only the rest (its
counts are the nodes still charged, with `cluster_exists`, `gpu_cluster_exists` and `filestore_held_gib`;
`preflight/live_proof.py` proves both), an existing project is `exists` and a verified existing bucket
`exists_verified`, and those contribute nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.errors import UserInputError
from npa_pulumi.runtime.presets import gpus_per_node, vcpus_per_node
from npa_pulumi.spec.constants import DEFAULT_GPU_DISK_GIB
from npa_pulumi.spec.effective import resolved_cpu_disk_gib

GIB = 2**30
DEFAULT_FILESTORE_GIB = 1024

# Quota names, spelled once.
MK8S_CLUSTER_COUNT = "mk8s.cluster.count"
VPC_ALLOCATION_COUNT = "vpc.allocation.count"
INSTANCE_COUNT = "compute.instance.count"
PREEMPTIBLE_INSTANCE_COUNT = "compute.instance.preemptible.count"
GPU_FAMILY_PREFIX = "compute.instance.gpu."
DISK_COUNT = "compute.disk.count"
DISK_SIZE = "compute.disk.size.network-ssd"
NON_GPU_VCPU = "compute.instance.non-gpu.vcpu"
GPU_CLUSTER_COUNT = "compute.gpucluster.count"
FILESYSTEM_COUNT = "compute.filesystem.count"
FILESYSTEM_SIZE = "compute.filesystem.size.network-ssd"
BUCKET_COUNT = "storage.bucket.count"
BUCKET_SIZE_PREFIX = "storage.bucket.size."
VPC_NETWORK_COUNT = "vpc.network.count"
VPC_SUBNET_COUNT = "vpc.subnet.count"
VPC_POOL_COUNT = "vpc.pool.count"
VPC_ROUTETABLE_COUNT = "vpc.routetable.count"
VPC_ROUTE_COUNT = "vpc.route.count"

# The creation topology of a new project. The catalog may not advertise these in a region; preflight then
# reports them as unadvertised instead of rejecting the region (a finite advertised limit is still checked).
OPTIONAL_VPC_TOPOLOGY: frozenset[str] = frozenset(
    {VPC_NETWORK_COUNT, VPC_SUBNET_COUNT, VPC_POOL_COUNT, VPC_ROUTETABLE_COUNT, VPC_ROUTE_COUNT}
)

# Sizes are quota'd in bytes; everything else here is a count (vCPUs and GPUs included).
_BYTE_QUOTA_PREFIXES = ("compute.disk.size.", "compute.filesystem.size.", BUCKET_SIZE_PREFIX)

_GPU_FAMILY_RE = re.compile(r"^gpu-([a-z0-9]+)")

# Storage classes as the spec normalises them (lower case, `-` → `_`, `enhanced` is Enhanced Throughput).
_STORAGE_CLASSES = {
    "standard": "standard",
    "intelligent": "intelligent",
    "enhanced": "enhanced_throughput",
    "enhanced_throughput": "enhanced_throughput",
}


def is_byte_quota(name: str) -> bool:
    return name.startswith(_BYTE_QUOTA_PREFIXES)


def default_unit(name: str) -> str:
    """The unit a requirement is counted in before an allowance says otherwise."""
    return "byte" if is_byte_quota(name) else "count"


def gpu_family(platform: str) -> str:
    """The GPU quota family of a platform: `gpu-h200-sxm` → `h200`, `gpu-rtx6000-a` → `rtx6000`, cpu → ""."""
    match = _GPU_FAMILY_RE.match(platform.strip().lower())
    return match.group(1) if match else ""


def preset_gpus(preset: str) -> int:
    """GPUs per node, by the spec's one preset parser (`8gpu-128vcpu-1600gb` → 8; none → 0)."""
    return gpus_per_node(preset)


def preset_vcpus(preset: str) -> int:
    """vCPUs per node, by the spec's one preset parser (an empty preset adds nothing)."""
    return vcpus_per_node(preset)


def normalize_storage_class(value: str) -> str:
    """`Enhanced-Throughput` → `enhanced_throughput`; raises ValueError for anything but the three classes."""
    key = value.strip().lower().replace("-", "_")
    if key not in _STORAGE_CLASSES:
        raise ValueError(f"storage_class must be standard, enhanced, or intelligent (got {value!r})")
    return _STORAGE_CLASSES[key]


class _DemandModel(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ClusterDemandInput(_DemandModel):
    """One (project, cluster) target with its *resolved* effective values."""

    target: str = ""  # "<project>/<cluster>", only for messages
    region: str = Field(min_length=1)
    cpu_count: int = Field(default=0, ge=0)
    cpu_platform: str = "cpu-d3"
    cpu_preset: str = ""
    cpu_disk_gib: int = Field(default=0, ge=0)  # the pool's disk_size_gib; 0 means the 128 GiB default
    cpu_preemptible: bool = False
    gpu_count: int = Field(default=0, ge=0)
    gpu_platform: str = ""
    gpu_preset: str = ""
    # Already resolved (spec.effective.resolved_gpu_disk_gib): 128 under MIG, 1023 by default.
    gpu_disk_gib: int = Field(default=DEFAULT_GPU_DISK_GIB, ge=0)
    gpu_preemptible: bool = False
    capacity_block_group: str = ""
    enable_gpu_cluster: bool = False  # resolved (explicit value, else auto)
    infiniband_fabric: str = ""
    enable_filestore: bool = False
    existing_filestore: str = ""
    filestore_gib: int = Field(default=DEFAULT_FILESTORE_GIB, ge=0)
    # A deployed cluster whose live cluster holds everything the target asks for: zero new demand.
    unchanged_live_verified: bool = False
    # A deployed cluster proven live that holds part of it (preflight/live_proof.py): the pool counts above
    # are then the nodes still charged (new or replaced groups, added workers), not the spec's counts.
    cluster_exists: bool = False  # the mk8s cluster runs: not charged again
    gpu_cluster_exists: bool = False  # its GPU cluster is live: not charged again
    filestore_held_gib: int | None = Field(default=None, ge=0)  # its live shared filesystem's size

    @field_validator("capacity_block_group", "existing_filestore", "infiniband_fabric")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @model_validator(mode="after")
    def _gpu_pool_is_countable(self) -> ClusterDemandInput:
        # The spec already rejects these; repeating the check here keeps a malformed input from silently
        # budgeting zero GPUs (or a `compute.instance.gpu.` quota with no family).
        if self.gpu_count > 0:
            if not gpu_family(self.gpu_platform):
                raise ValueError(f"gpu_platform must start with 'gpu-' (got {self.gpu_platform!r})")
            if preset_gpus(self.gpu_preset) <= 0:
                raise ValueError(f"gpu_preset must include a positive GPU count (got {self.gpu_preset!r})")
            if self.gpu_disk_gib <= 0:
                raise ValueError("gpu_disk_gib must be the resolved (positive) GPU boot disk size")
        return self

    @property
    def gpus_per_node(self) -> int:
        return preset_gpus(self.gpu_preset)

    @property
    def nodes(self) -> int:
        return self.cpu_count + self.gpu_count

    @property
    def creates_filesystem(self) -> bool:
        return self.enable_filestore and not self.existing_filestore


class ProjectDemandInput(_DemandModel):
    """A project the deploy will create (`exists` when a single project listing found it)."""

    key: str = ""
    region: str = Field(min_length=1)
    exists: bool = False


class BucketDemandInput(_DemandModel):
    """A project's object-storage declaration (`exists_verified` when the bucket is present and verified)."""

    key: str = ""
    region: str = Field(min_length=1)
    storage_class: str = "standard"
    size_gib: int = Field(gt=0)
    exists_verified: bool = False

    @field_validator("storage_class")
    @classmethod
    def _normalize_class(cls, value: str) -> str:
        return normalize_storage_class(value)

    @property
    def size_quota(self) -> str:
        return BUCKET_SIZE_PREFIX + self.storage_class.replace("_", "-")


# --- soperator targets -----------------------------------------------------------------------------
# Every node group the soperator recipe creates (system, controller, login, accounting, each chunk of each
# worker node set), their boot disks, the shared filesystems, one InfiniBand GPU cluster per GPU worker set,
# and the VPC allocations (two per node, as for mk8s, plus the login node group's static IP).


class NodeGroupDemand(_DemandModel):
    role: str
    nodes: int = Field(ge=0)
    platform: str
    preset: str
    disk_gib: int = Field(ge=0)
    preemptible: bool = False
    reserved: bool = (
        False  # a STRICT capacity block backs its GPUs (checked on its own, not the family quota)
    )


class SoperatorDemandInput(_DemandModel):
    target: str = ""
    region: str = Field(min_length=1)
    node_groups: tuple[NodeGroupDemand, ...]
    filesystems_gib: tuple[int, ...]
    gpu_clusters: int = Field(default=0, ge=0)
    static_ips: int = Field(default=1, ge=0)  # the login node group's allocation
    unchanged_live_verified: bool = False

    @property
    def nodes(self) -> int:
        return sum(g.nodes for g in self.node_groups)


@dataclass(frozen=True, slots=True)
class Requirement:
    """The fleet's total incremental need for one allowance in one region."""

    name: str
    region: str
    amount: int
    unit: str  # byte | count

    @property
    def key(self) -> tuple[str, str]:
        return (self.name, self.region)


class _Tally:
    """Sums amounts per (name, region); zero amounts never create an entry."""

    def __init__(self) -> None:
        self.amounts: dict[tuple[str, str], int] = {}

    def add(self, name: str, region: str, amount: int) -> None:
        if amount > 0:
            key = (name, region)
            self.amounts[key] = self.amounts.get(key, 0) + amount

    def requirements(self) -> list[Requirement]:
        return [
            Requirement(name=name, region=region, amount=amount, unit=default_unit(name))
            for (name, region), amount in sorted(self.amounts.items(), key=lambda kv: (kv[0][1], kv[0][0]))
        ]


def _add_cluster(tally: _Tally, c: ClusterDemandInput) -> None:
    r = c.region
    if not c.cluster_exists:
        tally.add(MK8S_CLUSTER_COUNT, r, 1)
    # Each private worker takes its address plus a pod alias; the control plane is service-owned and
    # worker public IPs are off, so neither is counted.
    tally.add(VPC_ALLOCATION_COUNT, r, 2 * c.nodes)
    # Preemptible nodes, CPU or GPU, are charged to the preemptible instance count instead.
    tally.add(PREEMPTIBLE_INSTANCE_COUNT if c.cpu_preemptible else INSTANCE_COUNT, r, c.cpu_count)
    if c.gpu_count > 0:
        if c.gpu_preemptible:
            tally.add(PREEMPTIBLE_INSTANCE_COUNT, r, c.gpu_count)
        else:
            tally.add(INSTANCE_COUNT, r, c.gpu_count)
            # A STRICT reserved pool draws its GPUs from the capacity block, which preflight checks on its
            # own (capacity.py); the block check failing fails preflight rather than falling back here.
            if not c.capacity_block_group:
                tally.add(GPU_FAMILY_PREFIX + gpu_family(c.gpu_platform), r, c.gpu_count * c.gpus_per_node)
    tally.add(DISK_COUNT, r, c.nodes)  # one boot disk per node
    if c.cpu_count > 0:
        cpu_disk = resolved_cpu_disk_gib(c.cpu_disk_gib)
        tally.add(DISK_SIZE, r, c.cpu_count * cpu_disk * GIB)
    if c.gpu_count > 0:
        tally.add(DISK_SIZE, r, c.gpu_count * c.gpu_disk_gib * GIB)
    # GPU-node vCPUs never count here: on-demand GPU nodes use the family quota, preemptible ones the
    # preemptible instance count. CPU-node vCPUs count whether or not the nodes are preemptible.
    tally.add(NON_GPU_VCPU, r, c.cpu_count * preset_vcpus(c.cpu_preset))
    if c.enable_gpu_cluster and not c.gpu_cluster_exists:
        tally.add(GPU_CLUSTER_COUNT, r, 1)
    if c.creates_filesystem:
        if c.filestore_held_gib is None:
            tally.add(FILESYSTEM_COUNT, r, 1)
        # A held filesystem is charged only the size it grows by; one that shrinks needs nothing new.
        tally.add(FILESYSTEM_SIZE, r, (c.filestore_gib - (c.filestore_held_gib or 0)) * GIB)


def compute_requirements(
    clusters: Iterable[ClusterDemandInput],
    projects: Iterable[ProjectDemandInput] = (),
    buckets: Iterable[BucketDemandInput] = (),
    soperators: Iterable[SoperatorDemandInput] = (),
) -> list[Requirement]:
    """Aggregate the incremental quota demand per (name, region), sorted by region then name.

    Zero amounts are dropped, so a quota that nothing needs is never looked up. `soperators`: the
    soperator targets (npa_pulumi/preflight/soperator_demand.py builds them).
    """
    tally = _Tally()
    for soperator in soperators:
        if not soperator.unchanged_live_verified:
            add_soperator(tally, soperator)
    for cluster in clusters:
        if not cluster.unchanged_live_verified:
            _add_cluster(tally, cluster)
    for bucket in buckets:
        if not bucket.exists_verified:
            # A bucket cap is budgeted in full against its class: it is a maximum, not reserved bytes.
            tally.add(BUCKET_COUNT, bucket.region, 1)
            tally.add(bucket.size_quota, bucket.region, bucket.size_gib * GIB)
    for project in projects:
        if not project.exists:
            # A new project needs its network, subnet, private + public pools, route table and egress route.
            tally.add(VPC_NETWORK_COUNT, project.region, 1)
            tally.add(VPC_SUBNET_COUNT, project.region, 1)
            tally.add(VPC_POOL_COUNT, project.region, 2)
            tally.add(VPC_ROUTETABLE_COUNT, project.region, 1)
            tally.add(VPC_ROUTE_COUNT, project.region, 1)
    return tally.requirements()


@dataclass(frozen=True, slots=True)
class CapacityDemand:
    """GPUs that STRICT pools need from one capacity block group, with the shape the block must have."""

    block_id: str
    region: str
    platform: str
    fabric: str  # required fabric; "" when no pool on the block uses GPU clustering
    required_gpus: int
    targets: tuple[str, ...] = ()


class CapacityDemandConflict(UserInputError):
    """One capacity block group is bound by pools that need different regions, platforms or fabrics."""

    kind = "capacity-demand-conflict"


def capacity_demand(clusters: Iterable[ClusterDemandInput]) -> list[CapacityDemand]:
    """Sum count × GPUs-per-node per capacity block group, sorted by block id.

    The required fabric is the pool's `infiniband_fabric` only when GPU clustering is on. A block bound by
    pools with a different region, platform or required fabric cannot satisfy all of them: every such
    conflict is raised at once as `CapacityDemandConflict` (block ids masked).
    """
    shapes: dict[str, tuple[str, str, str]] = {}  # block → (region, platform, required fabric)
    gpus: dict[str, int] = {}
    targets: dict[str, list[str]] = {}
    conflicts: dict[str, list[str]] = {}
    for c in clusters:
        if c.unchanged_live_verified or c.gpu_count <= 0 or not c.capacity_block_group:
            continue
        block = c.capacity_block_group
        shape = (c.region, c.gpu_platform, c.infiniband_fabric if c.enable_gpu_cluster else "")
        first = shapes.setdefault(block, shape)
        if shape != first:
            first_target = targets[block][0] or "another pool"
            conflicts.setdefault(block, []).append(
                f"{c.target or 'a pool'} needs region={shape[0]!r} platform={shape[1]!r} fabric={shape[2]!r}"
                f" but {first_target} needs region={first[0]!r} platform={first[1]!r} fabric={first[2]!r}"
            )
            continue
        gpus[block] = gpus.get(block, 0) + c.gpu_count * c.gpus_per_node
        targets.setdefault(block, []).append(c.target)
    if conflicts:
        lines = [f"{mask_id(block)}: {detail}" for block in sorted(conflicts) for detail in conflicts[block]]
        raise CapacityDemandConflict(
            "one capacity_block_group cannot back incompatible GPU pools:\n  - " + "\n  - ".join(lines)
        )
    return [
        CapacityDemand(block, *shapes[block], required_gpus=gpus[block], targets=tuple(targets[block]))
        for block in sorted(shapes)
    ]


def add_soperator(tally: _Tally, s: SoperatorDemandInput) -> None:
    r = s.region
    tally.add(MK8S_CLUSTER_COUNT, r, 1)
    tally.add(VPC_ALLOCATION_COUNT, r, 2 * s.nodes + s.static_ips)
    for g in s.node_groups:
        gpu = bool(gpu_family(g.platform)) and preset_gpus(g.preset) > 0
        tally.add(PREEMPTIBLE_INSTANCE_COUNT if g.preemptible else INSTANCE_COUNT, r, g.nodes)
        if gpu and not g.preemptible and not g.reserved:
            tally.add(GPU_FAMILY_PREFIX + gpu_family(g.platform), r, g.nodes * preset_gpus(g.preset))
        if not gpu:
            tally.add(NON_GPU_VCPU, r, g.nodes * preset_vcpus(g.preset))
        tally.add(DISK_COUNT, r, g.nodes)
        tally.add(DISK_SIZE, r, g.nodes * g.disk_gib * GIB)
    tally.add(GPU_CLUSTER_COUNT, r, s.gpu_clusters)
    tally.add(FILESYSTEM_COUNT, r, len(s.filesystems_gib))
    tally.add(FILESYSTEM_SIZE, r, sum(s.filesystems_gib) * GIB)
