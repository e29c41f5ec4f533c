"""The preflight step of `up`: budget the selection against quota and reserved capacity before anything
is touched. Clusters that `up` would skip (deployed from the same plan, live and running) add no demand."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from npa_pulumi.engine import liveness

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext
    from npa_pulumi.engine.plans import FleetPlans


def preflight_gate(fleet: FleetContext) -> Callable[[FleetPlans], dict[str, Any] | None]:
    def gate(_plans: FleetPlans) -> dict[str, Any] | None:
        from npa_pulumi.preflight import render_text
        from npa_pulumi.preflight.targets import preflight_targets

        fleet.progress.message("preflight: checking quota and reserved capacity for the selection ...")
        unchanged = set() if fleet.options.refresh else liveness.unchanged_clusters(fleet)
        report = preflight_targets(fleet.cloud, fleet.tenant_id(), fleet.targets, unchanged)
        if not report.ok:
            fleet.progress.message(render_text(report))
        else:
            fleet.progress.message(f"preflight: ok ({len(report.requirements)} requirement(s) fit)")
        return report.to_json()

    return gate
