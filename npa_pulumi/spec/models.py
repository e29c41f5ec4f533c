"""The npa.fleet/v0.0.1 model: a fleet of projects, each with clusters whose `defaults` are already merged.

These are the *resolved* declarations the SDK works with: `ProjectSpec.clusters` holds every cluster of a
project (the implicit one included), each carrying its own values. The YAML surface (defaults, backend
envelopes, unnamed clusters) is handled by `npa_pulumi.spec.parse`; semantic rules live in
`npa_pulumi.spec.rules`. The models enforce types only, so an invalid combination is reported with every
other problem instead of failing at construction.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from npa_pulumi.runtime.presets import gpus_per_node
from npa_pulumi.spec import constants as c
from npa_pulumi.spec.effective import (
    DriverSelection,
    is_fabric_capable_topology,
    resolve_driver,
    resolved_cpu_disk_gib,
    resolved_gpu_disk_gib,
)
from npa_pulumi.spec.names import slug
from npa_pulumi.spec.types import Backend, Boolean, Integer, LowerText, StrictInteger, StrictText, Text

_RTX_PLATFORM_RE = re.compile(c.RTX_PLATFORM_PATTERN)


def drop_nulls(data: Any) -> Any:
    """`key: null` means "not set" (as `or default` did in the original), so nulls fall back to defaults."""
    if isinstance(data, dict):
        return {key: value for key, value in data.items() if value is not None}
    return data


class SpecModel(BaseModel):
    """Base for every spec model: unknown keys are errors, `null` means unset."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    @model_validator(mode="before")
    @classmethod
    def _null_means_unset(cls, data: Any) -> Any:
        return drop_nulls(data)


class NodePoolSpec(SpecModel):
    """A node group of a cluster: `cpu_nodes` or `gpu_nodes`."""

    count: Integer = Field(0, description="Number of nodes.")
    platform: Text | None = Field(
        None, description="Compute platform; unset means cpu-d3 for cpu_nodes and gpu-rtx6000 for gpu_nodes."
    )
    preset: Text = Field("", description="Node preset, e.g. 16vcpu-64gb or 8gpu-128vcpu-1600gb.")
    disk_size_gib: Integer = Field(
        0, description="Boot disk GiB; 0 means the default (128 for CPU, gpu_disk_size_gib or 128 under MIG)."
    )
    capacity_block_group: Text = Field(
        "",
        description="GPU pools only: a capacity block group id. Renders a STRICT reservation (never falls "
        "back to on-demand). Runtime-only: never printed, never written to disk.",
        repr=False,
    )
    preemptible: Boolean = Field(False, description="Preemptible nodes.")
    pin: Boolean = Field(
        False,
        description="Hold this node group's Kubernetes version while the control plane moves "
        "(`upgrade plan`, `upgrade run`); it may stay at most the supported skew behind (docs/upgrades.md).",
    )
    version: Text = Field(
        "",
        description="A pinned pool's Kubernetes version (e.g. 1.32), rendered for its node groups while the "
        "cluster's k8s_version moves on; empty: the cluster's k8s_version. Needs pin: true.",
    )

    @field_validator("capacity_block_group")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    def is_gpu(self) -> bool:
        return (self.platform or "").startswith("gpu-")


class MigSpec(SpecModel):
    """RTX PRO 6000 hardware MIG. A present block is enabled unless `enabled: false`."""

    enabled: Boolean = Field(
        True, description="Enable hardware MIG (default true when the block is present)."
    )
    strategy: LowerText = Field(
        c.MIG_STRATEGY, description="MIG strategy: 'mixed' (or 'none' when disabled)."
    )
    config: LowerText = Field(
        c.MIG_CONFIG, description="mig-parted config: 'all-balanced' ('' when disabled)."
    )

    @model_validator(mode="before")
    @classmethod
    def _defaults_follow_enabled(cls, data: Any) -> Any:
        data = drop_nulls(data)
        if isinstance(data, dict) and data.get("enabled", True) is False:
            data = {"strategy": "none", "config": "", **data}
        return data


