"""Semantic rules of npa.fleet/v0.0.1 (reference §2–§3), reported all at once.

Each rule yields problems at paths relative to what it checks; `check_fleet` makes them absolute
(`projects[1].clusters[0].gpu_nodes.preset`). Rules that would only repeat an earlier problem about the
same value are skipped (a pool with a non-GPU platform is not also told its reservation is invalid).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from npa_pulumi.runtime.presets import memory_gib_per_node, vcpus_per_node
from npa_pulumi.spec import constants as c
from npa_pulumi.spec.effective import driver_problems, is_fabric_capable_topology, preset_declares_gpus
from npa_pulumi.spec.fabric import has_nvlink_fabric, size_bytes
from npa_pulumi.spec.maintenance_rules import check_maintenance
from npa_pulumi.spec.models import (
    ClusterSpec,
    FleetSpec,
    ProjectSpec,
    SoperatorSpec,
    SoperatorWorkerSpec,
    rtx_profile_problems,
)
from npa_pulumi.spec.names import (
    PathTuple,
    cluster_stack_name,
    is_digest_pinned,
    is_dns_label,
    project_stack_name,
    slug,
    stack_name_problem,
)
from npa_pulumi.spec.notify_rules import check_notify
from npa_pulumi.spec.problems import RawProblem
from npa_pulumi.spec.remediation import check_remediation
from npa_pulumi.spec.rollout_rules import check_rollout
from npa_pulumi.spec.soperator_rules import check_soperator_contract

_REPO_FILE_RE = re.compile(r"[A-Za-z0-9._-]+")
_CPU_PLATFORM_RE = re.compile(r"cpu-[a-z0-9-]+")
_CPU_PRESET_RE = re.compile(r"(?P<cpus>[1-9][0-9]*)vcpu-(?P<memory>[1-9][0-9]*)gb")
# The Nebius provider's version format (upstream k8s-training's `k8s_version` validation).
_K8S_VERSION_RE = re.compile(r"(?P<major>\d+)\.(?P<minor>\d+)(-nebius-node\.[1-9]\d*)?")
_DNS_HINT = "lower-case letters, digits and '-', starting with a letter or digit, at most 63 characters"


def _p(*path: str | int) -> PathTuple:
    return tuple(
        part for segment in path for part in (_split(segment) if isinstance(segment, str) else (segment,))
    )


def _split(dotted: str) -> tuple[str, ...]:
    return tuple(dotted.split(".")) if dotted else ()


def _problem(path: str | PathTuple, message: str, hint: str | None = None) -> RawProblem:
    return RawProblem(_p(path) if isinstance(path, str) else path, message, hint)


# --- fleet and projects -------------------------------------------------------------------------------


def check_fleet(spec: FleetSpec) -> list[RawProblem]:
    """Every semantic problem of a fleet, with absolute spec paths."""
    problems: list[RawProblem] = list(_fleet_header(spec))
    keys: dict[str, int] = {}
    soperator_names: dict[str, PathTuple] = {}
    for index, project in enumerate(spec.projects):
        base: PathTuple = ("projects", index)
        problems += [_prefixed(base, problem) for problem in check_project(project)]
        for position, cluster in enumerate(project.clusters):
            cluster_path: PathTuple = (*base, "clusters", position)
            problems += [_prefixed(cluster_path, problem) for problem in check_cluster(cluster)]
            if cluster.backend is c.BackendKind.SOPERATOR:
                if cluster.name in soperator_names:
                    problems.append(
                        _problem(
                            (*cluster_path, "name"),
                            f"duplicate soperator cluster name {cluster.name!r} across the fleet",
                            "soperator cluster names must be unique fleet-wide (they name physical "
                            "resources)",
                        )
                    )
                soperator_names.setdefault(cluster.name, cluster_path)
        key = project.key()
        if key in keys:
            problems.append(
                _problem(
                    (*base, "name" if project.name else "project_id"),
                    f"duplicate project key {key!r} (same as projects[{keys[key]}])",
                    "project keys are the slug of name (or project_id) and must be unique",
                )
            )
        keys.setdefault(key, index)
        problems += _stack_name_problems(spec, project, base)
    problems += check_rollout(spec)
    problems += check_notify(spec)
    problems += check_remediation(spec)
    return problems


def _fleet_header(spec: FleetSpec) -> Iterator[RawProblem]:
    if spec.api_version != c.API_VERSION:
        yield _problem(
            "apiVersion", f"unsupported apiVersion {spec.api_version!r}", f"expected {c.API_VERSION}"
        )
    if not is_dns_label(spec.name):
        yield _problem("name", f"fleet name must be a lowercase DNS-1123 label: {spec.name!r}", _DNS_HINT)
    if not spec.projects:
        yield _problem(
            "projects", "projects must be a non-empty list", "add at least one project with a name"
        )


def _stack_name_problems(spec: FleetSpec, project: ProjectSpec, base: PathTuple) -> Iterator[RawProblem]:
    """Stack names must be valid Pulumi stack names; checking here catches them before any cloud call."""
    if not is_dns_label(spec.name):
        return  # already reported; stack names built from it would only repeat that
    key = project.key()
    field = "name" if project.name else "project_id"
    why = stack_name_problem(project_stack_name(spec.name, key))
    if why:
        yield _problem((*base, field), why, "shorten the fleet or project name")
        return
    for position, cluster in enumerate(project.clusters):
        why = stack_name_problem(cluster_stack_name(spec.name, key, cluster.name))
        if why:
            yield _problem(
                (*base, "clusters", position, "name"), why, "shorten the fleet, project or cluster name"
            )


def check_project(project: ProjectSpec) -> list[RawProblem]:
    """Project-level rules (paths relative to the project)."""
    problems: list[RawProblem] = []
    if not project.name and not project.project_id:
        problems.append(
            _problem(
                "",
                "each project needs a 'name' or 'project_id'",
                "set name (created on demand) or project_id (an existing project)",
            )
        )
    if project.name and not is_dns_label(slug(project.name)):
        problems.append(_problem("name", f"project name is not a valid label: {project.name!r}", _DNS_HINT))
    if not project.clusters:
        problems.append(
            _problem(
                "clusters",
                "no clusters resolved",
                "list clusters, or omit 'clusters' for one cluster built from defaults",
            )
        )
    if project.object_storage is not None:
        problems += [_prefixed(("object_storage",), p) for p in _object_storage(project)]
    if project.maintenance is not None:
        # wait_for_jobs' selectors are judged in each cluster: its backend says whether they are needed
        block = check_maintenance(project.maintenance, needs_selectors=False)
        problems += [_prefixed(("maintenance",), p) for p in block]
    seen: dict[str, int] = {}
    for position, cluster in enumerate(project.clusters):
        if cluster.name in seen:
            problems.append(
                _problem(
                    ("clusters", position, "name"),
                    f"duplicate cluster name {cluster.name!r} (same as clusters[{seen[cluster.name]}])",
                    "cluster names must be unique within a project",
                )
            )
        seen.setdefault(cluster.name, position)
    return problems


def _object_storage(project: ProjectSpec) -> Iterator[RawProblem]:
    storage = project.object_storage
    assert storage is not None
    if not storage.enabled:
        if storage.size_gibibytes:
            yield _problem(
                "size_gibibytes",
                "object_storage must be enabled when size_gibibytes is set",
                "remove size_gibibytes or set enabled: true",
            )
        if storage.bucket_name:
            yield _problem(
                "bucket_name",
                "object_storage must be enabled when bucket_name is set",
                "remove bucket_name or set enabled: true",
            )
        return
    if storage.normalized_storage_class() not in c.STORAGE_CLASSES.values():
        yield _problem(
            "storage_class",
            f"unsupported storage class {storage.storage_class!r}",
            "expected standard, enhanced or intelligent",
        )
    if storage.size_gibibytes <= 0:
        yield _problem(
            "size_gibibytes",
            "object_storage.size_gibibytes must be positive when enabled",
            "the bucket's capacity cap in GiB, e.g. 1024",
        )
    if storage.bucket_name and not is_dns_label(storage.bucket_name):
        yield _problem(
            "bucket_name",
            f"bucket_name must be a lowercase DNS-style name: {storage.bucket_name!r}",
            _DNS_HINT + "; or leave it empty to derive one",
        )


# --- clusters ----------------------------------------------------------------------------------------


def check_cluster(cluster: ClusterSpec) -> list[RawProblem]:
    """Cluster rules in the original's order (paths relative to the cluster)."""
    problems: list[RawProblem] = []
    if cluster.backend is c.BackendKind.SOPERATOR:
        problems += list(_soperator_cluster(cluster))
    else:
        for rule in _MK8S_RULES:
            problems += list(rule(cluster))
    if cluster.maintenance is not None:
        pods_only = cluster.backend is not c.BackendKind.SOPERATOR  # soperator: Slurm jobs without them
        block = check_maintenance(cluster.maintenance, needs_selectors=pods_only)
        problems += [_prefixed(("maintenance",), p) for p in block]
    return problems


