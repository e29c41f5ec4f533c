"""From resolved fleet targets to preflight demand, with what the cloud already has taken into account.

* a named project that a single listing of the tenant already finds is not new (no VPC topology demand);
* a bucket that already exists and matches is not new;
* a cluster whose stack is deployed (the caller, which knows the stacks, passes what each claims:
  `npa_pulumi.engine.preflight_gate`) is charged only what its live cluster does not hold yet, as the live
  inventory proves it (`live_proof.py`): zero when it holds everything, the difference when it holds part,
  in full when the inventory does not prove it. The report's `deployed` lines and `notes` say which, and
  why, for each deployed cluster.

Which demand a target makes is its backend's answer (`TargetBudget`, implemented by the engine's backends):
the spec's node pools proven against the live inventory (`pool_demand`), or a soperator cluster's recipe
shapes (`soperator_cluster_demand`). A target no backend deploys is not budgeted.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, Protocol

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.plan.naming import derived_bucket_name
from npa_pulumi.preflight.demand import (
    BucketDemandInput,
    CapacityDemandConflict,
    ClusterDemandInput,
    ProjectDemandInput,
    SoperatorDemandInput,
    capacity_demand,
    compute_requirements,
)
from npa_pulumi.preflight.live_proof import CapacityProof, ClaimedCluster, ProjectObjects, prove_capacity
from npa_pulumi.preflight.project_identity import project_identity_errors
from npa_pulumi.preflight.report import (
    ChargedAmount,
    ChargedGpus,
    DeployedClusterLine,
    PreflightReport,
)
from npa_pulumi.preflight.runner import evaluate_preflight, run_preflight
from npa_pulumi.preflight.soperator_demand import soperator_demand
from npa_pulumi.spec.constants import DEFAULT_GPU_DISK_GIB

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort
    from npa_pulumi.plan import Target


def cluster_demand(
    target: Target, unchanged: bool = False, proof: CapacityProof | None = None
) -> ClusterDemandInput:
    """The target's demand: in full, none when `unchanged`, or, with a proven `proof`, only what its live
    cluster does not hold yet (the pool counts are then the nodes still charged)."""
    cluster = target.cluster
    cpu, gpu = cluster.cpu_nodes, cluster.gpu_nodes
    cpu_count, gpu_count = (cpu.count if cpu else 0), (gpu.count if gpu else 0)
    held: dict[str, object] = {}
    if proof is not None and proof.proven:
        cpu_count, gpu_count = proof.charged_nodes("cpu"), proof.charged_nodes("gpu")
        held = {
            "cluster_exists": True,
            "gpu_cluster_exists": proof.gpu_cluster_held,
            "filestore_held_gib": proof.filesystem_held_gib,
        }
    return ClusterDemandInput.model_validate(
        {
            "target": f"{target.project_key}/{target.cluster_name}",
            "region": target.region,
            "cpu_count": cpu_count,
            "cpu_platform": cpu.platform if cpu else "cpu-d3",
            "cpu_preset": cpu.preset if cpu else "",
            "cpu_disk_gib": cpu.disk_size_gib if cpu else 0,
            "cpu_preemptible": cpu.preemptible if cpu else False,
            "gpu_count": gpu_count,
            "gpu_platform": gpu.platform if gpu else "",
            "gpu_preset": gpu.preset if gpu else "",
            "gpu_disk_gib": gpu.disk_size_gib if gpu and gpu.disk_size_gib > 0 else DEFAULT_GPU_DISK_GIB,
            "gpu_preemptible": gpu.preemptible if gpu else False,
            "capacity_block_group": cluster.capacity_block_group_value(),
            "enable_gpu_cluster": cluster.enable_gpu_cluster,
            "infiniband_fabric": cluster.infiniband_fabric,
            "enable_filestore": cluster.enable_filestore,
            "existing_filestore": cluster.existing_filestore,
            "filestore_gib": cluster.filestore_disk_size_gibibytes,
            "unchanged_live_verified": unchanged,
            **held,
        }
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


DemandInput = ClusterDemandInput | SoperatorDemandInput


@dataclass
class DeployedLedger:
    """What the deployed clusters of one preflight were charged (notes and report lines, in target order),
    and the projects' GPU clusters and filesystems their proofs share."""

    objects: ProjectObjects
    notes: list[str]
    lines: list[DeployedClusterLine]

    def pools_first(self, pool_stacks: Sequence[str]) -> None:
        """The lines (and notes) of clusters charged for node pools first, then the others', each in target
        order: the report's order whatever order the targets were budgeted in."""
        first = set(pool_stacks)
        self.lines.sort(key=lambda line: line.stack not in first)
        self.notes = [line.describe() for line in self.lines]


