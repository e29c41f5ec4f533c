"""From resolved fleet targets to preflight demand, with what the cloud already has taken into account.

* a named project that a single listing of the tenant already finds is not new (no VPC topology demand);
* a bucket that already exists and matches is not new;
* a cluster whose stack is deployed with the same inputs (the caller, which knows the stacks, passes its
  claimed project and cluster: `npa_pulumi.engine.preflight_gate`) adds no demand only when the live
  inventory proves it exactly (`live_proof.py`); otherwise it is charged in full, and a note says why.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.plan.naming import derived_bucket_name
from npa_pulumi.preflight.demand import BucketDemandInput, ClusterDemandInput, ProjectDemandInput
from npa_pulumi.preflight.live_proof import ClaimedCluster, live_proof_problems
from npa_pulumi.preflight.report import PreflightReport
from npa_pulumi.preflight.runner import evaluate_preflight, run_preflight
from npa_pulumi.preflight.soperator_demand import soperator_demand
from npa_pulumi.spec.constants import DEFAULT_GPU_DISK_GIB

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
        gpu_disk_gib=gpu.disk_size_gib if gpu and gpu.disk_size_gib > 0 else DEFAULT_GPU_DISK_GIB,
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
    claimed: Mapping[str, ClaimedCluster] | None = None,
    bucket_names: dict[str, str] | None = None,
    notes: list[str] | None = None,
) -> tuple[list[ClusterDemandInput], list[ProjectDemandInput], list[BucketDemandInput]]:
    mk8s = [t for t in targets if t.backend == "mk8s"]
    clusters = [cluster_demand(t, _proven(cloud, tenant_id, t, claimed or {}, notes)) for t in mk8s]
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


def _proven(
    cloud: CloudPort,
    tenant_id: str,
    target: Target,
    claimed: Mapping[str, ClaimedCluster],
    notes: list[str] | None,
) -> bool:
    """Whether the target's claimed deployment is proven live (zero new demand); notes say either way."""
    claim = claimed.get(target.cluster_stack)
    if claim is None:
        return False
    problems = live_proof_problems(cloud, tenant_id, target, claim)
    where = f"{target.project_key}/{target.cluster_name}"
    if notes is not None:
        if problems:
            notes.append(f"{where}: deployed, but charged in full: {'; '.join(problems[:5])}")
        else:
            notes.append(f"{where}: deployed as requested (live proof): no new demand")
    return not problems


def preflight_targets(
    cloud: CloudPort,
    tenant_id: str,
    targets: Sequence[Target],
    claimed: Mapping[str, ClaimedCluster] | None = None,
    bucket_names: dict[str, str] | None = None,
) -> PreflightReport:
    """The report for `targets`; `claimed`: the deployed cluster stacks of the current plan, by stack."""
    notes: list[str] = []
    try:
        clusters, projects, buckets = build_inputs(cloud, tenant_id, targets, claimed, bucket_names, notes)
        soperators = [
            soperator_demand(t, _soperator_proven(cloud, t, claimed or {}, notes))
            for t in targets
            if t.backend == "soperator"
        ]
    except CloudError as err:
        # Unreadable inventory fails closed: nothing is assumed to exist, and nothing is deployed.
        return evaluate_preflight(tenant_id, [], [], None, None, errors=[f"cannot read the inventory: {err}"])
    report = run_preflight(
        cloud, tenant_id, clusters=clusters, projects=projects, buckets=buckets, soperators=soperators
    )
    report.notes.extend(notes)
    return report


def _soperator_proven(
    cloud: CloudPort, target: Target, claimed: Mapping[str, ClaimedCluster], notes: list[str]
) -> bool:
    """A deployed soperator target adds no demand only when the live cloud still runs the cluster its
    stack claims, in its project, with every node group at its target size; otherwise it is charged in
    full (a note says why). Node groups are the recipe's, so their templates are not matched here."""
    claim = claimed.get(target.cluster_stack)
    if claim is None:
        return False
    where = f"{target.project_key}/{target.cluster_name}"
    try:
        cluster = cloud.get_cluster(claim.cluster_id) if claim.cluster_id else None
        groups = cloud.list_node_groups(cluster.id) if cluster is not None else []
    except NotFound:
        cluster, groups = None, []
    problems = []
    if cluster is None or cluster.project_id != claim.project_id:
        problems.append("its cluster is not in the claimed project")
    elif cluster.state != "RUNNING":
        problems.append(f"its cluster is {cluster.state}")
    problems += [
        f"node group {g.name} is {g.state} with {g.ready_node_count}/{g.target_node_count} nodes"
        for g in groups
        if g.state != "RUNNING" or g.ready_node_count < g.target_node_count
    ]
    if problems:
        notes.append(f"{where}: deployed, but charged in full: {'; '.join(problems[:5])}")
        return False
    notes.append(f"{where}: deployed and running (live check): no new demand")
    return True