def _kuberay(cluster: ClusterSpec) -> Iterator[RawProblem]:
    policy = cluster.kuberay
    if policy is None:
        return
    for name in ("worker_replicas", "worker_cpus", "worker_memory_gib"):
        if getattr(policy, name) <= 0:
            yield _problem(f"kuberay.{name}", f"kuberay.{name} must be a positive integer")
    if not policy.enabled:
        if policy.policy() != type(policy)().policy():
            yield _problem("kuberay", "kuberay worker settings require enabled: true")
        return
    cpu = cluster.cpu_nodes
    if cpu is None or cpu.count <= 0 or cpu.is_gpu():
        yield _problem(
            "kuberay", "kuberay requires a nonempty CPU node pool", "set cpu_nodes.count to 1 or more"
        )
        return
    match = _CPU_PRESET_RE.fullmatch(cpu.preset)
    if not _CPU_PLATFORM_RE.fullmatch(cpu.platform or "") or match is None:
        yield _problem(
            "cpu_nodes.preset" if match is None else "cpu_nodes.platform",
            "kuberay requires an explicit CPU platform and preset",
            "e.g. platform cpu-d3 and preset 16vcpu-64gb",
        )
        return
    if min(policy.worker_replicas, policy.worker_cpus, policy.worker_memory_gib) <= 0:
        return
    yield from _kuberay_capacity(
        policy.worker_replicas,
        policy.worker_cpus,
        policy.worker_memory_gib,
        cpu.count,
        vcpus_per_node(cpu.preset),
        memory_gib_per_node(cpu.preset),
    )