class KubeRaySpec(SpecModel):
    """Opt-in CPU RayCluster with a fixed worker group (mk8s only). Strictly typed, as the shared backend
    validates it (seed): a `null` setting is refused with its path, not taken as unset."""

    enabled: Boolean = Field(False, description="Deploy the RayCluster.")
    worker_replicas: StrictInteger = Field(1, description="Fixed worker count.")
    worker_cpus: StrictInteger = Field(2, description="vCPUs per worker.")
    worker_memory_gib: StrictInteger = Field(4, description="Memory GiB per worker.")

    @model_validator(mode="before")
    @classmethod
    def _null_means_unset(cls, data: Any) -> Any:
        return data  # overrides SpecModel's: each field refuses a null itself

    @model_validator(mode="before")
    @classmethod
    def _settings_need_enabled(cls, data: Any) -> Any:
        # Only a real `false` (or no `enabled`) with real settings: a null or mistyped value is its own
        # field's problem, reported at its path.
        disabled = isinstance(data, dict) and data.get("enabled", False) is False
        if disabled and {key for key, value in data.items() if value is not None} - {"enabled"}:
            raise ValueError("kuberay worker settings require enabled: true")
        return data

    def policy(self) -> dict[str, Any]:
        return {
            "worker_replicas": self.worker_replicas,
            "worker_cpus": self.worker_cpus,
            "worker_memory_gib": self.worker_memory_gib,
        }


class GpuFabricCheckSpec(SpecModel):
    """NCCL bandwidth on every GPU node and across the InfiniBand fabric (docs/health-and-verifiers.md)."""

    enabled: Boolean | None = Field(
        None, description="Run the fabric check; unset means on for multi-GPU NVLink/NVSwitch presets."
    )
    intra_node_min_busbw_gbps: Integer = Field(
        0, description="Intra-node average bus bandwidth floor (GB/s); 0 means the platform's table value."
    )
    inter_node_min_busbw_gbps: Integer = Field(
        0, description="Inter-node bus bandwidth floor at the largest size (GB/s); 0 means the table value."
    )
    min_bytes: Text = Field("512M", description="all_reduce_perf -b (smallest message), e.g. 512M.")
    max_bytes: Text = Field("8G", description="all_reduce_perf -e (largest message), e.g. 8G.")
    step_factor: Integer = Field(2, description="all_reduce_perf -f (size multiplier between rows).")
    timeout_minutes: Integer = Field(
        15, description="Deadline of the whole check; at most gpu_health_timeout_minutes."
    )


class ObjectStorageSpec(SpecModel):
    """A project's object-storage bucket, independent of any cluster's shared filesystem."""

    enabled: Boolean = Field(
        True, description="Provision the bucket (default true when the block is present)."
    )
    storage_class: Text = Field(
        "standard", description="standard, enhanced (Enhanced Throughput) or intelligent."
    )
    size_gibibytes: Integer = Field(
        0, description="Bucket capacity cap in GiB; must be positive when enabled."
    )
    bucket_name: Text = Field(
        "", description="Explicit bucket name; leave empty to derive a stable private name."
    )

    @field_validator("bucket_name")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    def normalized_storage_class(self) -> str:
        key = self.storage_class.strip().lower().replace("-", "_")
        return c.STORAGE_CLASSES.get(key, key)

    def display_storage_class(self) -> str:
        normalized = self.normalized_storage_class()
        return "enhanced" if normalized == "enhanced_throughput" else normalized


class SoperatorWorkerSpec(SpecModel):
    """One Slurm worker pool of a soperator cluster."""

    name: Text = ""
    platform: Text = "cpu-d3"
    preset: Text = "8vcpu-32gb"
    size: Integer = 1
    boot_disk_gib: Integer = 512
    fabric: Text = Field(
        "", description="InfiniBand fabric; required for GPU pools, forbidden for CPU pools."
    )
    preemptible: Boolean = False
    docker_cache: Boolean = False
    docker_cache_gib: Integer = Field(372, description="Node-local image cache GiB (a multiple of 93).")
    docker_cache_disk_type: Text = "NETWORK_SSD_IO_M3"
    capacity_block_group: Text = Field(
        "", description="Runtime-only capacity block group id (STRICT).", repr=False
    )
    capacity_block_group_name: Text = ""

    def is_gpu(self) -> bool:
        return self.platform.startswith("gpu-")


class SoperatorRoleSpec(SpecModel):
    preset: Text = Field("", description="Node preset; empty means the role's minimum sufficient preset.")


class SoperatorSystemRoleSpec(SoperatorRoleSpec):
    min_size: Integer = 3
    max_size: Integer | None = None


