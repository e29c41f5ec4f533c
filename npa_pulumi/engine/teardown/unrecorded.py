"""A destroy's cluster with no stack (engine/teardown/run.py): absent only when the cloud has none of that
name in the project either; a present one fails closed, named, unless the exact `--project-id/--cluster-id`
prove it, and then it is deleted by id (the teardown guide's exact-id path)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.output.results import PhaseOutcome, TeardownPhase

if TYPE_CHECKING:
    from npa_pulumi.cloud.port import Cluster
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.engine.programs import ClusterPlan
    from npa_pulumi.engine.requests import ClusterProof


def _spec_project_id(fleet: FleetContext, cluster: ClusterPlan) -> str:
    """The project the spec names for the cluster: its `project_id`, else the one project of its display
    name ("" when there is none, or several)."""
    project = next(p for p in fleet.plans().projects if p.stack == cluster.project_stack)
    if project.project_id:
        return project.project_id
    named = [p.id for p in fleet.cloud.list_projects(fleet.tenant_id()) if p.name == project.display_name]
    return named[0] if len(named) == 1 else ""


def unrecorded_cluster(fleet: FleetContext, cluster: ClusterPlan) -> Cluster | None:
    """The cloud's cluster that this plan's stack would hold (same name, in the project the spec names by
    id, or the one project of the spec's display name), when no stack records it. Reads only."""
    project_id = _spec_project_id(fleet, cluster)
    if not project_id:
        return None  # not created yet (or ambiguous, which preflight and up refuse): nothing to find
    names = {cluster.cluster_name, str(cluster.tfvars.get("cluster_name") or "")} - {""}
    return next((c for c in fleet.cloud.list_clusters(project_id) if c.name in names), None)


def plan_without_stack(fleet: FleetContext, cluster: ClusterPlan, phase: TeardownPhase) -> None:
    """No cluster stack: `absent` only when the cloud has no cluster of that name in the project either.
    A present cluster without recoverable state fails closed, named (exit 2): it is never reported gone,
    and never deleted by a name match; with the exact `--project-id/--cluster-id` it is deleted by id."""
    proof = getattr(fleet.request, "cluster_proof", None)
    if proof is not None:
        _proved(fleet, cluster, phase, proof)
        return
    try:
        present = unrecorded_cluster(fleet, cluster)
    except CloudError as err:
        phase.status = PhaseOutcome.REFUSED
        phase.reason = f"no cluster stack, and the project's clusters cannot be read to prove absence: {err}"
        return
    if present is None:
        phase.status, phase.reason = PhaseOutcome.ABSENT, "no cluster stack: nothing to delete"
        return
    phase.status = PhaseOutcome.REFUSED
    phase.retains = {"cluster_id": present.id, "project_id": present.project_id, "name": present.name}
    phase.reason = (
        f"cluster {present.name} ({present.id}) exists in project {present.project_id}, but no cluster "
        "stack records it: no recoverable state, so it is neither reported absent nor deleted by its "
        "name. Take it over with `npa-pulumi adopt` (an install of `npa fleet`), or delete it by its "
        f"exact ids: destroy --only-projects {cluster.project_key} "
        f"--only-clusters {cluster.cluster_name} --project-id {present.project_id} "
        f"--cluster-id {present.id}"
    )


def _proved(fleet: FleetContext, cluster: ClusterPlan, phase: TeardownPhase, proof: ClusterProof) -> None:
    """The exact ids against the cloud: gone is verified absence; present, in that project (the spec's),
    under this cluster's name, it is planned for deletion by id; anything else is refused, named."""
    asked = {"project_id": proof.project_id, "cluster_id": proof.cluster_id}
    try:
        live = fleet.cloud.get_cluster(proof.cluster_id)
    except NotFound:
        phase.status, phase.retains = PhaseOutcome.ABSENT, {}
        phase.reason = f"cluster {proof.cluster_id} does not exist (provider-verified absence)"
        return
    except CloudError as err:
        phase.status, phase.retains = PhaseOutcome.REFUSED, asked
        phase.reason = f"cluster {proof.cluster_id} cannot be read to prove its identity: {err}"
        return
    wanted_project = _spec_project_id(fleet, cluster) or proof.project_id
    names = {cluster.cluster_name, str(cluster.tfvars.get("cluster_name") or "")} - {""}
    wrong = [
        what
        for what, bad in (
            (
                f"it is in project {live.project_id}, not {proof.project_id}",
                live.project_id != proof.project_id,
            ),
            (f"the spec's project is {wanted_project}", wanted_project != proof.project_id),
            (f"it is named {live.name!r}, not {cluster.cluster_name!r}", live.name not in names),
        )
        if bad
    ]
    if wrong:
        phase.status, phase.retains = PhaseOutcome.REFUSED, asked
        phase.reason = f"cluster {proof.cluster_id} is not the selected cluster: " + "; ".join(wrong)
        return
    phase.deletes = {**asked, "name": live.name, "unrecorded": True, "proof": "--project-id/--cluster-id"}
    phase.reason = "no cluster stack records it: deleted by its exact id, proved against the cloud"