def _kuberay_capacity(
    replicas: int, cpus: int, memory: int, nodes: int, node_cpus: int, node_memory: int
) -> Iterator[RawProblem]:
    """The head (1 vCPU / 4 GiB) and each worker must fit one node; all pods must fit the pool."""
    head_cpus, head_memory = c.KUBERAY_HEAD_CPUS, c.KUBERAY_HEAD_MEMORY_GIB
    if head_cpus > node_cpus or head_memory > node_memory:
        yield _problem(
            "cpu_nodes.preset",
            f"kuberay head pod requests {head_cpus} vCPU/{head_memory} GiB, which "
            f"exceeds one declared {node_cpus} vCPU/{node_memory} GiB CPU node",
        )
        return
    if cpus > node_cpus or memory > node_memory:
        yield _problem(
            "kuberay",
            f"kuberay worker pod requests {cpus} vCPU/{memory} GiB, which exceeds one "
            f"declared {node_cpus} vCPU/{node_memory} GiB CPU node",
            "lower worker_cpus/worker_memory_gib or use a larger cpu_nodes.preset",
        )
        return
    wanted_cpus, wanted_memory = head_cpus + replicas * cpus, head_memory + replicas * memory
    pool_cpus, pool_memory = nodes * node_cpus, nodes * node_memory
    if wanted_cpus > pool_cpus or wanted_memory > pool_memory:
        yield _problem(
            "kuberay",
            f"kuberay fixed pods request {wanted_cpus} vCPU/{wanted_memory} GiB, which exceeds "
            f"the declared CPU pool's nominal {pool_cpus} vCPU/{pool_memory} GiB capacity",
            "lower worker_replicas or add CPU nodes",
        )