class SoperatorControlPlaneSpec(SpecModel):
    system: SoperatorSystemRoleSpec = Field(default_factory=SoperatorSystemRoleSpec)
    controller: SoperatorRoleSpec = Field(default_factory=SoperatorRoleSpec)
    accounting: SoperatorRoleSpec = Field(default_factory=SoperatorRoleSpec)
    login: SoperatorRoleSpec = Field(default_factory=SoperatorRoleSpec)


# The control-plane roles and their minimum presets at the smallest sizing tier (fewer than 10 workers);
# larger clusters need more (npa_pulumi.spec.soperator_rules.role_minimum_preset).
SOPERATOR_ROLE_PRESETS: dict[str, str] = {
    "system": "16vcpu-64gb",
    "controller": "16vcpu-64gb",
    "accounting": "8vcpu-32gb",
    "login": "16vcpu-64gb",
}


class SoperatorSpec(SpecModel):
    """The `soperator:` payload (npa.soperator/v0.0.1): a Slurm-on-Kubernetes cluster.

    Target identity (tenant, project, region, subnet) is owned by the fleet and rejected here.
    """

    name: Text = Field("", description="Must equal the fleet target name when set.")
    workers: list[SoperatorWorkerSpec] = Field(default_factory=list)
    control_plane: SoperatorControlPlaneSpec = Field(default_factory=SoperatorControlPlaneSpec)
    root_login_ssh_public_key: Text = ""
    ssh_public_keys: list[StrictText] = Field(default_factory=list)
    accounting: Boolean = False
    slurm_rest_enabled: Boolean = False
    telemetry: Boolean = False
    use_default_apparmor_profile: Boolean = False
    jail_size_gib: Integer = 512
    slurm_operator_version: Text = Field(
        "4.1.6", description="Slurm operator version: 4.1.6, or 4.1.7 with use_default_apparmor_profile."
    )
    k8s_version: Text = ""
    node_group_version: Text = ""
    gate_timeout_minutes: Integer = Field(
        60, description="How long `up` waits for the Slurm cluster to be Available (the recipe waits 1 h)."
    )


class MaintenanceWindowSpec(SpecModel):
    """A recurring window in which disruptive changes may start: days + local start + duration + zone."""

    days: list[LowerText] = Field(
        default_factory=list,
        description="Days it opens on (mon, tue, wed, thu, fri, sat, sun); empty means every day.",
    )
    start: Text = Field("", description="Local start time, HH:MM (24-hour clock) in time_zone.")
    duration: Text = Field("", description="How long it stays open (30m, 4h, 1.5h): above 0, at most 7 days.")
    time_zone: Text = Field("UTC", description="IANA time zone of `start`, e.g. Europe/Amsterdam.")


class MaintenanceExclusionSpec(SpecModel):
    """A period in which a kind of change must not start, until its `end`."""

    scope: LowerText = Field("", description="no-upgrades, no-minor or no-disruptive.")
    end: Text = Field(
        "", description="Last day (YYYY-MM-DD, through the end of that day) or an ISO time with offset."
    )
    start: Text = Field("", description="First day or ISO time; empty means already in force.")
    time_zone: Text = Field("UTC", description="IANA time zone of dates without an offset.")
    reason: Text = Field("", description="Why (shown with the exclusion).")


class WaitForJobsSpec(SpecModel):
    """Before `up` applies a disruptive change to a cluster, wait for its running jobs to end: the pods
    of `selectors` and, on a soperator cluster, the Slurm jobs of its workers (drained first)."""

    selectors: list[Text] = Field(
        default_factory=list,
        description="Label selectors of job pods (`app=train`, `batch.kubernetes.io/job-name`), any "
        "namespace; a pod matching any of them that is Pending or Running is waited for. Needed on an "
        "mk8s cluster; a soperator cluster waits for its Slurm jobs with or without them.",
    )
    timeout: Text = Field(
        "1h", description="How long to wait (30m, 4h): past it the cluster is not changed and its wave halts."
    )


class MaintenanceSpec(SpecModel):
    """Maintenance windows and exclusions of a cluster: under `defaults` (fleet), a project or a cluster;
    the most specific block wins whole (docs/upgrades.md)."""

    windows: list[MaintenanceWindowSpec] = Field(
        default_factory=list, description="When disruptive changes may start; none means any time."
    )
    exclusions: list[MaintenanceExclusionSpec] = Field(default_factory=list)
    drain_time: Text = Field(
        "",
        description="How long draining one node takes, for the GPU-hours an upgrade drains (`upgrade plan`); "
        "empty means 1h, the most Nebius gives a drain in its maintenance.",
    )
    wait_for_jobs: WaitForJobsSpec | None = Field(
        None, description="Job pods `up` waits for before a disruptive change (none: it does not wait)."
    )


