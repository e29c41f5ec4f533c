"""Live proof of what a deployed cluster already holds: a repeat deploy is charged only what the cluster
does not hold yet (zero when it holds everything its target asks for).

Only what decides capacity is compared, never the stack's fingerprint: an upgrade of npa-pulumi, Pulumi
or terraform, or an edit of the health gate, the fabric check, KubeRay or the RTX Helm selector, changes
the fingerprint and charges nothing. A deployed cluster stack only *claims* its project and cluster
(`ClaimedCluster`, from its outputs; the engine reads them). The claim is proven against a complete live
inventory, for the target as resolved from the spec:

* the cluster's identity: the exact project (the spec's `project_id` when it names one), ACTIVE, in the
  tenant and the region, and the exact cluster, RUNNING, in that project. Anything else (missing, not
  RUNNING, another tenant, an unreadable inventory) proves nothing: the target is charged in full;
* the node groups, kind by kind (one CPU group, `gpu_node_groups` GPU groups; split reserved pools are
  matched as separate groups) in the order of their names, as Terraform keeps them by index. A live group
  holds its workers when it has the requested template (platform, preset, boot disk, preemptibility; a
  reserved pool non-preemptible with the exact `STRICT` binding to the spec's capacity block, an unreserved
  pool no binding) and all its workers running (RUNNING, or PROVISIONING again with every worker counted;
  never while it waits on quota). The API's preemption marker (`{}` means preemptible, its absence not) is
  decoded at the port's boundary (`cloud/nebius/convert.py`), so `NodeGroup.preemptible` is the decoded
  value.

Then each requested group is charged what it needs beyond what its live group holds: nothing when the
group holds at least the requested count (a smaller count needs less: zero), the added workers when it
holds fewer, the whole group when it is new or its live group does not hold (another template: the group
is replaced; unhealthy or waiting on quota: unproven). A live group no longer asked for is credited nothing.
The cluster itself is not charged again; its GPU cluster and its shared filesystem are charged unless the
live project still has the ones the stack recorded (only a larger filesystem's missing size is charged).
A recipe that records neither (upstream k8s-training declares no live objects) is matched against the
project's listings instead: a GPU cluster on the requested fabric, a filesystem, each credited to one
cluster at most. Reservation ids are masked in every message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.redaction import mask_id

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort, Filesystem, GpuCluster, NodeGroup
    from npa_pulumi.plan import Target
    from npa_pulumi.plan.targets import ResolvedPool

STRICT = "STRICT"
GIB = 2**30
_COUNTED_STATES = ("RUNNING", "PROVISIONING")
_GONE_STATES = ("DELETING", "DELETED")


@dataclass(frozen=True)
class ClaimedCluster:
    """What a deployed cluster stack says it is (its outputs), as the engine read them.

    `refused`: why the stack cannot claim anything (its identity no longer matches the plan, `up --refresh`):
    the target is charged in full. `same_plan`: deployed from exactly the current plan (the fingerprint);
    only the soperator check needs it, as it does not match node group templates. `records_objects`: the
    recipe declares the objects it made (`npa_live_objects`), so `filesystem_ids` and `gpu_cluster_ids` are
    all it has; otherwise they are whatever the stack recorded, and the project's listings stand in."""

    project_id: str
    cluster_id: str
    refused: str = ""
    same_plan: bool = False
    records_objects: bool = False
    filesystem_ids: tuple[str, ...] = ()
    gpu_cluster_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExpectedGroup:
    """One node group the target asks for."""

    kind: str  # cpu | gpu
    count: int
    platform: str  # "" when the spec leaves it to the recipe's default
    preset: str  # likewise
    disk_gib: int
    preemptible: bool
    reservation_policy: str  # STRICT or ""
    reservation_ids: tuple[str, ...]


@dataclass(frozen=True)
class GroupCharge:
    """What one requested node group is charged: `nodes` of the target's pool, and why."""

    kind: str  # cpu | gpu
    nodes: int
    reason: str  # "" when the live group holds it as requested