def _backend(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if cluster.soperator is not None:
        yield _problem(
            "soperator",
            "a 'soperator' payload is not supported for backend 'mk8s'",
            "set backend: soperator, or remove the soperator block",
        )


def _name(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if not is_dns_label(cluster.name):
        yield _problem(
            "name", f"cluster name must be a lowercase DNS-1123 label: {cluster.name!r}", _DNS_HINT
        )


def _package_repositories(cluster: ClusterSpec) -> Iterator[RawProblem]:
    files = cluster.gpu_driver_package_repositories
    if files and cluster.gpu_workload_profile != c.RTX_RENDERING_PROFILE:
        yield _problem(
            "gpu_driver_package_repositories",
            "GPU driver package repositories require the RTX rendering profile",
            "set gpu_workload_profile: rtx-rendering, or remove them",
        )
    for name, content in files.items():
        path = ("gpu_driver_package_repositories", name)
        if name in (".", "..") or not _REPO_FILE_RE.fullmatch(name):
            yield _problem(
                path,
                "package repository file names may only use letters, digits, '.', '_' and '-'",
                "e.g. ubuntu-noble.sources",
            )
        elif not content.strip():
            yield _problem(path, "package repository content must be non-empty text")


def _has_nodes(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if cluster.cpu_count() <= 0 and cluster.gpu_count() <= 0 and not cluster.mig_enabled():
        yield _problem(
            "",
            "a cluster needs at least one CPU or GPU node",
            "set cpu_nodes.count or gpu_nodes.count (here or in defaults)",
        )


def _pool_numbers(cluster: ClusterSpec) -> Iterator[RawProblem]:
    for kind, pool in (("cpu_nodes", cluster.cpu_nodes), ("gpu_nodes", cluster.gpu_nodes)):
        if pool is None:
            continue
        if pool.count < 0:
            yield _problem(f"{kind}.count", f"{kind}.count cannot be negative")
        if pool.disk_size_gib < 0:
            yield _problem(f"{kind}.disk_size_gib", f"{kind}.disk_size_gib cannot be negative")
    yield from _pool_platform_and_preset(cluster)
    if cluster.cpu_nodes and cluster.cpu_nodes.capacity_block_group:
        yield _problem(
            "cpu_nodes.capacity_block_group",
            "capacity_block_group is only valid for gpu_nodes",
            "move it to gpu_nodes",
        )


def _pool_versions(cluster: ClusterSpec) -> Iterator[RawProblem]:
    """A pool's own `version` is a pin's: in the Nebius format, never newer than the cluster's version (a
    kubelet is never newer than its API server). How far behind it may be is `upgrade plan`'s refusal."""
    declared = _K8S_VERSION_RE.fullmatch(cluster.resolved_k8s_version())
    for kind, pool in (("cpu_nodes", cluster.cpu_nodes), ("gpu_nodes", cluster.gpu_nodes)):
        if pool is None or not pool.version.strip():
            continue
        version = pool.version.strip()
        if not pool.pin:
            yield _problem(
                f"{kind}.version",
                f"{kind}.version {version!r} needs pin: true "
                "(an unpinned pool runs the cluster's k8s_version)",
                f"set {kind}.pin: true to hold it at {version}, or remove version",
            )
            continue
        match = _K8S_VERSION_RE.fullmatch(version)
        if match is None:
            yield _problem(
                f"{kind}.version",
                f"{kind}.version {version!r} is not a Kubernetes minor in the Nebius format",
                "e.g. 1.32 or 1.32-nebius-node.2",
            )
        elif declared is not None and (int(match["major"]), int(match["minor"])) > (
            int(declared["major"]),
            int(declared["minor"]),
        ):
            yield _problem(
                f"{kind}.version",
                f"{kind}.version {version} is newer than the cluster's k8s_version "
                f"{cluster.resolved_k8s_version()}: a node group never is (Kubernetes version skew policy)",
                "upgrade the control plane first, or lower the pool's version",
            )


def _pool_platform_and_preset(cluster: ClusterSpec) -> Iterator[RawProblem]:
    """A pool with nodes names its preset (the original's desired state refuses one without), and a CPU
    pool is not on a GPU platform (its nodes would be GPU machines billed and drained as CPU nodes)."""
    for kind, pool in (("cpu_nodes", cluster.cpu_nodes), ("gpu_nodes", cluster.gpu_nodes)):
        if pool is None or pool.count <= 0:
            continue
        if not pool.platform or not pool.preset:
            field = "platform" if not pool.platform else "preset"
            yield _problem(
                f"{kind}.{field}",
                f"{kind} has {pool.count} node(s) but no {field}",
                "e.g. platform cpu-d3 with preset 16vcpu-64gb"
                if kind == "cpu_nodes"
                else "e.g. platform gpu-h200-sxm with preset 8gpu-128vcpu-1600gb",
            )
    cpu = cluster.cpu_nodes
    if cpu is not None and cpu.count > 0 and cpu.is_gpu():
        yield _problem(
            "cpu_nodes.platform",
            f"cpu_nodes cannot use a GPU platform (got {cpu.platform!r})",
            "declare GPU machines under gpu_nodes; cpu_nodes takes a cpu- platform such as cpu-d3",
        )


def _gpu_pool_shape(cluster: ClusterSpec) -> Iterator[RawProblem]:
    gpu = cluster.gpu_nodes
    if gpu is None or gpu.count <= 0:
        return
    if not gpu.is_gpu():
        yield _problem(
            "gpu_nodes.platform",
            f"gpu_nodes.platform must start with 'gpu-' (got {gpu.platform!r})",
            "e.g. gpu-h200-sxm or gpu-rtx6000",
        )
    if not preset_declares_gpus(gpu.preset):
        yield _problem(
            "gpu_nodes.preset",
            f"gpu_nodes.preset must include a positive GPU count (got {gpu.preset!r})",
            "e.g. 1gpu-24vcpu-218gb or 8gpu-128vcpu-1600gb",
        )


def _reservation(cluster: ClusterSpec) -> Iterator[RawProblem]:
    gpu = cluster.gpu_nodes
    if gpu is None or not gpu.capacity_block_group:
        return
    # A non-GPU platform or preset with count > 0 is already reported by the pool-shape rule.
    if not cluster.mig_enabled() and gpu.count <= 0:
        yield _problem(
            "gpu_nodes.capacity_block_group",
            "capacity_block_group requires a GPU node pool",
            "set gpu_nodes.count > 0 with a gpu- platform and an <N>gpu- preset",
        )
    if gpu.preemptible:
        yield _problem(
            "gpu_nodes.preemptible",
            "strict reserved gpu_nodes cannot also be preemptible",
            "remove preemptible, or remove capacity_block_group for preemptible on-demand nodes",
        )


def _gpu_cluster(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if not cluster.resolved_enable_gpu_cluster():
        return
    if not is_fabric_capable_topology(cluster.gpu_platform(), cluster.gpu_preset()):
        preset = cluster.gpu_preset()
        yield _problem(
            "enable_gpu_cluster" if cluster.enable_gpu_cluster is not None else "gpu_nodes.preset",
            f"enable_gpu_cluster requires a fabric-capable 8-GPU SXM/NVL preset (got {preset!r} if any)",
            "use an 8gpu- preset on an -sxm/-nvl platform, or set enable_gpu_cluster: false",
        )
    if not cluster.infiniband_fabric:
        why = (
            ""
            if cluster.enable_gpu_cluster is not None
            else " (GPU clustering is on automatically for 8-GPU SXM/NVL nodes)"
        )
        yield _problem(
            "infiniband_fabric",
            f"enable_gpu_cluster requires 'infiniband_fabric'{why}",
            "set infiniband_fabric, or set enable_gpu_cluster: false",
        )


def _filestore(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if not cluster.enable_filestore:
        return
    if cluster.filestore_disk_size_gibibytes <= 0:
        yield _problem("filestore_disk_size_gibibytes", "filestore_disk_size_gibibytes must be positive")
    if not cluster.filestore_mount_path.startswith("/"):
        yield _problem("filestore_mount_path", "filestore_mount_path must be absolute", "e.g. /mnt/data")
    tag = cluster.filestore_mount_tag
    if not tag or any(ch.isspace() or ch == "," for ch in tag):
        yield _problem(
            "filestore_mount_tag",
            "filestore_mount_tag must be a non-empty value without whitespace or commas",
            "e.g. data",
        )
    if any(ch.isspace() for ch in cluster.filesystem_csi_chart_repository):
        yield _problem(
            "filesystem_csi_chart_repository", "filesystem_csi_chart_repository must not contain whitespace"
        )


def _gpu_disk(cluster: ClusterSpec) -> Iterator[RawProblem]:
    gpu = cluster.gpu_nodes
    if gpu and gpu.count > 0 and gpu.disk_size_gib == 0 and cluster.gpu_disk_size_gib <= 0:
        yield _problem("gpu_disk_size_gib", "gpu_disk_size_gib must be positive", "the default is 1023")


def _mig(cluster: ClusterSpec) -> Iterator[RawProblem]:
    mig = cluster.mig
    if mig is None:
        return
    if not mig.enabled:
        if mig.strategy != "none" or mig.config:
            yield _problem(
                "mig",
                "disabled MIG requires strategy 'none' and an empty config",
                "remove strategy and config, or set enabled: true",
            )
        return
    gpu = cluster.gpu_nodes
    platform, preset = cluster.gpu_platform(), cluster.gpu_preset()
    count = cluster.gpu_count()
    if platform != c.MIG_PLATFORM:
        yield _problem(
            "gpu_nodes.platform",
            "hardware MIG is supported only for RTX PRO 6000 Blackwell Server "
            f"Edition ({c.MIG_PLATFORM}); got {platform!r}",
        )
    if preset != c.MIG_PRESET:
        yield _problem(
            "gpu_nodes.preset",
            f"RTX PRO 6000 MIG requires the tested one-GPU preset {c.MIG_PRESET!r}; got {preset!r}",
        )
    if count != c.MIG_GPU_WORKERS:
        yield _problem("gpu_nodes.count", f"RTX PRO 6000 MIG requires exactly two GPU workers; got {count}")
    if not cluster.capacity_block_group():
        yield _problem(
            "gpu_nodes.capacity_block_group",
            "RTX PRO 6000 MIG requires gpu_nodes.capacity_block_group "
            "so placement is STRICT and cannot fall back to on-demand",
            "supply the capacity block group id (keep it out of committed files)",
        )
    disk = gpu.disk_size_gib if gpu else 0
    if disk not in (0, c.MIG_BOOT_DISK_GIB):
        yield _problem(
            "gpu_nodes.disk_size_gib",
            f"RTX PRO 6000 MIG requires the 128 GiB GPU boot disk; got {disk} GiB",
            "remove disk_size_gib or set it to 128",
        )
    if mig.strategy != c.MIG_STRATEGY:
        yield _problem(
            "mig.strategy", f"RTX PRO 6000 MIG strategy must be {c.MIG_STRATEGY!r}; got {mig.strategy!r}"
        )
    if mig.config != c.MIG_CONFIG:
        yield _problem("mig.config", f"RTX PRO 6000 MIG config must be {c.MIG_CONFIG!r}; got {mig.config!r}")
    if cluster.k8s_version and cluster.k8s_version != c.MIG_KUBERNETES_VERSION:
        yield _problem(
            "k8s_version",
            f"RTX PRO 6000 MIG requires Kubernetes {c.MIG_KUBERNETES_VERSION}; got {cluster.k8s_version!r}",
            f"remove k8s_version or set it to {c.MIG_KUBERNETES_VERSION!r}",
        )
    if cluster.gpu_driver_mode == "managed-image":
        yield _problem(
            "gpu_driver_mode",
            "RTX PRO 6000 MIG requires the pinned GPU Operator driver; "
            "gpu_driver_mode 'managed-image' is incompatible",
            "set gpu_driver_mode to auto or operator",
        )
    if not cluster.gpu_cuda_smoke:
        yield _problem(
            "gpu_cuda_smoke",
            "RTX PRO 6000 MIG requires gpu_cuda_smoke: true so deploy verifies a real MIG allocation",
        )


def _driver(cluster: ClusterSpec) -> Iterator[RawProblem]:
    for field, message, hint in driver_problems(
        cluster.driver_selection(), allow_unsafe_nvswitch_operator=cluster.allow_unsafe_nvswitch_operator
    ):
        yield _problem(field, message, hint)


def _health(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if cluster.gpu_health_stabilization_seconds < 0:
        yield _problem(
            "gpu_health_stabilization_seconds", "gpu_health_stabilization_seconds cannot be negative"
        )
    if cluster.gpu_health_timeout_minutes <= 0:
        yield _problem("gpu_health_timeout_minutes", "gpu_health_timeout_minutes must be positive")
    if cluster.gpu_cuda_smoke and not cluster.gpu_cuda_smoke_image.strip():
        yield _problem(
            "gpu_cuda_smoke_image", "gpu_cuda_smoke_image cannot be empty when gpu_cuda_smoke is on"
        )


def _fabric_check(cluster: ClusterSpec) -> Iterator[RawProblem]:
    """`gpu_fabric_check`: only on multi-GPU NVLink presets when enabled; sane sizes and thresholds; its
    deadline within the health gate's."""
    block = cluster.gpu_fabric_check
    if block is None:
        return
    if block.enabled and not (
        cluster.gpu_count() > 0 and has_nvlink_fabric(cluster.gpu_platform(), cluster.gpu_preset())
    ):
        yield _problem(
            "gpu_fabric_check.enabled",
            "the fabric check needs GPU nodes with several NVLink/NVSwitch GPUs (an -sxm/-nvl platform "
            f"with a multi-GPU preset), got {cluster.gpu_platform() or 'no GPU pool'!r} / "
            f"{cluster.gpu_preset() or 'no preset'!r}",
            "remove gpu_fabric_check or set enabled: false; single-GPU clusters record it not-applicable",
        )
    for name in ("intra_node_min_busbw_gbps", "inter_node_min_busbw_gbps"):
        if getattr(block, name) < 0:
            yield _problem(f"gpu_fabric_check.{name}", f"gpu_fabric_check.{name} cannot be negative")
    low, high = size_bytes(block.min_bytes), size_bytes(block.max_bytes)
    for name, value in (("min_bytes", low), ("max_bytes", high)):
        if not value:
            yield _problem(
                f"gpu_fabric_check.{name}",
                f"gpu_fabric_check.{name} must be a positive message size",
                "e.g. 512M or 8G (binary units K, M, G)",
            )
    if low and high and low > high:
        yield _problem("gpu_fabric_check.max_bytes", "gpu_fabric_check.max_bytes must be >= min_bytes")
    if block.step_factor < 2:
        yield _problem("gpu_fabric_check.step_factor", "gpu_fabric_check.step_factor must be >= 2")
    if block.timeout_minutes <= 0:
        yield _problem(
            "gpu_fabric_check.timeout_minutes", "gpu_fabric_check.timeout_minutes must be positive"
        )
    elif block.timeout_minutes > cluster.gpu_health_timeout_minutes:
        yield _problem(
            "gpu_fabric_check.timeout_minutes",
            f"gpu_fabric_check.timeout_minutes ({block.timeout_minutes}) exceeds gpu_health_timeout_minutes "
            f"({cluster.gpu_health_timeout_minutes})",
            "the fabric check runs within the health gate's deadline",
        )


def _workload_profile(cluster: ClusterSpec) -> Iterator[RawProblem]:
    for field, message, hint in rtx_profile_problems(cluster):
        yield _problem(field, message, hint)
    if cluster.gpu_workload_profile == c.RTX_RENDERING_PROFILE and not cluster.gpu_graphics_smoke:
        yield _problem("gpu_workload_profile", "the RTX rendering profile requires graphics readiness checks")
    image = cluster.gpu_graphics_smoke_image
    if not is_digest_pinned(image):
        yield _problem(
            "gpu_graphics_smoke_image",
            f"gpu_graphics_smoke_image must be pinned by digest, got {image!r}",
            "name it by content: REGISTRY/REPOSITORY@sha256:<64 hex digits> (`docker buildx imagetools "
            "inspect IMAGE` prints the digest); the image must ship bash, python3 and vulkaninfo",
        )


_MK8S_RULES = (
    _kuberay,
    _backend,
    _name,
    _package_repositories,
    _workload_profile,
    _has_nodes,
    _pool_numbers,
    _pool_versions,
    _gpu_pool_shape,
    _reservation,
    _gpu_cluster,
    _filestore,
    _gpu_disk,
    _mig,
    _driver,
    _health,
    _fabric_check,
)


# --- soperator -----------------------------------------------------------------------------------------


def _soperator_cluster(cluster: ClusterSpec) -> Iterator[RawProblem]:
    if cluster.kuberay is not None:
        yield _problem("kuberay", "kuberay is supported only by the mk8s backend")
    if not is_dns_label(cluster.name):
        yield _problem(
            "name", f"cluster name must be a lowercase DNS-1123 label: {cluster.name!r}", _DNS_HINT
        )
    payload = cluster.soperator
    if payload is None:
        yield _problem("soperator", "backend 'soperator' requires a 'soperator' mapping")
        return
    if payload.name and payload.name != cluster.name:
        yield _problem(
            "soperator.name",
            f"soperator.name {payload.name!r} must match the fleet target name {cluster.name!r}",
            "remove soperator.name; the cluster name is used",
        )
    for problem in check_soperator(payload):
        yield _prefixed(("soperator",), problem)


def check_soperator(payload: SoperatorSpec) -> Iterator[RawProblem]:
    """Rules of the npa.soperator/v0.0.1 payload (paths relative to the payload)."""
    if not payload.workers:
        yield _problem("workers", "at least one worker pool is required")
    seen: dict[str, int] = {}
    for index, worker in enumerate(payload.workers):
        base: PathTuple = ("workers", index)
        if not worker.name or not worker.name.replace("-", "").isalnum():
            yield _problem((*base, "name"), f"worker pool name must be alphanumeric/dash: {worker.name!r}")
        elif worker.name in seen:
            yield _problem((*base, "name"), f"duplicate worker pool name {worker.name!r}")
        seen.setdefault(worker.name, index)
        yield from (_prefixed(base, problem) for problem in _soperator_worker(worker))
    system = payload.control_plane.system
    if system.min_size < 3:
        yield _problem(
            "control_plane.system.min_size", "control_plane.system.min_size must be >= 3 (recipe rule)"
        )
    if system.max_size is not None and system.max_size < system.min_size:
        yield _problem("control_plane.system.max_size", "control_plane.system.max_size must be >= min_size")
    if payload.jail_size_gib <= 0:
        yield _problem("jail_size_gib", "jail_size_gib must be positive")
    yield from check_soperator_contract(payload)


def _soperator_worker(worker: SoperatorWorkerSpec) -> Iterator[RawProblem]:
    if worker.size < 1:
        yield _problem("size", "size must be >= 1")
    if worker.is_gpu() and not worker.fabric:
        yield _problem(
            "fabric",
            f"GPU preset {worker.preset!r} requires a non-empty 'fabric' (the region's InfiniBand fabric)",
            "1-GPU presets cannot cluster; use an 8-GPU SXM preset for GPU workers",
        )
    if not worker.is_gpu() and worker.fabric:
        yield _problem("fabric", "a CPU worker pool must not set 'fabric'")
    if worker.docker_cache and worker.docker_cache_gib % 93 != 0:
        yield _problem(
            "docker_cache_gib", f"docker_cache_gib must be divisible by 93 (got {worker.docker_cache_gib})"
        )
    if worker.boot_disk_gib < 512:
        yield _problem("boot_disk_gib", "boot_disk_gib must be >= 512 (recipe rule)")
    reserved = "capacity_block_group" if worker.capacity_block_group else "capacity_block_group_name"
    if (worker.capacity_block_group or worker.capacity_block_group_name) and worker.preemptible:
        yield _problem("preemptible", "strict reserved workers cannot also be preemptible")
    if (worker.capacity_block_group or worker.capacity_block_group_name) and not worker.is_gpu():
        yield _problem(reserved, f"{reserved} is only valid for GPU worker pools")


def _prefixed(prefix: PathTuple, problem: RawProblem) -> RawProblem:
    return RawProblem((*prefix, *problem.path), problem.message, problem.hint)