class TargetBudget(Protocol):
    """How one target is budgeted, as its backend answers (engine/backends/): the demand it makes, and
    whether its project's object storage is demanded for it."""

    @property
    def uses_object_storage(self) -> bool: ...

    def preflight_demand(
        self,
        cloud: CloudPort,
        tenant_id: str,
        target: Target,
        claim: ClaimedCluster | None,
        ledger: DeployedLedger,
    ) -> DemandInput: ...


BudgetOf = Callable[["Target"], "TargetBudget | None"]


def _objects_at_start(targets: Sequence[Target], claimed: Mapping[str, ClaimedCluster]) -> ProjectObjects:
    """No cluster may take from a project's listings what a stack recorded as its own, nor a filesystem the
    spec names as existing."""
    found = {t.cluster.existing_filestore for t in targets if t.cluster.existing_filestore}
    for claim in claimed.values():
        found.update(claim.filesystem_ids, claim.gpu_cluster_ids)
    return ProjectObjects(credited=found)


def build_inputs(
    cloud: CloudPort,
    tenant_id: str,
    targets: Sequence[Target],
    budget_of: BudgetOf,
    claimed: Mapping[str, ClaimedCluster] | None = None,
    bucket_names: dict[str, str] | None = None,
    charged: DeployedLedger | None = None,
) -> tuple[
    list[ClusterDemandInput], list[SoperatorDemandInput], list[ProjectDemandInput], list[BucketDemandInput]
]:
    """Every budgeted target's demand (node pools and soperator clusters), its project's and the buckets
    of projects whose clusters use their object storage."""
    claimed = claimed or {}
    charged = charged or DeployedLedger(_objects_at_start(targets, claimed), [], [])
    budgeted = [(t, budget) for t in targets if (budget := budget_of(t)) is not None]
    demands = [
        (t, budget.preflight_demand(cloud, tenant_id, t, claimed.get(t.cluster_stack), charged))
        for t, budget in budgeted
    ]
    clusters = [d for _t, d in demands if isinstance(d, ClusterDemandInput)]
    soperators = [d for _t, d in demands if isinstance(d, SoperatorDemandInput)]
    charged.pools_first([t.cluster_stack for t, d in demands if isinstance(d, ClusterDemandInput)])
    # Projects of every deployed backend (their targets share their project's network).
    deployed = [t for t, _budget in budgeted]
    existing = _existing_project_ids(cloud, tenant_id, deployed)
    with_storage_users = {t.project_key for t, budget in budgeted if budget.uses_object_storage}
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
        if storage is None or target.project_key not in with_storage_users:  # refused before preflight
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
    return clusters, soperators, projects, buckets


def pool_demand(
    cloud: CloudPort, tenant_id: str, target: Target, claim: ClaimedCluster | None, charged: DeployedLedger
) -> ClusterDemandInput:
    """The demand of the target's node pools (as the spec describes them); for a deployed one, what its
    live proof leaves to charge, said in `charged`."""
    if claim is None:
        return cluster_demand(target)
    proof = prove_capacity(cloud, tenant_id, target, claim, charged.objects)
    if not proof.proven:
        demand = cluster_demand(target)
        _report(charged, target, demand, "full", list(proof.problems))
        return demand
    demand = cluster_demand(target, proof=proof)
    if not compute_requirements([demand]) and not _reserved([demand]):
        demand = demand.model_copy(update={"unchanged_live_verified": True})
        _report(charged, target, demand, "zero", proof.reasons())
    else:
        _report(charged, target, demand, "difference", proof.reasons())
    return demand


def _reserved(demands: Sequence[ClusterDemandInput]) -> list[ChargedGpus]:
    try:
        blocks = capacity_demand(demands)
    except CapacityDemandConflict:
        return []  # one cluster cannot conflict with itself; the fleet-wide check reports real conflicts
    return [ChargedGpus(id=mask_id(b.block_id), gpus=b.required_gpus) for b in blocks]


