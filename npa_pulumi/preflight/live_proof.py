"""Live proof that a deployed cluster already holds what its target asks for: only then does a repeat
deploy count it as zero incremental quota and reserved capacity.

A cluster stack deployed from exactly the current plan only *claims* its project and cluster
(`ClaimedCluster`, from its outputs). The claim counts as zero new demand only when a complete live
inventory proves, for the target as resolved from the spec:

* the exact project (the spec's `project_id` when it names one), ACTIVE, in the tenant and the region;
* the exact cluster, RUNNING, in that project;
* the exact node groups: one CPU group and `gpu_node_groups` GPU groups (split reserved pools are matched
  as separate groups), no more and no fewer, each with the requested template (platform, preset, boot disk,
  preemptibility), a target and running worker count equal to the requested count, non-preemptible when
  reserved, and the exact `STRICT` binding to the spec's capacity block (an unreserved pool: no binding).
  The API's preemption marker (`{}` means preemptible, its absence not) is decoded at the port's boundary
  (`cloud/nebius/convert.py`), so `NodeGroup.preemptible` is the decoded value.

A node group that reports `PROVISIONING` again (its workers lost readiness) counts as zero only with that
same proof and all its workers counted; one waiting on quota (a `QuotaFailure` condition) never does.
Stale, partial or mismatched evidence, or an inventory that cannot be read, falls back to the full,
conservative demand; never the reverse. Reservation ids are masked in every message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.cloud.redaction import mask_id

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import CloudPort, NodeGroup
    from npa_pulumi.plan import Target
    from npa_pulumi.plan.targets import ResolvedPool

STRICT = "STRICT"
_COUNTED_STATES = ("RUNNING", "PROVISIONING")


@dataclass(frozen=True)
class ClaimedCluster:
    """What a cluster stack deployed from the current plan says it is (its outputs)."""

    project_id: str
    cluster_id: str


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


def _binding(policy: str, ids: tuple[str, ...]) -> str:
    if not policy and not ids:
        return "no reservation"
    return f"{policy or '(no policy)'} [{', '.join(mask_id(i) for i in ids)}]"


def group_mismatches(live: NodeGroup, wanted: ExpectedGroup) -> list[str]:
    """How `live` differs from `wanted` (empty: proven)."""
    name = f"node group {live.name}"
    found: list[str] = []
    if wanted.platform and live.platform != wanted.platform:
        found.append(f"{name}: platform {live.platform}, {wanted.platform} requested")
    if wanted.preset and live.preset != wanted.preset:
        found.append(f"{name}: preset {live.preset}, {wanted.preset} requested")
    if wanted.disk_gib and live.disk_size_gib != wanted.disk_gib:
        found.append(f"{name}: boot disk {live.disk_size_gib} GiB, {wanted.disk_gib} GiB requested")
    if live.preemptible != wanted.preemptible:
        found.append(f"{name}: {'' if live.preemptible else 'not '}preemptible, the spec says otherwise")
    if wanted.reservation_policy and live.preemptible:
        found.append(f"{name}: a reserved pool must not be preemptible")
    live_ids, wanted_ids = tuple(live.reservation_ids), wanted.reservation_ids
    if live.reservation_policy.upper() != wanted.reservation_policy or sorted(live_ids) != sorted(wanted_ids):
        found.append(
            f"{name}: bound to {_binding(live.reservation_policy, live_ids)}, "
            f"{_binding(wanted.reservation_policy, wanted_ids)} requested"
        )
    if live.target_node_count != wanted.count:
        found.append(f"{name}: target {live.target_node_count} worker(s), {wanted.count} requested")
    if live.ready_node_count != live.target_node_count:
        found.append(f"{name}: {live.ready_node_count} of {live.target_node_count} worker(s) running")
    if live.state not in _COUNTED_STATES:
        found.append(f"{name}: state {live.state}")
    starved = [c for c in live.conditions if c.kind == "QuotaFailure"]
    if starved and live.state != "RUNNING":
        found.append(f"{name}: waiting on quota ({starved[0].quota or 'QuotaFailure'})")
    return found


def _groups_mismatches(live: list[NodeGroup], wanted: list[ExpectedGroup]) -> list[str]:
    found: list[str] = []
    for kind in ("cpu", "gpu"):
        mine = sorted((g for g in live if _kind(g) == kind), key=lambda g: g.name)
        theirs = [w for w in wanted if w.kind == kind]
        if len(mine) != len(theirs):
            found.append(f"{len(mine)} live {kind.upper()} node group(s), {len(theirs)} requested")
            continue
        for group, expected in zip(mine, theirs, strict=True):
            found += group_mismatches(group, expected)
    return found


def live_proof_problems(cloud: CloudPort, tenant_id: str, target: Target, claim: ClaimedCluster) -> list[str]:
    """Why `claim` does not prove `target` deployed as requested (empty: it does)."""
    if not claim.project_id or not claim.cluster_id:
        return ["the stack records no project or cluster id"]
    if target.project_id and claim.project_id != target.project_id:
        return [f"the stack's project {claim.project_id} is not the spec's {target.project_id}"]
    try:
        project = cloud.get_project(claim.project_id)
        cluster = cloud.get_cluster(claim.cluster_id)
        groups = cloud.list_node_groups(claim.cluster_id)
    except NotFound as err:
        return [f"the recorded project or cluster no longer exists: {err}"]
    except CloudError as err:
        return [f"the live inventory cannot be read: {err}"]
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
    return found + _groups_mismatches(groups, expected_groups(target))
