"""`destroy` (and its dry run) and `cleanup`: the ordered, receipted teardown of engine/teardown/run.py.

The phases a user confirms are the ones that run: `plan` returns the planned `Teardown` with its phases,
and `destroy` runs that same object (planning again only when none was planned with the same options).
Destroy plans name what it deletes only (`FleetContext.deleting`): no SSH key or compatible recipe is
needed to delete a fleet.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from npa_pulumi.engine.context import FleetContext
from npa_pulumi.engine.costs import teardown_cost
from npa_pulumi.engine.plans import require_recipe_terraform
from npa_pulumi.engine.retries import attach_resume
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.engine.teardown.receipts import fleet_receipt, new_receipt_path, resume_retry, write_receipt
from npa_pulumi.engine.teardown.resume import Receipt, carry_completed
from npa_pulumi.engine.teardown.run import Teardown
from npa_pulumi.output.results import FleetResult


def plan(context: FleetContext, options: TeardownOptions) -> tuple[FleetResult, Teardown]:
    """`destroy --dry-run`, and what a destroy asks the user to confirm: every phase with what it would
    delete or retain and why. Reads stack outputs and the live cloud; changes nothing."""
    context.deleting = True
    result = context.result("destroy")
    result.dry_run = True
    plans = context.plans()
    result.warnings = list(plans.warnings)
    teardown = Teardown(context, options)
    result.phases = teardown.plan()
    teardown_cost(context, result)  # what it would save (engine/costs.py)
    return result, teardown


def destroy(
    context: FleetContext,
    options: TeardownOptions,
    resumed: Receipt | None = None,
    planned: Teardown | None = None,
) -> FleetResult:
    """Ordered teardown: cluster stacks, then (once none of its clusters remain) each project stack with
    an owned network, then the opt-in bucket, storage identity and project phases; a receipt records
    every phase. `resumed`: the receipt this run continues (`destroy --receipt`), whose completed phases
    stay completed. `planned`: the teardown the user confirmed (its phases run as planned)."""
    context.deleting = True
    started = time.time()
    result = context.result("destroy")
    plans = context.plans()
    require_recipe_terraform(plans)
    result.warnings = list(plans.warnings)
    result.stacks.extend(plans.unsupported)
    run = planned if planned is not None and planned.options == options else Teardown(context, options)
    result.phases = run.planned_phases if run.planned_phases is not None else run.plan()
    path = new_receipt_path(context.spec.name)
    result.receipt, result.receipt_id = str(path), path.stem
    result.resumes = resumed.id if resumed else None

    spec_path = str(Path(context.spec_path).resolve()) if context.spec_path else None

    lock = threading.Lock()  # cluster phases checkpoint side by side (engine/teardown/drain.py)

    def record(outcome: str) -> None:
        resume = resume_retry(path.stem, result.phases, spec_path)
        again = context.retry_text(resume) if outcome == "partial-cleanup" else None
        with lock:
            document = fleet_receipt(
                context, "destroy", options, result.phases, started, outcome, path, result.resumes, again
            )
            write_receipt(context.spec.name, document, path)

    record("running")  # before anything is deleted: a killed run still leaves its record
    # A drain's snapshot of a PodDisruptionBudget it is about to remove is in the receipt first.
    run.checkpoint = lambda: record("running")
    try:
        run.run(result, result.phases)
    finally:
        if resumed is not None:
            result.phases = carry_completed(resumed, result.phases)
        if result.partial_cleanup:
            attach_resume(result, resume_retry(path.stem, result.phases, spec_path), context.render_retry)
        record(result.outcome)
    for item in result.stacks:
        if item.kind == "project" and item.status == "destroyed":
            item.outputs["retained"] = "; ".join(
                f"{p.phase}: {p.reason}"
                for p in result.phases
                if p.stack == item.stack and p.status == "retained"
            )
    teardown_cost(context, result)  # what it saves (engine/costs.py)
    return result


def cleanup(context: FleetContext, options: TeardownOptions, dry_run: bool) -> FleetResult:
    """What the fleet created that no stack references any more (read-only with `dry_run`), deleted
    through the teardown's guarded phases otherwise (engine/teardown/cleanup.py)."""
    from npa_pulumi.engine.teardown.cleanup import run_cleanup

    context.deleting = True
    result = context.result("cleanup")
    run_cleanup(context, options, dry_run, result)
    return result
