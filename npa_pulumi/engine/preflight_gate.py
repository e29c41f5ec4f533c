"""The preflight step of `up`: budget the selection against quota and reserved capacity before anything
is touched. A cluster stack deployed from the same plan adds no demand only when preflight proves it against
the live cloud (npa_pulumi/preflight/live_proof.py); `claimed_clusters` gives preflight what each claims."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine import liveness

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.engine.plans import FleetPlans
    from npa_pulumi.preflight.live_proof import ClaimedCluster


def claimed_clusters(fleet: FleetContext) -> dict[str, ClaimedCluster]:
    """The project and cluster each cluster stack deployed from the current plan records; none under
    `--refresh` (everything is charged in full)."""
    from npa_pulumi.preflight.live_proof import ClaimedCluster

    if fleet.options.refresh:
        return {}
    return {
        stack: ClaimedCluster(str(outputs.get("project_id") or ""), str(outputs.get("cluster_id") or ""))
        for stack, outputs in liveness.same_plan_clusters(fleet).items()
    }


def preflight_gate(fleet: FleetContext) -> Callable[[FleetPlans], dict[str, Any] | None]:
    def gate(_plans: FleetPlans) -> dict[str, Any] | None:
        from npa_pulumi.preflight import render_text
        from npa_pulumi.preflight.targets import preflight_targets

        fleet.progress.message("preflight: checking quota and reserved capacity for the selection ...")
        report = preflight_targets(fleet.cloud, fleet.tenant_id(), fleet.targets, claimed_clusters(fleet))
        if not report.ok:
            fleet.progress.message(render_text(report))
        else:
            fleet.progress.message(f"preflight: ok ({len(report.requirements)} requirement(s) fit)")
        return report.to_json()

    return gate
