"""The offline plan: what a fleet would deploy, as the JSON document of `plan --output json` and as text.

Nothing here calls a cloud. Capacity-block ids, chart repositories and package-repository contents never
appear: the document says *that* a pool is strictly reserved, not *what* it is reserved on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from npa_pulumi.plan.cost import Cost, LineKind, combine, plan_costs
from npa_pulumi.plan.prices import PriceCatalog, load_catalog
from npa_pulumi.plan.rollout import RolloutPolicy, assign_waves, members_of
from npa_pulumi.plan.targets import ResolvedCluster, ResolvedPool, Target, resolve_object_storage
from npa_pulumi.spec.constants import API_VERSION, BackendKind
from npa_pulumi.spec.models import FleetSpec, SoperatorSpec


def plan_document(
    spec: FleetSpec,
    targets: Sequence[Target],
    project_prefix: str | None = None,
    prices: PriceCatalog | None = None,
    rollout: RolloutPolicy | None = None,
) -> dict[str, Any]:
    """The plan of the selected targets (projects without a selected target are left out), with what each
    stack, project and the fleet cost (`prices`: the catalog in use; default the shipped one, or
    $NPA_PRICES layered over it).

    `project_prefix` is the --project-prefix override the targets were resolved with, if any; `rollout`
    the staged rollout's policy when the command line gives one (else the spec's `rollout:` block).
    """
    costs = plan_costs(targets, prices or load_catalog())
    projects: dict[int, dict[str, Any]] = {}
    stacks_of: dict[int, list[tuple[str, Cost]]] = {}
    for target in targets:
        entry = projects.get(target.project_index)
        if entry is None:
            entry = projects[target.project_index] = _project(spec, target)
            entry["cost"] = costs[target.project_stack].to_json()
            stacks_of[target.project_index] = [(target.project_stack, costs[target.project_stack])]
        entry["clusters"].append({**_cluster(target), "cost": costs[target.cluster_stack].to_json()})
        stacks_of[target.project_index].append((target.cluster_stack, costs[target.cluster_stack]))
    project_totals = {index: combine(parts) for index, parts in stacks_of.items()}
    for index, entry in projects.items():
        entry["total_cost"] = project_totals[index].to_json()
    fleet_cost = combine(
        ((projects[index]["key"], project_totals[index]) for index in sorted(projects)), LineKind.PROJECT
    )
    backends = Counter(target.backend for target in targets)
    return {
        "api_version": API_VERSION,
        "name": spec.name,
        "tenant_id": spec.tenant_id or None,  # None: resolved from the Nebius profile at deploy time
        "region": spec.region or None,
        "project_prefix": spec.project_prefix if project_prefix is None else project_prefix,
        "profile": spec.profile or None,
        "project_count": len(projects),
        "cluster_count": len(targets),
        "backend_counts": {kind.value: backends.get(kind, 0) for kind in BackendKind},
        "projects": [projects[index] for index in sorted(projects)],
        "cost": fleet_cost.to_json(),
        "prices": (prices or load_catalog()).describe(),
        **_rollout(spec, targets, rollout),
    }


def _rollout(spec: FleetSpec, targets: Sequence[Target], policy: RolloutPolicy | None) -> dict[str, Any]:
    if policy is None and spec.rollout is not None:
        policy = RolloutPolicy.from_spec(spec.rollout)
    if policy is None:
        return {}
    return {"rollout": assign_waves(policy, members_of(targets)).to_json()}


def _project(spec: FleetSpec, target: Target) -> dict[str, Any]:
    project = spec.projects[target.project_index]
    storage = resolve_object_storage(project)
    return {
        "key": target.project_key,
        "display_name": target.display_name,
        "project_id": target.project_id,
        "will_create": target.project_id is None,
        "region": target.region or None,
        "stack": target.project_stack,
        "object_storage": None
        if storage is None
        else {
            "enabled": True,
            "storage_class": storage.display_storage_class,
            "size_gibibytes": storage.size_gibibytes,
            "bucket_name": storage.bucket_name,  # None: derived privately at deploy time
        },
        "clusters": [],
    }


def _pool(pool: ResolvedPool | None, *, gpu: bool) -> dict[str, Any]:
    out: dict[str, Any] = {
        "count": pool.count if pool else 0,
        "platform": pool.platform if pool else None,
        "preset": (pool.preset or None) if pool else None,
        "disk_size_gib": pool.disk_size_gib if pool and pool.count > 0 else None,
    }
    out["preemptible"] = bool(pool and pool.preemptible)
    if gpu:
        out["gpus_per_node"] = pool.gpus_per_node if pool else 0
    return out


def _cluster(target: Target) -> dict[str, Any]:
    cluster = target.cluster
    gpu = _pool(cluster.gpu_nodes, gpu=True)
    gpu["node_groups"] = cluster.gpu_node_groups
    gpu["nodes_per_group"] = cluster.gpu_nodes_per_group
    return {
        "name": target.cluster_name,
        "stack": target.cluster_stack,
        "backend": target.backend.value,
        "cpu_nodes": _pool(cluster.cpu_nodes, gpu=False),
        "gpu_nodes": gpu,
        "gpu_reservation": cluster.gpu_reservation,
        "enable_gpu_cluster": cluster.enable_gpu_cluster,
        "infiniband_fabric": cluster.infiniband_fabric or None,
        "gpu_driver_mode": cluster.gpu_driver_mode,
        "managed_driver_preset": cluster.managed_driver_preset,
        "nvswitch_topology": cluster.nvswitch_topology,
        "enable_filestore": cluster.enable_filestore,
        "existing_filestore": cluster.existing_filestore or None,
        "filestore_disk_size_gibibytes": cluster.filestore_disk_size_gibibytes,
        "filestore_mount_path": cluster.filestore_mount_path,
        "filestore_mount_tag": cluster.filestore_mount_tag,
        "filesystem_csi_enabled": cluster.enable_filestore,
        "k8s_version": cluster.k8s_version or None,  # None: the backend's default
        "subnet_id": cluster.subnet_id,
        "mig": None
        if cluster.mig is None
        else {
            "strategy": cluster.mig.strategy,
            "config": cluster.mig.config,
            "versions": cluster.mig.versions,
            "resources_per_node": cluster.mig.resources_per_node,
        },
        "kuberay": None if cluster.kuberay is None else cluster.kuberay.model_dump(),
        "gpu_workload_profile": cluster.gpu_workload_profile,
        "gpu_driver_package_repositories": sorted(cluster.gpu_driver_package_repositories),  # names only
        "gpu_health": {
            "stabilization_seconds": cluster.health.stabilization_seconds,
            "timeout_minutes": cluster.health.timeout_minutes,
            "cuda_smoke": cluster.health.cuda_smoke,
            "graphics_smoke": cluster.health.graphics_smoke,
            # the probe's image (digest-pinned) only where the probe runs
            "graphics_smoke_image": cluster.health.graphics_smoke_image
            if cluster.health.graphics_smoke
            else None,
        },
        "gpu_fabric_check": _fabric_check(cluster),
        "soperator": None if cluster.soperator is None else _soperator(cluster.soperator),
    }


def _fabric_check(cluster: ResolvedCluster) -> dict[str, Any]:
    fabric = cluster.fabric_check
    if fabric.not_applicable:
        return {"status": "not-applicable", "reason": fabric.not_applicable}
    return {
        "status": "enabled",
        "intra_node_min_busbw_gbps": fabric.intra_node_min_busbw_gbps,
        "inter_node_min_busbw_gbps": fabric.inter_node_min_busbw_gbps if fabric.inter_node else None,
        "inter_node": "enabled" if fabric.inter_node else f"not-applicable: {fabric.inter_not_applicable}",
        "benchmark": f"all_reduce_perf -b {fabric.min_bytes} -e {fabric.max_bytes} -f {fabric.step_factor}",
        "timeout_minutes": fabric.timeout_minutes,
    }


def _soperator(payload: SoperatorSpec) -> dict[str, Any]:
    return {
        "workers": [
            {
                "name": worker.name,
                "platform": worker.platform,
                "preset": worker.preset,
                "size": worker.size,
                "preemptible": worker.preemptible,
                "reservation": "strict" if worker.capacity_block_group else "on-demand",
            }
            for worker in payload.workers
        ],
        "slurm_operator_version": payload.slurm_operator_version,
        "k8s_version": payload.k8s_version or None,
    }