# The mk8s cluster fields as written in YAML (flat/legacy form, `defaults`, and the `mk8s:` envelope).
MK8S_FIELDS: tuple[str, ...] = (
    "k8s_version",
    "cpu_nodes",
    "gpu_nodes",
    "enable_gpu_cluster",
    "infiniband_fabric",
    "enable_filestore",
    "existing_filestore",
    "filestore_disk_size_gibibytes",
    "gpu_disk_size_gib",
    "subnet_id",
    "filestore_mount_path",
    "filestore_mount_tag",
    "filesystem_csi_chart_repository",
    "gpu_driver_mode",
    "managed_driver_preset",
    "allow_unsafe_nvswitch_operator",
    "gpu_health_stabilization_seconds",
    "gpu_health_timeout_minutes",
    "gpu_cuda_smoke",
    "gpu_cuda_smoke_image",
    "gpu_graphics_smoke_image",
    "gpu_workload_profile",
    "gpu_driver_package_repositories",
    "mig",
    "kuberay",
    "gpu_fabric_check",
    "maintenance",
)


class ClusterSpec(SpecModel):
    """One cluster target: an mk8s (k8s-training) cluster, or a soperator cluster (`backend: soperator`)."""

    name: Text = Field(
        "cluster", description="DNS label; unset means 'cluster', or 'cluster-<i>' when several."
    )
    k8s_version: Text = Field("", description="Kubernetes minor version; empty means the backend default.")
    cpu_nodes: NodePoolSpec | None = None
    gpu_nodes: NodePoolSpec | None = None
    enable_gpu_cluster: Boolean | None = Field(
        None,
        description="InfiniBand GPU cluster; unset means auto (8 GPUs per node on an -sxm/-nvl platform).",
    )
    infiniband_fabric: Text = Field("", description="Required when GPU clustering is on.")
    enable_filestore: Boolean = Field(False, description="Create (or attach) a shared filesystem.")
    existing_filestore: Text = Field(
        "", description="Attach this existing filesystem instead of creating one."
    )
    filestore_disk_size_gibibytes: Integer = c.DEFAULT_FILESTORE_GIB
    gpu_disk_size_gib: Integer = Field(
        c.DEFAULT_GPU_DISK_GIB, description="GPU boot disk GiB when the pool sets none."
    )
    subnet_id: Text = Field("", description="Explicit subnet; empty means the project's shared subnet.")
    filestore_mount_path: Text = c.DEFAULT_FILESTORE_MOUNT_PATH
    filestore_mount_tag: Text = c.DEFAULT_FILESTORE_MOUNT_TAG
    filesystem_csi_chart_repository: Text = Field(
        "", description="Filesystem CSI chart source (runtime/operator supplied); never shown in plan output."
    )
    gpu_driver_mode: Text = Field(
        "auto", description="auto (managed image with GPUs), managed-image or operator."
    )
    managed_driver_preset: Text = c.DEFAULT_MANAGED_DRIVER_PRESET
    allow_unsafe_nvswitch_operator: Boolean = False
    gpu_health_stabilization_seconds: Integer = c.DEFAULT_STABILIZATION_SECONDS
    gpu_health_timeout_minutes: Integer = c.DEFAULT_HEALTH_TIMEOUT_MINUTES
    gpu_cuda_smoke: Boolean = True
    gpu_cuda_smoke_image: Text = c.DEFAULT_CUDA_SMOKE_IMAGE
    gpu_graphics_smoke_image: Text = Field(
        c.DEFAULT_GRAPHICS_SMOKE_IMAGE,
        description="RTX rendering: the graphics readiness probe's image, pinned by digest "
        "(name@sha256:<64 hex>); it must ship bash, python3 and vulkaninfo.",
    )
    gpu_workload_profile: Text = Field("", description="'' or 'rtx-rendering'.")
    gpu_driver_package_repositories: dict[str, StrictText] = Field(
        default_factory=dict, description="RTX profile only: package-source files for the driver container."
    )
    mig: MigSpec | None = None
    kuberay: KubeRaySpec | None = None
    gpu_fabric_check: GpuFabricCheckSpec | None = None
    maintenance: MaintenanceSpec | None = Field(
        None, description="Maintenance windows and exclusions (most specific of defaults/project/cluster)."
    )
    backend: Backend = c.BackendKind.MK8S
    soperator: SoperatorSpec | None = None
    # Set by the RTX rendering profile; not a spec field.
    gpu_graphics_smoke: Boolean = False
    # Whether the spec named the backend (`backend:` or an `mk8s:` envelope); kept for plan output only.
    backend_explicit: bool = Field(False, exclude=True, repr=False)

    @field_validator("cpu_nodes", "gpu_nodes", mode="before")
    @classmethod
    def _empty_pool_is_none(cls, value: Any) -> Any:
        return None if isinstance(value, dict) and not drop_nulls(value) else value

    @field_validator("gpu_driver_mode", "gpu_workload_profile")
    @classmethod
    def _normalize_choice(cls, value: str) -> str:
        return value.strip().lower()

    @field_validator("filesystem_csi_chart_repository")
    @classmethod
    def _strip(cls, value: str) -> str:
        return value.strip()

    @field_validator("backend", mode="before")
    @classmethod
    def _normalize_backend(cls, value: Any) -> Any:
        return value.strip().lower() or "mk8s" if isinstance(value, str) else value

    @model_validator(mode="after")
    def _resolve_declared_defaults(self) -> ClusterSpec:
        # Empty values fall back to the defaults, as `value or default` did in the original parser.
        if not self.gpu_driver_mode:
            self.gpu_driver_mode = "auto"
        if not self.managed_driver_preset:
            self.managed_driver_preset = c.DEFAULT_MANAGED_DRIVER_PRESET
        if not self.gpu_cuda_smoke_image:
            self.gpu_cuda_smoke_image = c.DEFAULT_CUDA_SMOKE_IMAGE
        if not self.gpu_graphics_smoke_image:
            self.gpu_graphics_smoke_image = c.DEFAULT_GRAPHICS_SMOKE_IMAGE
        # Pools are copied, never mutated: an SDK caller may share one NodePoolSpec between clusters.
        if self.cpu_nodes is not None and self.cpu_nodes.platform is None:
            self.cpu_nodes = self.cpu_nodes.model_copy(update={"platform": c.DEFAULT_CPU_PLATFORM})
        if self.gpu_nodes is not None and self.gpu_nodes.platform is None:
            self.gpu_nodes = self.gpu_nodes.model_copy(update={"platform": c.DEFAULT_GPU_PLATFORM})
        self._apply_workload_profile()
        return self

    def _apply_workload_profile(self) -> None:
        """The RTX rendering profile fills the GPU pool and forces the operator driver with graphics smoke.

        A profile that conflicts with the declared topology is left unapplied; `rules` reports why.
        """
        if self.gpu_workload_profile != c.RTX_RENDERING_PROFILE or rtx_profile_problems(self):
            return
        gpu = self.gpu_nodes
        if gpu is None:
            self.gpu_nodes = NodePoolSpec(count=1, platform=c.RTX_PLATFORM, preset=c.RTX_1GPU_PRESET)
        else:
            self.gpu_nodes = gpu.model_copy(
                update={"platform": gpu.platform or c.RTX_PLATFORM, "preset": gpu.preset or c.RTX_1GPU_PRESET}
            )
        self.gpu_driver_mode = "operator"
        self.gpu_graphics_smoke = True

    # Effective values (reference §3) -------------------------------------------------------------------

    def backend_name(self) -> str:
        return self.backend.value

    def cpu_count(self) -> int:
        return self.cpu_nodes.count if self.cpu_nodes else 0

    def gpu_count(self) -> int:
        return self.gpu_nodes.count if self.gpu_nodes else 0

    def gpu_platform(self) -> str:
        return (self.gpu_nodes.platform or "") if self.gpu_nodes else ""

    def gpu_preset(self) -> str:
        return self.gpu_nodes.preset if self.gpu_nodes else ""

    def mig_enabled(self) -> bool:
        return bool(self.mig and self.mig.enabled)

    def kuberay_enabled(self) -> bool:
        return bool(self.kuberay and self.kuberay.enabled)

    def capacity_block_group(self) -> str:
        return self.gpu_nodes.capacity_block_group if self.gpu_nodes else ""

    def resolved_k8s_version(self) -> str:
        """MIG pins the tested Kubernetes version."""
        if self.mig_enabled():
            return self.k8s_version or c.MIG_KUBERNETES_VERSION
        return self.k8s_version

    def resolved_cpu_disk_size_gib(self) -> int:
        return resolved_cpu_disk_gib(self.cpu_nodes.disk_size_gib if self.cpu_nodes else 0)

    def resolved_gpu_disk_size_gib(self) -> int:
        """The GPU boot disk (rendered and budgeted): the pool's, else 128 under MIG, else the default."""
        pool = self.gpu_nodes.disk_size_gib if self.gpu_nodes else 0
        return resolved_gpu_disk_gib(pool, self.gpu_disk_size_gib, self.mig_enabled())

    def resolved_gpu_driver_mode(self) -> str:
        """The requested mode, except that MIG needs the pinned in-cluster (operator) driver."""
        return "operator" if self.mig_enabled() else self.gpu_driver_mode

    def resolved_enable_gpu_cluster(self) -> bool:
        if self.enable_gpu_cluster is not None:
            return self.enable_gpu_cluster
        return self.gpu_count() > 0 and is_fabric_capable_topology(self.gpu_platform(), self.gpu_preset())

    def driver_selection(self) -> DriverSelection:
        return resolve_driver(
            gpu_count=self.gpu_count(),
            platform=self.gpu_platform(),
            preset=self.gpu_preset(),
            mode=self.resolved_gpu_driver_mode(),
            managed_driver_preset=self.managed_driver_preset,
            gpu_cluster=self.resolved_enable_gpu_cluster(),
            allow_unsafe_nvswitch_operator=self.allow_unsafe_nvswitch_operator,
        )

    def gpu_node_layout(self) -> tuple[int, int]:
        """(nodes per group, groups): a reserved PCIe pool gets one node per group so a stuck slot cannot
        strand its healthy siblings; fabric-coupled and on-demand pools stay one group."""
        count = self.gpu_count()
        if count <= 0:
            return 0, 0
        if self.capacity_block_group() and count > 1 and not self.resolved_enable_gpu_cluster():
            return 1, count
        return count, 1

    def gpus_per_node(self) -> int:
        return gpus_per_node(self.gpu_preset())


