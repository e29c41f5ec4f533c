"""`preflight`, and the preflight step of `up` and `preview`: budget the selection against quota and
reserved capacity before anything is touched. A deployed cluster stack, from any plan and any npa-pulumi,
Pulumi or terraform, is charged only what its live cluster does not hold yet, as preflight proves it
against the live cloud (npa_pulumi/preflight/live_proof.py); `claimed_clusters` gives preflight what each
stack claims."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npa_pulumi.bridge.drift import LIVE_OBJECTS_OUTPUT, declared_objects
from npa_pulumi.engine import liveness
from npa_pulumi.engine.backends.registry import backend_for

if TYPE_CHECKING:
    from npa_pulumi.engine.backends.base import ClusterBackend
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.output.stack_outputs import ClusterOutputs, ProjectOutputs
    from npa_pulumi.plan import Target
    from npa_pulumi.preflight.live_proof import ClaimedCluster
    from npa_pulumi.preflight.report import DeployedClusterLine, PreflightReport

REFRESH_REFUSAL = "`--refresh` re-reads every stack first, so nothing it recorded is taken as held"


def claimed_clusters(fleet: FleetContext) -> dict[str, ClaimedCluster]:
    """What each selected cluster stack that records a cluster claims, by stack: its project and cluster,
    the filesystem and GPU cluster it recorded, and why it cannot claim anything (its identity no longer
    matches its project stack or the plan's subnet; `--refresh`: everything is charged in full)."""
    from npa_pulumi.preflight.live_proof import ClaimedCluster

    deployed = liveness.deployed_clusters(fleet)
    same_plan = _same_plan(fleet, deployed)
    by_stack = {t.cluster_stack: t for t in fleet.targets}
    claims: dict[str, ClaimedCluster] = {}
    for stack, (mine, project) in deployed.items():
        declared = declared_objects({LIVE_OBJECTS_OUTPUT: mine.live_objects})
        refused = REFRESH_REFUSAL if fleet.refreshing else ""
        claims[stack] = ClaimedCluster(
            project_id=mine.project_id or "",
            cluster_id=mine.cluster_id or "",
            refused=refused or liveness.identity_mismatch(by_stack[stack], mine, project),
            same_plan=stack in same_plan,
            records_objects=declared is not None,
            filesystem_ids=_filesystem_ids(mine.filesystem, declared),
            gpu_cluster_ids=tuple(_declared_ids(declared, "gpu_cluster")),
        )
    return claims


def _filesystem_ids(
    recorded: dict[str, Any] | None, declared: dict[str, dict[str, Any]] | None
) -> tuple[str, ...]:
    """The stack's `filesystem` output's id, then any filesystem its recipe declared."""
    found = [str(recorded.get("id") or "")] if recorded is not None else []
    found += _declared_ids(declared, "filesystem")
    return tuple(dict.fromkeys(i for i in found if i))


def _declared_ids(declared: dict[str, dict[str, Any]] | None, kind: str) -> list[str]:
    return [str(entry["id"]) for entry in (declared or {}).values() if entry.get("kind") == kind]


def _same_plan(
    fleet: FleetContext, deployed: dict[str, tuple[ClusterOutputs, ProjectOutputs | None]]
) -> set[str]:
    """The deployed stacks recorded from exactly the current plan, of the backends whose check needs it
    (ClusterBackend.claims_need_same_plan: node groups that are the recipe's, not matched against the
    spec), so only they are planned here."""
    wanted = {
        t.cluster_stack
        for t in fleet.targets
        if t.cluster_stack in deployed
        and (backend := backend_for(t.backend))
        and backend.claims_need_same_plan
    }
    if not wanted:
        return set()
    return {
        plan.stack
        for plan in fleet.plans().clusters
        if plan.stack in wanted and liveness.fingerprint_matches(fleet, plan, deployed[plan.stack][0])
    }


def fleet_preflight(fleet: FleetContext) -> PreflightReport:
    """Preflight's report for the selection: each target budgeted as its backend says, each deployed
    cluster charged what its live proof leaves."""
    from npa_pulumi.preflight.targets import preflight_targets

    def budget_of(target: Target) -> ClusterBackend | None:
        return backend_for(target.backend)

    return preflight_targets(
        fleet.cloud, fleet.tenant_id(), fleet.targets, budget_of, claimed_clusters(fleet)
    )


SHOWN_DEPLOYED = 20  # above this many deployed clusters, `up` names only those charged something


def _deployed_lines(deployed: list[DeployedClusterLine]) -> list[str]:
    """What `up` says of the deployed clusters on its way past an ok preflight (the report, in its result,
    has every one): each cluster's line, or with many clusters a count and those charged something."""
    if len(deployed) <= SHOWN_DEPLOYED:
        return [line.describe() for line in deployed]
    zero = sum(1 for line in deployed if line.charge == "zero")
    charged = [line.describe() for line in deployed if line.charge != "zero"]
    return [f"{len(deployed)} deployed cluster(s), {zero} charged zero (live proof)", *charged]


def run(fleet: FleetContext) -> PreflightReport:
    """`npa-pulumi preflight`: whether the tenant's quota and reserved capacity fit the selection
    (read-only); the recipe's terraform/tofu is checked first, as `up` does."""
    from npa_pulumi.engine.plans import require_recipe_terraform

    fleet.resolve_regions()  # an empty spec region comes from the profile's configuration
    require_recipe_terraform(fleet.plans())  # a binary the recipe refuses fails `up` at its first init
    return fleet_preflight(fleet)


def gate(fleet: FleetContext) -> dict[str, Any]:
    """The preflight step of `up` (which stops when it fails) and `preview` (which reports it): the
    report, with what it found said on the way."""
    from npa_pulumi.preflight import render_text
    from npa_pulumi.runtime import tracing

    with tracing.span("preflight", {}):
        fleet.progress.message("preflight: checking quota and reserved capacity for the selection ...")
        report = fleet_preflight(fleet)
        if not report.ok:
            fleet.progress.message(render_text(report))
        else:
            fleet.progress.message(f"preflight: ok ({len(report.requirements)} requirement(s) fit)")
            for line in _deployed_lines(report.deployed):
                fleet.progress.message(f"preflight: {line}")
        return report.to_json()