@dataclass(frozen=True)
class CapacityProof:
    """What a claimed cluster holds of its target, and so what the target is still charged.

    `problems` non-empty: nothing is proven, the target is charged in full. Otherwise `groups` says what
    each requested node group is charged, `gpu_cluster_held` / `filesystem_held_gib` what of the rest the
    live cluster holds (`filesystem_held_gib` None: no filesystem held), `held_ids` the GPU cluster and
    filesystem credited to it, `remarks` what it holds that is no longer asked for."""

    problems: tuple[str, ...] = ()
    groups: tuple[GroupCharge, ...] = ()
    gpu_cluster_held: bool = False
    filesystem_held_gib: int | None = None
    held_ids: tuple[str, ...] = ()
    charged_extras: tuple[str, ...] = ()  # why the GPU cluster or the filesystem is charged
    remarks: tuple[str, ...] = ()

    @property
    def proven(self) -> bool:
        return not self.problems

    def charged_nodes(self, kind: str) -> int:
        return sum(g.nodes for g in self.groups if g.kind == kind)

    def reasons(self) -> list[str]:
        """Why each charged group is charged, then what is held and not asked for."""
        return [g.reason for g in self.groups if g.reason] + list(self.charged_extras) + list(self.remarks)


def expected_groups(target: Target) -> list[ExpectedGroup]:
    cluster = target.cluster
    groups: list[ExpectedGroup] = []
    if cluster.cpu_nodes is not None and cluster.cpu_count() > 0:
        groups.append(_expected("cpu", cluster.cpu_nodes, cluster.cpu_count(), ""))
    if cluster.gpu_nodes is not None and cluster.gpu_count() > 0:
        block = cluster.capacity_block_group_value()
        per_group = cluster.gpu_nodes_per_group
        groups += [
            _expected("gpu", cluster.gpu_nodes, per_group, block) for _ in range(cluster.gpu_node_groups)
        ]
    return groups


def _expected(kind: str, pool: ResolvedPool, count: int, block: str) -> ExpectedGroup:
    return ExpectedGroup(
        kind=kind,
        count=count,
        platform=pool.platform,
        preset=pool.preset or "",
        disk_gib=pool.disk_size_gib,
        preemptible=pool.preemptible,
        reservation_policy=STRICT if block else "",
        reservation_ids=(block,) if block else (),
    )


def _kind(group: NodeGroup) -> str:
    return "gpu" if group.platform.startswith("gpu-") else "cpu"


def _name_order(group: NodeGroup) -> tuple[tuple[int, str], ...]:
    """`x-ng-gpu-2` before `x-ng-gpu-10`: the recipe's index order."""
    return tuple((int(part), "") if part.isdigit() else (-1, part) for part in re.split(r"(\d+)", group.name))


def _binding(policy: str, ids: tuple[str, ...]) -> str:
    if not policy and not ids:
        return "no reservation"
    return f"{policy or '(no policy)'} [{', '.join(mask_id(i) for i in ids)}]"


def template_mismatches(live: NodeGroup, wanted: ExpectedGroup) -> list[str]:
    """How the live group's template differs from the requested one (empty: the same template)."""
    found: list[str] = []
    if wanted.platform and live.platform != wanted.platform:
        found.append(f"platform {live.platform}, {wanted.platform} requested")
    if wanted.preset and live.preset != wanted.preset:
        found.append(f"preset {live.preset}, {wanted.preset} requested")
    if wanted.disk_gib and live.disk_size_gib != wanted.disk_gib:
        found.append(f"boot disk {live.disk_size_gib} GiB, {wanted.disk_gib} GiB requested")
    if live.preemptible != wanted.preemptible:
        found.append(f"{'' if live.preemptible else 'not '}preemptible, the spec says otherwise")
    if wanted.reservation_policy and live.preemptible:
        found.append("a reserved pool must not be preemptible")
    live_ids, wanted_ids = tuple(live.reservation_ids), wanted.reservation_ids
    if live.reservation_policy.upper() != wanted.reservation_policy or sorted(live_ids) != sorted(wanted_ids):
        found.append(
            f"bound to {_binding(live.reservation_policy, live_ids)}, "
            f"{_binding(wanted.reservation_policy, wanted_ids)} requested"
        )
    return found