_Charge = Literal["zero", "difference", "full"]


def _report(
    charged: DeployedLedger,
    target: Target,
    demand: ClusterDemandInput | SoperatorDemandInput,
    charge: _Charge,
    reasons: list[str],
) -> None:
    """One deployed cluster's report line and note: what it is charged, and why."""
    if isinstance(demand, ClusterDemandInput):
        requirements = compute_requirements([demand])
        reserved = _reserved([demand])
    else:
        requirements = compute_requirements([], soperators=[demand])
        reserved = []
    amounts = [
        ChargedAmount(name=r.name, region=r.region, amount=r.amount, unit=r.unit) for r in requirements
    ]
    where = f"{target.project_key}/{target.cluster_name}"
    charged.lines.append(
        DeployedClusterLine(
            target=where,
            stack=target.cluster_stack,
            charge=charge,
            reasons=reasons,
            charged=amounts,
            reserved_gpus=reserved,
        )
    )
    charged.notes.append(charged.lines[-1].describe())


def preflight_targets(
    cloud: CloudPort,
    tenant_id: str,
    targets: Sequence[Target],
    budget_of: BudgetOf,
    claimed: Mapping[str, ClaimedCluster] | None = None,
    bucket_names: dict[str, str] | None = None,
) -> PreflightReport:
    """The report for `targets`, each budgeted as `budget_of` says (None: not deployed by this version,
    nothing budgeted); `claimed`: what each deployed cluster stack claims, by stack."""
    claimed = claimed or {}
    charged = DeployedLedger(_objects_at_start(targets, claimed), [], [])
    try:
        clusters, soperators, projects, buckets = build_inputs(
            cloud, tenant_id, targets, budget_of, claimed, bucket_names, charged
        )
    except CloudError as err:
        # Unreadable inventory fails closed: nothing is assumed to exist, and nothing is deployed.
        return evaluate_preflight(tenant_id, [], [], None, None, errors=[f"cannot read the inventory: {err}"])
    report = run_preflight(
        cloud, tenant_id, clusters=clusters, projects=projects, buckets=buckets, soperators=soperators
    )
    identity = project_identity_errors(cloud, tenant_id, targets)
    return report.model_copy(
        update={
            "notes": [*report.notes, *charged.notes],
            "deployed": charged.lines,
            "errors": [*identity, *report.errors],
            "ok": report.ok and not identity,
        }
    )


def soperator_cluster_demand(
    cloud: CloudPort, tenant_id: str, target: Target, claim: ClaimedCluster | None, charged: DeployedLedger
) -> SoperatorDemandInput:
    """A deployed soperator target adds no demand only when its stack was deployed from the current plan
    and the live cloud still runs the cluster it claims, in its project, with every node group at its
    target size; otherwise it is charged in full (said in `charged`). Its node groups are the recipe's,
    so their templates are not matched here: that is why the plan must be the same."""
    if claim is None:
        return soperator_demand(target)
    problems = _soperator_problems(cloud, claim)
    if problems:
        demand = soperator_demand(target)
        _report(charged, target, demand, "full", problems[:5])
        return demand
    demand = soperator_demand(target, unchanged=True)
    _report(charged, target, demand, "zero", ["deployed from the current plan and running (live check)"])
    return demand


def _soperator_problems(cloud: CloudPort, claim: ClaimedCluster) -> list[str]:
    if claim.refused:
        return [claim.refused]
    if not claim.same_plan:
        return [
            "the stack was deployed from another plan (or another npa-pulumi, Pulumi or terraform), and a "
            "soperator cluster's node groups are not matched against the spec"
        ]
    try:
        cluster = cloud.get_cluster(claim.cluster_id) if claim.cluster_id else None
        groups = cloud.list_node_groups(cluster.id) if cluster is not None else []
    except NotFound:
        cluster, groups = None, []
    if cluster is None or cluster.project_id != claim.project_id:
        return ["its cluster is not in the claimed project"]
    if cluster.state != "RUNNING":
        return [f"its cluster is {cluster.state}"]
    return [
        f"node group {g.name} is {g.state} with {g.ready_node_count}/{g.target_node_count} nodes"
        for g in groups
        if g.state != "RUNNING" or g.ready_node_count < g.target_node_count
    ]
