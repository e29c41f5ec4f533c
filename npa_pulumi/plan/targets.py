"""Targets: one (project, cluster) of a fleet with every effective value resolved, and their selection.

A Target is what the rest of the product works from (stacks, tfvars, preflight, components), so every
"what does this cluster really get" decision of reference §3 is made here, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from npa_pulumi.errors import UserInputError
from npa_pulumi.runtime.presets import gpus_per_node, memory_gib_per_node, vcpus_per_node
from npa_pulumi.spec import constants as c
from npa_pulumi.spec.fabric import has_nvlink_fabric, thresholds_for
from npa_pulumi.spec.models import (
    ClusterSpec,
    FleetSpec,
    GpuFabricCheckSpec,
    NodePoolSpec,
    ProjectSpec,
    SoperatorSpec,
)
from npa_pulumi.spec.names import cluster_stack_name, project_stack_name
from npa_pulumi.spec.parse import ensure_valid
from npa_pulumi.spec.types import Backend

GpuReservation = Literal["strict", "on-demand", "none"]


class _Resolved(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ResolvedPool(_Resolved):
    """A node pool with its effective boot disk and per-node resources read from the preset."""

    count: int
    platform: str
    preset: str
    disk_size_gib: int
    preemptible: bool
    gpus_per_node: int
    vcpus_per_node: int
    memory_gib_per_node: int
    version: str = ""  # a pinned pool's own Kubernetes version ('' = the cluster's)


class ResolvedMig(_Resolved):
    """Enabled RTX PRO 6000 MIG: the one tested tuple and its pinned component versions."""

    strategy: str
    config: str
    k8s_version: str
    boot_disk_gib: int
    versions: dict[str, str]
    resources_per_node: dict[str, int]


class ResolvedKubeRay(_Resolved):
    worker_replicas: int
    worker_cpus: int
    worker_memory_gib: int
    ray_version: str
    image: str


class ResolvedHealth(_Resolved):
    """Settings of the GPU health gate run after a deploy."""

    stabilization_seconds: int
    timeout_minutes: int
    cuda_smoke: bool
    cuda_smoke_image: str
    graphics_smoke: bool
    graphics_smoke_image: str


class ResolvedFabricCheck(_Resolved):
    """The fabric check's effective settings: what runs (intra-node, inter-node) and what it must reach;
    `not_applicable` says why nothing runs (recorded, never a silent pass)."""

    intra_node: bool
    inter_node: bool
    intra_node_min_busbw_gbps: int
    inter_node_min_busbw_gbps: int
    threshold_source: str
    min_bytes: str
    max_bytes: str
    step_factor: int
    timeout_minutes: int
    not_applicable: str
    inter_not_applicable: str


class ResolvedObjectStorage(_Resolved):
    """An enabled project bucket. `bucket_name` None means a name derived at deploy time."""

    storage_class: str  # normalized: standard | enhanced_throughput | intelligent
    display_storage_class: str  # standard | enhanced | intelligent
    size_gibibytes: int
    size_bytes: int
    bucket_name: str | None


class ResolvedCluster(_Resolved):
    """Every effective value of one cluster. Private values (capacity block, chart source) are SecretStr."""

    name: str
    backend: Backend
    backend_explicit: bool
    cpu_nodes: ResolvedPool | None
    gpu_nodes: ResolvedPool | None
    gpu_nodes_per_group: int
    gpu_node_groups: int
    capacity_block_group: SecretStr | None
    gpu_reservation: GpuReservation
    enable_gpu_cluster: bool
    infiniband_fabric: str
    requested_gpu_driver_mode: str
    gpu_driver_mode: str  # effective
    managed_driver_preset: str | None  # None unless the effective mode is managed-image (with GPUs)
    nvswitch_topology: bool
    allow_unsafe_nvswitch_operator: bool
    enable_filestore: bool
    existing_filestore: str
    filestore_disk_size_gibibytes: int
    filestore_mount_path: str
    filestore_mount_tag: str
    filesystem_csi_chart_repository: SecretStr | None
    k8s_version: str  # "" means the backend's default
    subnet_id: str | None
    mig: ResolvedMig | None
    kuberay: ResolvedKubeRay | None
    gpu_workload_profile: str | None
    gpu_driver_package_repositories: dict[str, str]
    health: ResolvedHealth
    fabric_check: ResolvedFabricCheck
    soperator: SoperatorSpec | None

    def gpu_count(self) -> int:
        return self.gpu_nodes.count if self.gpu_nodes else 0

    def cpu_count(self) -> int:
        return self.cpu_nodes.count if self.cpu_nodes else 0

    def capacity_block_group_value(self) -> str:
        """The capacity block id itself, for the runtime-only paths that need it (never print it)."""
        return self.capacity_block_group.get_secret_value() if self.capacity_block_group else ""


class Target(_Resolved):
    """One (project, cluster) of the fleet, ready to plan or deploy."""

    fleet: str
    project_key: str
    display_name: str
    project_id: str | None
    region: str  # "" means resolved at deploy time (the profile's configuration: Fleet.resolve_regions)
    cluster_name: str
    backend: Backend
    cluster: ResolvedCluster
    project_stack: str
    cluster_stack: str
    object_storage: ResolvedObjectStorage | None
    project_index: int  # positions in the spec, for messages
    cluster_index: int


class SelectorError(UserInputError):
    """An --only-projects / --only-clusters value that names nothing in the spec."""

    kind = "invalid-selector"

    def __init__(self, message: str, valid_choices: list[str]) -> None:
        super().__init__(message)
        self.valid_choices = valid_choices

    def to_dict(self) -> dict[str, Any]:
        return {**super().to_dict(), "valid_choices": self.valid_choices}


def resolve_targets(
    spec: FleetSpec,
    only_projects: Sequence[str] = (),
    only_clusters: Sequence[str] = (),
    project_prefix: str | None = None,
    *,
    checked: bool = False,
) -> list[Target]:
    """The selected targets of a fleet, in spec order.

    `only_projects` match a project's key or display name; `only_clusters` match cluster names within
    the selected projects; `project_prefix` overrides the spec's prefix for display names. A selector
    that matches nothing is an error naming the valid choices. Raises SpecError for an invalid spec.
    `checked`: the caller has just read the spec from its text (`load_spec`, which runs the same rules,
    with positions) and kept it to itself since: the rules are not run again (~0.3 s at 10,000 clusters).
    """
    if not checked:
        ensure_valid(spec)
    prefix = spec.project_prefix if project_prefix is None else project_prefix
    projects = _select_projects(spec, _clean(only_projects), prefix)
    wanted_clusters = _clean(only_clusters)
    _check_cluster_selectors(projects, wanted_clusters)
    targets: list[Target] = []
    for index, project in projects:
        storage = resolve_object_storage(project)
        for position, cluster in enumerate(project.clusters):
            if wanted_clusters and cluster.name not in wanted_clusters:
                continue
            targets.append(_target(spec, prefix, index, project, position, cluster, storage))
    return targets


def _clean(values: Sequence[str]) -> list[str]:
    """Selectors as given, split on commas (`--only-projects a,b`), blanks dropped, order kept."""
    seen: dict[str, None] = {}
    for value in values:
        for part in str(value).split(","):
            if part.strip():
                seen.setdefault(part.strip(), None)
    return list(seen)


def _select_projects(spec: FleetSpec, wanted: list[str], prefix: str) -> list[tuple[int, ProjectSpec]]:
    indexed = list(enumerate(spec.projects))
    if not wanted:
        return indexed
    names = {project.key(): index for index, project in indexed}
    names.update({project.display_name(prefix): index for index, project in indexed})
    unknown = [value for value in wanted if value not in names]
    if unknown:
        choices = [
            f"{project.key()} ({project.display_name(prefix)})"
            if project.display_name(prefix) != project.key()
            else project.key()
            for _, project in indexed
        ]
        raise SelectorError(
            f"unknown project selector(s): {', '.join(unknown)}; valid choices (key or display name): "
            + ", ".join(choices),
            choices,
        )
    chosen = {names[value] for value in wanted}
    return [(index, project) for index, project in indexed if index in chosen]


def _check_cluster_selectors(projects: list[tuple[int, ProjectSpec]], wanted: list[str]) -> None:
    available = list(dict.fromkeys(cluster.name for _, project in projects for cluster in project.clusters))
    unknown = [value for value in wanted if value not in available]
    if unknown:
        raise SelectorError(
            f"unknown cluster selector(s): {', '.join(unknown)}; valid choices in the selected project(s): "
            + ", ".join(available),
            available,
        )


def _target(
    spec: FleetSpec,
    prefix: str,
    index: int,
    project: ProjectSpec,
    position: int,
    cluster: ClusterSpec,
    storage: ResolvedObjectStorage | None,
) -> Target:
    key = project.key()
    return Target(
        fleet=spec.name,
        project_key=key,
        display_name=project.display_name(prefix),
        project_id=project.project_id or None,
        region=project.region or spec.region,
        cluster_name=cluster.name,
        backend=cluster.backend,
        cluster=resolve_cluster(cluster),
        project_stack=project_stack_name(spec.name, key),
        cluster_stack=cluster_stack_name(spec.name, key, cluster.name),
        object_storage=storage,
        project_index=index,
        cluster_index=position,
    )


def resolve_object_storage(project: ProjectSpec) -> ResolvedObjectStorage | None:
    storage = project.object_storage
    if storage is None or not storage.enabled:
        return None
    return ResolvedObjectStorage(
        storage_class=storage.normalized_storage_class(),
        display_storage_class=storage.display_storage_class(),
        size_gibibytes=storage.size_gibibytes,
        size_bytes=storage.size_gibibytes * 2**30,
        bucket_name=storage.bucket_name or None,
    )


def _pool(pool: NodePoolSpec | None, disk_size_gib: int) -> ResolvedPool | None:
    if pool is None:
        return None
    return ResolvedPool(
        count=pool.count,
        platform=pool.platform or "",
        preset=pool.preset,
        disk_size_gib=disk_size_gib,
        preemptible=pool.preemptible,
        gpus_per_node=gpus_per_node(pool.preset),
        vcpus_per_node=vcpus_per_node(pool.preset),
        memory_gib_per_node=memory_gib_per_node(pool.preset),
        version=pool.version.strip() if pool.pin else "",
    )


def resolve_cluster(cluster: ClusterSpec) -> ResolvedCluster:
    """The effective values of one (valid) cluster."""
    selection = cluster.driver_selection()
    per_group, groups = cluster.gpu_node_layout()
    block = cluster.capacity_block_group()
    gpu_count = cluster.gpu_count()
    reservation: GpuReservation = "none" if gpu_count <= 0 else ("strict" if block else "on-demand")
    return ResolvedCluster(
        name=cluster.name,
        backend=cluster.backend,
        backend_explicit=cluster.backend_explicit,
        cpu_nodes=_pool(cluster.cpu_nodes, cluster.resolved_cpu_disk_size_gib()),
        gpu_nodes=_pool(cluster.gpu_nodes, cluster.resolved_gpu_disk_size_gib()),
        gpu_nodes_per_group=per_group,
        gpu_node_groups=groups,
        capacity_block_group=SecretStr(block) if block else None,
        gpu_reservation=reservation,
        enable_gpu_cluster=cluster.resolved_enable_gpu_cluster(),
        infiniband_fabric=cluster.infiniband_fabric,
        requested_gpu_driver_mode=selection.requested_mode,
        gpu_driver_mode=selection.effective_mode,
        managed_driver_preset=selection.managed_driver_preset if selection.uses_managed_image else None,
        nvswitch_topology=selection.nvswitch,
        allow_unsafe_nvswitch_operator=cluster.allow_unsafe_nvswitch_operator,
        enable_filestore=cluster.enable_filestore,
        existing_filestore=cluster.existing_filestore,
        filestore_disk_size_gibibytes=cluster.filestore_disk_size_gibibytes,
        filestore_mount_path=cluster.filestore_mount_path,
        filestore_mount_tag=cluster.filestore_mount_tag,
        filesystem_csi_chart_repository=(
            SecretStr(cluster.filesystem_csi_chart_repository)
            if cluster.filesystem_csi_chart_repository
            else None
        ),
        k8s_version=cluster.soperator.k8s_version if cluster.soperator else cluster.resolved_k8s_version(),
        subnet_id=cluster.subnet_id or None,
        mig=_mig(cluster),
        kuberay=_kuberay(cluster),
        gpu_workload_profile=cluster.gpu_workload_profile or None,
        gpu_driver_package_repositories=dict(cluster.gpu_driver_package_repositories),
        health=ResolvedHealth(
            stabilization_seconds=cluster.gpu_health_stabilization_seconds,
            timeout_minutes=cluster.gpu_health_timeout_minutes,
            cuda_smoke=cluster.gpu_cuda_smoke,
            cuda_smoke_image=cluster.gpu_cuda_smoke_image,
            graphics_smoke=cluster.gpu_graphics_smoke,
            graphics_smoke_image=cluster.gpu_graphics_smoke_image,
        ),
        fabric_check=_fabric_check(cluster),
        soperator=cluster.soperator,
    )


def _fabric_check(cluster: ClusterSpec) -> ResolvedFabricCheck:
    block = cluster.gpu_fabric_check or GpuFabricCheckSpec()
    platform, preset = cluster.gpu_platform(), cluster.gpu_preset()
    nvlink = cluster.gpu_count() > 0 and has_nvlink_fabric(platform, preset)
    table = thresholds_for(platform, preset)
    overridden = [
        name
        for name in ("intra_node_min_busbw_gbps", "inter_node_min_busbw_gbps")
        if getattr(block, name) > 0
    ]
    why = ""
    if cluster.gpu_count() <= 0:
        why = "no GPU nodes"
    elif not nvlink:
        why = f"{preset or 'the preset'} on {platform} has no multi-GPU NVLink/NVSwitch fabric"
    elif block.enabled is False:
        why = "disabled in the spec (gpu_fabric_check.enabled: false)"
    inter_why = ""
    if not cluster.resolved_enable_gpu_cluster():
        inter_why = "no InfiniBand GPU cluster (enable_gpu_cluster is off)"
    elif cluster.gpu_count() < 2:
        inter_why = "fewer than two GPU nodes"
    source = table.source + (f"; overridden in the spec: {', '.join(overridden)}" if overridden else "")
    return ResolvedFabricCheck(
        intra_node=not why,
        inter_node=not why and not inter_why,
        intra_node_min_busbw_gbps=block.intra_node_min_busbw_gbps or table.intra_node_gbps,
        inter_node_min_busbw_gbps=block.inter_node_min_busbw_gbps or table.inter_node_gbps,
        threshold_source=source,
        min_bytes=block.min_bytes.strip().upper(),
        max_bytes=block.max_bytes.strip().upper(),
        step_factor=block.step_factor,
        # never past the health gate's own deadline (a spec without the block gets the smaller one)
        timeout_minutes=min(block.timeout_minutes, cluster.gpu_health_timeout_minutes),
        not_applicable=why,
        inter_not_applicable=inter_why,
    )


def _mig(cluster: ClusterSpec) -> ResolvedMig | None:
    if not cluster.mig_enabled() or cluster.mig is None:
        return None
    per_node = max(cluster.gpus_per_node(), 1)
    return ResolvedMig(
        strategy=cluster.mig.strategy,
        config=cluster.mig.config,
        k8s_version=cluster.resolved_k8s_version(),
        boot_disk_gib=cluster.resolved_gpu_disk_size_gib(),
        versions=dict(c.MIG_PINNED_VERSIONS),
        resources_per_node={name: count * per_node for name, count in c.MIG_RESOURCES_PER_GPU.items()},
    )


def _kuberay(cluster: ClusterSpec) -> ResolvedKubeRay | None:
    if not cluster.kuberay_enabled() or cluster.kuberay is None:
        return None
    return ResolvedKubeRay(**cluster.kuberay.policy(), ray_version=c.RAY_VERSION, image=c.RAY_IMAGE)