def health_problems(live: NodeGroup) -> list[str]:
    """Why the live group does not prove it holds its workers (empty: it does)."""
    found: list[str] = []
    if live.ready_node_count != live.target_node_count:
        found.append(f"{live.ready_node_count} of {live.target_node_count} worker(s) running")
    if live.state not in _COUNTED_STATES:
        found.append(f"state {live.state}")
    starved = [c for c in live.conditions if c.kind == "QuotaFailure"]
    if starved and live.state != "RUNNING":
        found.append(f"waiting on quota ({starved[0].quota or 'QuotaFailure'})")
    return found


def group_mismatches(live: NodeGroup, wanted: ExpectedGroup) -> list[str]:
    """How `live` differs from `wanted` exactly, its worker count included (empty: proven as requested)."""
    found = template_mismatches(live, wanted)
    if live.target_node_count != wanted.count:
        found.append(f"target {live.target_node_count} worker(s), {wanted.count} requested")
    return [f"node group {live.name}: {p}" for p in found + health_problems(live)]


def group_charge(live: NodeGroup | None, wanted: ExpectedGroup) -> GroupCharge:
    """What `wanted` is charged beside `live`, the live group Terraform keeps in its place (None: none)."""
    kind = wanted.kind.upper()
    if live is None:
        return GroupCharge(
            wanted.kind, wanted.count, f"new {kind} node group: {wanted.count} node(s) charged"
        )
    problems = template_mismatches(live, wanted) + health_problems(live)
    if problems:
        return GroupCharge(
            wanted.kind,
            wanted.count,
            f"node group {live.name} charged in full ({wanted.count} node(s)): {'; '.join(problems)}",
        )
    held = live.target_node_count
    if wanted.count > held:
        extra = wanted.count - held
        return GroupCharge(
            wanted.kind, extra, f"node group {live.name}: {held} → {wanted.count} node(s), {extra} charged"
        )
    if wanted.count < held:
        return GroupCharge(
            wanted.kind,
            0,
            f"node group {live.name}: {held} → {wanted.count} node(s) needs less: charged zero",
        )
    return GroupCharge(wanted.kind, 0, "")


def node_group_charges(
    live: list[NodeGroup], wanted: list[ExpectedGroup]
) -> tuple[list[GroupCharge], list[str]]:
    """Each requested group's charge, kind by kind, paired with the live groups in name order; and the live
    groups no longer asked for (credited nothing)."""
    charges: list[GroupCharge] = []
    remarks: list[str] = []
    for kind in ("cpu", "gpu"):
        mine = sorted((g for g in live if _kind(g) == kind), key=_name_order)
        theirs = [w for w in wanted if w.kind == kind]
        for index, expected in enumerate(theirs):
            charges.append(group_charge(mine[index] if index < len(mine) else None, expected))
        remarks += [
            f"node group {g.name} ({g.target_node_count} node(s)) is no longer asked for: credited nothing"
            for g in mine[len(theirs) :]
        ]
    return charges, remarks


def _identity_problems(
    cloud: CloudPort, tenant_id: str, target: Target, claim: ClaimedCluster
) -> tuple[list[str], list[NodeGroup]]:
    if claim.refused:
        return [claim.refused], []
    if not claim.project_id or not claim.cluster_id:
        return ["the stack records no project or cluster id"], []
    if target.project_id and claim.project_id != target.project_id:
        return [f"the stack's project {claim.project_id} is not the spec's {target.project_id}"], []
    try:
        project = cloud.get_project(claim.project_id)
        cluster = cloud.get_cluster(claim.cluster_id)
        groups = cloud.list_node_groups(claim.cluster_id)
    except NotFound as err:
        return [f"the recorded project or cluster no longer exists: {err}"], []
    except CloudError as err:
        return [f"the live inventory cannot be read: {err}"], []
    found: list[str] = []
    if project.tenant_id != tenant_id or project.state != "ACTIVE" or project.region != target.region:
        found.append(
            f"project {project.id}: tenant {project.tenant_id}, state {project.state}, region "
            f"{project.region} ({tenant_id}, ACTIVE, {target.region} expected)"
        )
    if cluster.project_id != claim.project_id:
        found.append(f"cluster {cluster.id} is in project {cluster.project_id}, not {claim.project_id}")
    if cluster.state != "RUNNING":
        found.append(f"cluster {cluster.id}: state {cluster.state}")
    return found, groups