def rtx_profile_problems(cluster: ClusterSpec) -> list[tuple[str, str, str | None]]:
    """(field, message, hint) for an RTX rendering profile that conflicts with the declared topology."""
    profile = cluster.gpu_workload_profile
    if profile not in c.GPU_WORKLOAD_PROFILES:
        return [
            (
                "gpu_workload_profile",
                f"unsupported GPU workload profile {profile!r}",
                f"expected '{c.RTX_RENDERING_PROFILE}' or leave it empty",
            )
        ]
    if not profile:
        return []
    problems: list[tuple[str, str, str | None]] = []
    gpu = cluster.gpu_nodes
    if gpu is not None and gpu.count == 0:
        problems.append(
            (
                "gpu_nodes.count",
                "the 'rtx-rendering' profile requires at least one GPU node",
                "set gpu_nodes.count to 1 or more, or remove gpu_nodes to get one RTX PRO 6000 node",
            )
        )
    if gpu is not None and gpu.platform and not _RTX_PLATFORM_RE.fullmatch(gpu.platform):
        problems.append(
            (
                "gpu_nodes.platform",
                f"the 'rtx-rendering' profile requires platform "
                f"{c.RTX_PLATFORM!r} or a zonal variant, got {gpu.platform!r}",
                "e.g. gpu-rtx6000 or gpu-rtx6000-a",
            )
        )
    if gpu is not None and gpu.preset and gpu.preset not in c.RTX_PRESETS:
        problems.append(
            (
                "gpu_nodes.preset",
                f"the 'rtx-rendering' profile requires an RTX PRO 6000 preset, got {gpu.preset!r}",
                "expected one of: " + ", ".join(c.RTX_PRESETS),
            )
        )
    if cluster.gpu_driver_mode and cluster.gpu_driver_mode not in ("auto", "operator"):
        problems.append(
            (
                "gpu_driver_mode",
                "the 'rtx-rendering' profile uses the GPU Operator driver",
                "set gpu_driver_mode to 'operator' or 'auto', or remove it",
            )
        )
    return problems


