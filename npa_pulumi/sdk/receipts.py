"""Teardowns that do not start from a selection: continuing a receipt (`destroy --receipt ID`) and the
npa home's local cleanup (`cleanup` without a spec)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import cast

from npa_pulumi.engine.teardown.local_cleanup import LocalCleanupReport
from npa_pulumi.engine.teardown.resume import ResolvedReceipt
from npa_pulumi.output.results import FleetResult
from npa_pulumi.sdk.operations import Approval, Approve, Selected, open_fleet
from npa_pulumi.sdk.requests import LocalCleanupRequest, ReceiptDestroyRequest, RenderRetry

log = logging.getLogger(__name__)


def destroy_from_receipt(
    request: ReceiptDestroyRequest,
    approve: Approve | None = None,
    say: Callable[[str], None] | None = None,
    render_retry: RenderRetry | None = None,
) -> FleetResult:
    """`npa-pulumi destroy --receipt ID`: identity from what the request gives, then the receipt, then the
    spec; any clash stops before a change (engine/teardown/resume.py `resolve_receipt`). With `spec_path`
    the receipt's stacks and phases run again, without it only its guarded phases. `say` reports the
    guarded phases' progress (default: logging); `render_retry` spells the retries it leaves, as for
    `destroy`."""
    from npa_pulumi.engine.teardown.resume import resolve_receipt

    resolved = resolve_receipt(request)
    if resolved.destroy is None:
        return _guarded(request, resolved, approve, say or log.info, render_retry)
    assert resolved.spec is not None
    selected = Selected(resolved.spec, list(resolved.targets), resolved.destroy.selection, resolved.spec_path)
    fleet = open_fleet(selected, resolved.destroy, render_retry)
    with fleet.progress:
        plan = fleet.teardown_plan()  # read-only
    if request.dry_run:
        return plan
    if approve is not None:
        approve(
            Approval(
                "destroy",
                selected.spec.name,
                selected.spec,
                selected.targets,
                plan.phases,
                resolved.receipt.id,
            )
        )
    with fleet.progress:
        return fleet.destroy(resumed=resolved.receipt)


def _guarded(
    request: ReceiptDestroyRequest,
    resolved: ResolvedReceipt,
    approve: Approve | None,
    say: Callable[[str], None],
    render_retry: RenderRetry | None,
) -> FleetResult:
    """No spec: the receipt's guarded phases only, with the cloud and the teardown records."""
    from npa_pulumi.cloud.factory import CloudKind, make_cloud
    from npa_pulumi.engine.teardown.resume import Resume, run_resume

    receipt, teardown, cloud_kind, profile = (
        resolved.receipt,
        resolved.teardown,
        resolved.cloud,
        resolved.profile,
    )
    tenant = receipt.text("tenant_id")
    pinned = {"tenant_id": tenant} if cloud_kind == "nebius" and tenant else {}
    if cloud_kind == "nebius" and request.auth:
        pinned["auth"] = request.auth
    # the receipt's cloud, which the adapter factory checks
    cloud = make_cloud(
        cast(CloudKind, cloud_kind), profile=profile or None, region=receipt.text("region"), **pinned
    )
    resume = Resume(receipt, teardown, cloud, say, render_retry)
    result = FleetResult(
        command="destroy", fleet=receipt.fleet, cloud=cloud_kind, backend=receipt.text("backend") or ""
    )
    plan = resume.plan()  # read-only
    if not request.dry_run and approve is not None:
        approve(Approval("destroy", receipt.fleet, None, [], plan, receipt.id))
    run_resume(resume, result, plan, request.dry_run)
    return result


def local_cleanup(request: LocalCleanupRequest = LocalCleanupRequest()) -> LocalCleanupReport:
    """`npa-pulumi cleanup` without a spec: what the npa home holds (work dirs, kubeconfigs, logs, caches,
    receipts, stale run records) and what still costs money; with `remove`, the residue of stacks that no
    longer exist is deleted (and, with `prune_after_days`, old fully terminal receipts). `full` adds failed
    scratch cleanups and caches of earlier layouts, removed with `remove` too. No cloud calls."""
    from npa_pulumi.engine.automation import resolve_backend_url
    from npa_pulumi.engine.teardown import local_cleanup as home

    report = home.survey(resolve_backend_url(request.backend), full=request.full)
    prune = request.prune_after_days is not None
    if request.remove and (prune or any(i.removable for i in report.items)):
        home.remove_residue(report)
        if request.prune_after_days is not None:
            home.prune_receipts(report, float(request.prune_after_days))
    return report


__all__ = ["LocalCleanupReport", "destroy_from_receipt", "local_cleanup"]
