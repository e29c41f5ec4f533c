"""What a soperator target needs from the tenant: every node group the soperator recipe creates (system,
controller, login, accounting, each chunk of each worker node set), their boot disks, the shared
filesystems (controller spool, jail, accounting), one InfiniBand GPU cluster per GPU worker set, and the
VPC allocations (two per node, as for mk8s, plus the login node group's static IP)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npa_pulumi.preflight.demand import NodeGroupDemand, SoperatorDemandInput

if TYPE_CHECKING:
    from npa_pulumi.plan import Target


def soperator_demand(target: Target, unchanged: bool = False) -> SoperatorDemandInput:
    from npa_pulumi.plan.soperator import filestores, node_groups

    payload = target.cluster.soperator
    assert payload is not None, f"{target.cluster_stack}: a soperator target without its payload"
    reserved = {w.name for w in payload.workers if w.capacity_block_group}
    groups = [
        NodeGroupDemand(
            role=g.role,
            nodes=g.nodes,
            platform=g.platform,
            preset=g.preset,
            disk_gib=g.boot_disk_gib,
            preemptible=next((w.preemptible for w in payload.workers if w.name == g.nodeset), False),
            reserved=g.nodeset in reserved,
        )
        for g in node_groups(target.cluster_name, payload)
    ]
    return SoperatorDemandInput(
        target=f"{target.project_key}/{target.cluster_name}",
        region=target.region,
        node_groups=tuple(groups),
        filesystems_gib=tuple(filestores(payload).values()),
        gpu_clusters=sum(1 for w in payload.workers if w.is_gpu() and w.fabric),
        unchanged_live_verified=unchanged,
    )