class ProjectSpec(SpecModel):
    """A deployment target project: an existing `project_id`, or a `name` found or created on demand."""

    name: Text = Field("", description="Logical name; the project display name is project_prefix + name.")
    project_id: Text = Field("", description="An existing project id, used verbatim (never created).")
    region: Text = Field("", description="Per-project region override.")
    clusters: list[ClusterSpec] = Field(default_factory=list)
    object_storage: ObjectStorageSpec | None = None
    maintenance: MaintenanceSpec | None = Field(
        None, description="Windows and exclusions of this project's clusters (a cluster's own block wins)."
    )

    def key(self) -> str:
        """The stable key naming the project's stacks and local state: slug of name, else of project_id."""
        return slug(self.name or self.project_id or "project")

    def display_name(self, prefix: str) -> str:
        """prefix + name, never doubling a prefix the name already has; the project_id when unnamed."""
        if self.name:
            if prefix and not self.name.startswith(prefix):
                return f"{prefix}{self.name}"
            return self.name
        return self.project_id


class RolloutWaveSpec(SpecModel):
    """One wave of a staged rollout: exactly one of `clusters`, `count`, `percent` or `rest`."""

    clusters: list[StrictText] | None = Field(
        None, description="project-key/cluster-name selectors (globs allowed), e.g. research/train."
    )
    count: Integer | None = Field(None, description="The next N clusters, in spec order.")
    percent: Integer | None = Field(
        None, description="The next P percent of the selected clusters (rounded up, at least one)."
    )
    rest: Boolean | None = Field(None, description="Every cluster no earlier wave took (last wave only).")
    soak: Text | None = Field(
        None,
        description="After the wave's gates pass, its clusters' health must stay clean this long (30s, 10m, "
        "1h) before the next wave starts.",
    )