@dataclass
class ProjectObjects:
    """What the proofs of one preflight share: each project's GPU clusters and filesystems, listed once,
    and those already credited to a cluster (or named by the spec as existing), which no other may take."""

    credited: set[str] = field(default_factory=set)
    gpu_clusters: dict[str, list[GpuCluster]] = field(default_factory=dict)
    filesystems: dict[str, list[Filesystem]] = field(default_factory=dict)

    def live_gpu_clusters(self, cloud: CloudPort, project_id: str) -> list[GpuCluster]:
        if project_id not in self.gpu_clusters:
            listed = cloud.list_gpu_clusters(project_id)
            self.gpu_clusters[project_id] = [g for g in listed if g.state not in _GONE_STATES]
        return self.gpu_clusters[project_id]

    def live_filesystems(self, cloud: CloudPort, project_id: str) -> list[Filesystem]:
        if project_id not in self.filesystems:
            listed = cloud.list_filesystems(project_id)
            self.filesystems[project_id] = [f for f in listed if f.state not in _GONE_STATES]
        return self.filesystems[project_id]


def prove_capacity(
    cloud: CloudPort,
    tenant_id: str,
    target: Target,
    claim: ClaimedCluster,
    shared: ProjectObjects | None = None,
) -> CapacityProof:
    """What the live cloud proves `claim` holds of `target` (module docstring). `shared`: the listings
    and credits of the other proofs of this preflight; what is credited here is added to it."""
    shared = shared if shared is not None else ProjectObjects()
    credited = shared.credited
    problems, groups = _identity_problems(cloud, tenant_id, target, claim)
    if problems:
        return CapacityProof(problems=tuple(problems))
    charges, remarks = node_group_charges(groups, expected_groups(target))
    cluster = target.cluster
    held: list[str] = []
    extras: list[str] = []
    gpu_cluster_held = False
    filesystem_gib: int | None = None
    try:
        if cluster.enable_gpu_cluster:
            live = shared.live_gpu_clusters(cloud, claim.project_id)
            fabric = cluster.infiniband_fabric
            mine = [g.id for g in live if g.id in claim.gpu_cluster_ids]
            if not mine and not claim.gpu_cluster_ids and not claim.records_objects:
                mine = [g.id for g in live if g.id not in credited and (not fabric or g.fabric == fabric)]
            if mine:
                gpu_cluster_held = True
                held.append(mine[0])
            else:
                extras.append("no live GPU cluster of its own: a GPU cluster charged")
        if cluster.enable_filestore and not cluster.existing_filestore:
            listed = shared.live_filesystems(cloud, claim.project_id)
            own = [f for f in listed if f.id in claim.filesystem_ids]
            if not own and not claim.filesystem_ids and not claim.records_objects:
                own = [f for f in listed if f.id not in credited]
            if own:
                filesystem_gib = own[0].size_bytes // GIB
                held.append(own[0].id)
                wanted = cluster.filestore_disk_size_gibibytes
                if wanted > filesystem_gib:
                    grows = f"{filesystem_gib} → {wanted} GiB, {wanted - filesystem_gib} GiB charged"
                    extras.append(f"shared filesystem: {grows}")
            else:
                extras.append("no live shared filesystem of its own: a filesystem charged")
    except CloudError as err:
        return CapacityProof(problems=(f"the live inventory cannot be read: {err}",))
    credited.update(held)
    return CapacityProof(
        groups=tuple(charges),
        gpu_cluster_held=gpu_cluster_held,
        filesystem_held_gib=filesystem_gib,
        held_ids=tuple(held),
        charged_extras=tuple(extras),
        remarks=tuple(remarks),
    )
