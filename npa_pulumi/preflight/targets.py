"""From resolved fleet targets to preflight demand, with what the cloud already has taken into account.

* a named project that a single listing of the tenant already finds is not new (no VPC topology demand);
* a bucket that already exists and matches is not new;
* a cluster whose stack is deployed with the same inputs and whose live cluster and node groups are all
  running with the requested counts adds no demand (`unchanged` is decided by the caller, which knows the
  stacks; see `npa_pulumi.engine.preflight_gate`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.plan.naming import derived_bucket_name
from npa_pulumi.preflight.demand import BucketDemandInput, ClusterDemandInput, ProjectDemandInput
from npa_pulumi.preflight.report import PreflightReport
from npa_pulumi.preflight.runner import evaluate_preflight, run_preflight
from npa_pulumi.preflight.soperator_demand import soperator_demand

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.plan import Target


def cluster_demand(target: Target, unchanged: bool = False) -> ClusterDemandInput:
    cluster = target.cluster
    cpu, gpu = cluster.cpu_nodes, cluster.gpu_nodes
    return ClusterDemandInput(
        target=f"{target.project_key}/{target.cluster_name}",
        region=target.region,
        cpu_count=cpu.count if cpu else 0,
        cpu_platform=cpu.platform if cpu else "cpu-d3",
        cpu_preset=cpu.preset if cpu else "",
        cpu_disk_gib=cpu.disk_size_gib if cpu else 0,
        cpu_preemptible=cpu.preemptible if cpu else False,
        gpu_count=gpu.count if gpu else 0,
        gpu_platform=gpu.platform if gpu else "",
        gpu_preset=gpu.preset if gpu else "",
        gpu_disk_gib=gpu.disk_size_gib if gpu and gpu.disk_size_gib > 0 else 1023,
        gpu_preemptible=gpu.preemptible if gpu else False,
        capacity_block_group=cluster.capacity_block_group_value(),
        enable_gpu_cluster=cluster.enable_gpu_cluster,
        infiniband_fabric=cluster.infiniband_fabric,
        enable_filestore=cluster.enable_filestore,
        existing_filestore=cluster.existing_filestore,
        filestore_gib=cluster.filestore_disk_size_gibibytes,
        unchanged_live_verified=unchanged,
    )


def _existing_project_ids(cloud: CloudPort, tenant_id: str, targets: Sequence[Target]) -> dict[str, str]:
    """project_key -> project id for every selected project that already exists (one listing)."""
    found: dict[str, str] = {t.project_key: t.project_id for t in targets if t.project_id}
    named = {t.project_key: t.display_name for t in targets if not t.project_id}
    if named:
        by_name: dict[str, list[str]] = {}
        for project in cloud.list_projects(tenant_id):
            by_name.setdefault(project.name, []).append(project.id)
        for key, name in named.items():
            ids = by_name.get(name, [])
            if len(ids) == 1:
                found[key] = ids[0]
    return found


def build_inputs(
    cloud: CloudPort,
    tenant_id: str,
    targets: Sequence[Target],
    unchanged_stacks: Iterable[str] = (),
    bucket_names: dict[str, str] | None = None,
) -> tuple[list[ClusterDemandInput], list[ProjectDemandInput], list[BucketDemandInput]]:
    unchanged = set(unchanged_stacks)
    mk8s = [t for t in targets if t.backend == "mk8s"]
    clusters = [cluster_demand(t, t.cluster_stack in unchanged) for t in mk8s]
    # Projects of every deployed backend (mk8s and soperator targets share their project's network).
    deployed = [t for t in targets if t.backend in ("mk8s", "soperator")]
    existing = _existing_project_ids(cloud, tenant_id, deployed)
    with_mk8s = {t.project_key for t in mk8s}
    projects: list[ProjectDemandInput] = []
    buckets: list[BucketDemandInput] = []
    seen: set[str] = set()
    for target in deployed:
        if target.project_key in seen:
            continue
        seen.add(target.project_key)
        projects.append(
            ProjectDemandInput(
                key=target.project_key, region=target.region, exists=target.project_key in existing
            )
        )
        storage = target.object_storage
        if storage is None or target.project_key not in with_mk8s:  # refused before preflight otherwise
            continue
        exists = False
        project_id = existing.get(target.project_key)
        name = storage.bucket_name or (bucket_names or {}).get(target.project_key)
        if not name and project_id:
            name = derived_bucket_name(tenant_id, project_id, target.fleet)
        if project_id and name:
            bucket = cloud.find_bucket(project_id, name)
            exists = (
                bucket is not None
                and bucket.max_size_bytes == storage.size_bytes
                and bucket.storage_class == storage.storage_class
            )
        buckets.append(
            BucketDemandInput(
                key=target.project_key,
                region=target.region,
                storage_class=storage.storage_class,
                size_gib=storage.size_gibibytes,
                exists_verified=exists,
            )
        )
    return clusters, projects, buckets


def preflight_targets(
    cloud: CloudPort,
    tenant_id: str,
    targets: Sequence[Target],
    unchanged_stacks: Iterable[str] = (),
    bucket_names: dict[str, str] | None = None,
) -> PreflightReport:
    try:
        unchanged = set(unchanged_stacks)
        clusters, projects, buckets = build_inputs(cloud, tenant_id, targets, unchanged, bucket_names)
        soperators = [
            soperator_demand(t, t.cluster_stack in unchanged) for t in targets if t.backend == "soperator"
        ]
    except CloudError as err:
        # Unreadable inventory fails closed: nothing is assumed to exist, and nothing is deployed.
        return evaluate_preflight(tenant_id, [], [], None, None, errors=[f"cannot read the inventory: {err}"])
    return run_preflight(
        cloud, tenant_id, clusters=clusters, projects=projects, buckets=buckets, soperators=soperators
    )