class HaltOnFailuresSpec(SpecModel):
    """`halt_on: {failures: K}`: halt once K clusters of the rollout failed (stack or health gate);
    `maintenance: true` also halts at a wave with a cluster held for maintenance."""

    failures: Integer = Field(1, description="Failures that halt the rollout (at least 1).")
    maintenance: Boolean = Field(False, description="Also halt at a wave with a held cluster.")


class ApprovalSpec(SpecModel):
    """`rollout.approval`: wave `before` starts only once `min` people other than the run approved it."""

    before: Integer = Field(2, description="The wave (2 or later) that waits for approvals.")
    min: Integer = Field(1, description="Approvals needed, each by another identity than the run's.")


class RolloutSpec(SpecModel):
    """A staged rollout of `up` across the fleet: waves in order, each after the previous passed its gates."""

    waves: list[RolloutWaveSpec] = Field(default_factory=list, description="The waves, in order.")
    max_in_flight: Integer = Field(0, description="Clusters applying at once, overall (0: --concurrency).")
    max_in_flight_per_reservation: Integer = Field(
        0, description="Clusters of one capacity block group applying at once (0: no limit of its own)."
    )
    halt_on: Text | list[Text] | HaltOnFailuresSpec = Field(
        "gate-failure",
        description="gate-failure (default), policy-violation, maintenance (a held cluster halts too), a "
        "list of them, or {failures: K}.",
    )
    approval: ApprovalSpec | None = Field(
        None, description="A wave that waits for approvals (`npa-pulumi approve`) before it starts."
    )


class BreakersSpec(SpecModel):
    """`remediation.breakers`: stop acting in a scope once more than this percent of its GPU nodes are
    impaired within one `window` (engine/health/remediation.py)."""

    cluster_percent: Integer = Field(
        c.DEFAULT_BREAKER_PERCENT, description="Percent of a cluster's GPU nodes (1-100)."
    )
    capacity_block_percent: Integer = Field(
        c.DEFAULT_BREAKER_PERCENT, description="Percent of a capacity block group's GPU nodes (1-100)."
    )
    fleet_percent: Integer = Field(
        c.DEFAULT_BREAKER_PERCENT, description="Percent of the fleet's GPU nodes (1-100)."
    )
    window: Text = Field(
        "", description="How far back a node impaired counts (30s, 5m); empty: one watch interval."
    )


class RepeatOffenderSpec(SpecModel):
    """`remediation.repeat_offender`: a node with `incidents` incidents within `window` is a repeat offender,
    never requalified automatically."""

    incidents: Integer = Field(c.DEFAULT_REPEAT_INCIDENTS, description="Incidents (at least 2).")
    window: Text = Field(c.DEFAULT_REPEAT_WINDOW, description="The window (e.g. 7d, 48h).")


class RemediationOverrideSpec(SpecModel):
    """`remediation.overrides[]`: other settings for the clusters its selectors match (the last match wins
    per field)."""

    clusters: list[StrictText] = Field(
        default_factory=list,
        description="project-key/cluster-name selectors (globs allowed), e.g. research/*.",
    )
    allow_active_gpu_workloads: Boolean | None = Field(
        None, description="Act on nodes whose GPUs are held by a workload."
    )
    ladders: dict[StrictText, list[StrictText]] | None = Field(
        None, description="Ladders per fault reason, merged over the fleet's."
    )
    breaker_percent: Integer | None = Field(None, description="This cluster's own breaker (1-100).")


class RemediationSpec(SpecModel):
    """`remediation`: the repair ladder per fault reason, its breakers and the repeat-offender rule that
    `health --remediate` follows (docs/health-and-verifiers.md, "Remediation")."""

    allow_active_gpu_workloads: Boolean = Field(
        False, description="Act on nodes whose GPUs are held by a workload (never by default)."
    )
    escalate_after: Text = Field(
        c.DEFAULT_ESCALATE_AFTER,
        description="A rung whose gate neither passed nor failed by then counts as failed (e.g. 30m).",
    )
    ladders: dict[StrictText, list[StrictText]] = Field(
        default_factory=dict,
        description="Per fault reason (gpu-error, boot-disk-io-error, not-ready, gpus-missing, "
        "failed-requalification, unqualified) its rungs in order; a reason not named keeps the default "
        "ladder requalify, cordon-and-report, cloud-recovery, remove-from-group, flag-hardware.",
    )
    breakers: BreakersSpec = Field(default_factory=BreakersSpec)
    repeat_offender: RepeatOffenderSpec = Field(default_factory=RepeatOffenderSpec)
    overrides: list[RemediationOverrideSpec] = Field(
        default_factory=list, description="Settings of their own for some projects or clusters."
    )


class FleetSpec(SpecModel):
    """A whole fleet: clusters across projects of one tenant."""

    api_version: Text = Field(c.API_VERSION, alias="apiVersion")
    name: Text = Field("", description="Fleet name, a DNS label.")
    tenant_id: Text = Field("", description="Empty means resolved at deploy time from the Nebius profile.")
    region: Text = Field(
        "", description="Default region of every project; empty means resolved at deploy time."
    )
    project_prefix: Text = Field("", description="Prefix of created project display names.")
    ssh_public_key: Text = Field(
        "", description="SSH public key for the nodes; empty means ~/.ssh at deploy."
    )
    profile: Text = Field("", description="~/.nebius profile to authenticate as; empty means the active one.")
    projects: list[ProjectSpec] = Field(default_factory=list)
    rollout: RolloutSpec | None = Field(None, description="Staged rollout of `up`: canary and waves.")
    remediation: RemediationSpec = Field(
        default_factory=RemediationSpec,
        description="Repair ladders, circuit breakers and the repeat-offender rule of `health --remediate`.",
    )
    notify: list[StrictText] = Field(
        default_factory=list,
        description="Webhooks a run posts one JSON event to when it needs a person (beside --notify URL): "
        "http(s) URLs, or ${NAME} for an environment variable that holds one. Never printed.",
        repr=False,
    )

    def cluster_targets(self) -> list[tuple[ProjectSpec, ClusterSpec]]:
        return [(project, cluster) for project in self.projects for cluster in project.clusters]

    def to_yaml_data(self) -> dict[str, Any]:
        """The spec as plain data in YAML spelling (`apiVersion`), every cluster written out in full."""
        return self.model_dump(by_alias=True, exclude_none=True)


__all__ = [
    "MK8S_FIELDS",
    "SOPERATOR_ROLE_PRESETS",
    "ApprovalSpec",
    "BreakersSpec",
    "ClusterSpec",
    "FleetSpec",
    "GpuFabricCheckSpec",
    "HaltOnFailuresSpec",
    "KubeRaySpec",
    "MaintenanceExclusionSpec",
    "MaintenanceSpec",
    "MaintenanceWindowSpec",
    "MigSpec",
    "NodePoolSpec",
    "ObjectStorageSpec",
    "ProjectSpec",
    "RemediationOverrideSpec",
    "RemediationSpec",
    "RepeatOffenderSpec",
    "RolloutSpec",
    "RolloutWaveSpec",
    "SoperatorControlPlaneSpec",
    "SoperatorRoleSpec",
    "SoperatorSpec",
    "SoperatorSystemRoleSpec",
    "SoperatorWorkerSpec",
    "SpecModel",
    "WaitForJobsSpec",
    "drop_nulls",
    "rtx_profile_problems",
]
