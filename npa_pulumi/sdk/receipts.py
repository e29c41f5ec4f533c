"""Teardowns that do not start from a selection: continuing a receipt (`destroy --receipt ID`) and the
npa home's local cleanup (`cleanup` without a spec)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import fields
from typing import cast

from npa_pulumi.engine.teardown.local_cleanup import LocalCleanupReport
from npa_pulumi.engine.teardown.model import TeardownOptions
from npa_pulumi.engine.teardown.resume import Receipt
from npa_pulumi.output.results import FleetResult
from npa_pulumi.sdk.operations import Approval, Approve, Selected, open_fleet, select
from npa_pulumi.sdk.requests import DestroyRequest, LocalCleanupRequest, ReceiptDestroyRequest, Selection

log = logging.getLogger(__name__)


def destroy_from_receipt(
    request: ReceiptDestroyRequest, approve: Approve | None = None, say: Callable[[str], None] | None = None
) -> FleetResult:
    """`npa-pulumi destroy --receipt ID`: identity from what the request gives, then the receipt, then the
    spec; any clash stops before a change. With `spec_path` the receipt's stacks and phases run again,
    without it only its guarded phases. `say` reports the guarded phases' progress (default: logging)."""
    from npa_pulumi.engine.automation.workspace import resolve_backend_url
    from npa_pulumi.engine.teardown.resume import ReceiptMismatch, check_identity, find_receipt

    receipt = find_receipt(request.receipt)
    selection = request.selection
    if selection.shard or selection.clusters:
        raise ReceiptMismatch(
            "--receipt continues exactly the receipt's selection: drop --shard/--only-clusters"
        )
    if selection.projects and sorted(selection.projects) != sorted(receipt.projects):
        raise ReceiptMismatch(
            f"--only-projects {','.join(selection.projects)} given, receipt {receipt.id} covers "
            f"{','.join(receipt.projects)}. Nothing was changed."
        )
    check_identity(
        receipt,
        {
            "cloud": request.cloud,
            "backend": resolve_backend_url(request.backend) if request.backend else None,
            "profile": request.profile,
        },
    )
    recorded = receipt.options()
    teardown = TeardownOptions(
        **{
            f.name: getattr(recorded, f.name) or getattr(request.teardown, f.name)
            for f in fields(TeardownOptions)
        }
    )
    cloud = receipt.text("cloud") or request.cloud or "local"
    profile = request.profile or receipt.text("profile")
    if request.spec_path:
        return _with_spec(request, receipt, teardown, cloud, profile, approve)
    return _guarded(request, receipt, teardown, cloud, profile, approve, say or log.info)


def _with_spec(
    request: ReceiptDestroyRequest,
    receipt: Receipt,
    teardown: TeardownOptions,
    cloud: str,
    profile: str | None,
    approve: Approve | None,
) -> FleetResult:
    from npa_pulumi.engine.teardown.resume import ReceiptMismatch, check_identity

    assert request.spec_path is not None
    selected = select(
        request.spec_path, Selection(projects=tuple(receipt.projects), prefix=request.selection.prefix)
    )
    spec = selected.spec
    check_identity(receipt, {"fleet": spec.name, "tenant_id": spec.tenant_id or None})
    clusters = set(receipt.clusters)
    missing = clusters - {t.cluster_stack for t in selected.targets}
    if missing:
        raise ReceiptMismatch(
            f"receipt {receipt.id} destroys {', '.join(sorted(missing))}, which this spec no longer has. "
            "Nothing was changed."
        )
    targets = [t for t in selected.targets if t.cluster_stack in clusters]
    fleet_request = DestroyRequest(
        cloud=cloud,
        profile=profile,
        backend=request.backend or receipt.text("backend"),
        passphrase_file=request.passphrase_file or receipt.text("passphrase_file"),
        recipe_dir=request.recipe_dir,
        recipe_ref=request.recipe_ref,
        soperator_recipe_dir=request.soperator_recipe_dir,
        soperator_recipe_ref=request.soperator_recipe_ref,
        concurrency=request.concurrency,
        show_progress=request.show_progress,
    )
    fleet = open_fleet(Selected(spec, targets, selected.selection, selected.spec_path), fleet_request)
    with fleet.progress:
        plan = fleet.teardown_plan(teardown)  # read-only
    if request.dry_run:
        return plan
    if approve is not None:
        approve(Approval("destroy", spec.name, spec, targets, plan.phases, receipt.id))
    with fleet.progress:
        return fleet.destroy(teardown, resumed=receipt)


def _guarded(
    request: ReceiptDestroyRequest,
    receipt: Receipt,
    teardown: TeardownOptions,
    cloud_kind: str,
    profile: str | None,
    approve: Approve | None,
    say: Callable[[str], None],
) -> FleetResult:
    """No spec: the receipt's guarded phases only, with the cloud and the teardown records."""
    from npa_pulumi.cloud.factory import CloudKind, make_cloud
    from npa_pulumi.engine.teardown.resume import Resume, run_resume

    tenant = receipt.text("tenant_id")
    pinned = {"tenant_id": tenant} if cloud_kind == "nebius" and tenant else {}
    # the receipt's cloud, which the adapter factory checks
    cloud = make_cloud(
        cast(CloudKind, cloud_kind), profile=profile or None, region=receipt.text("region"), **pinned
    )
    resume = Resume(receipt, teardown, cloud, say)
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
    from npa_pulumi.engine.automation.workspace import resolve_backend_url
    from npa_pulumi.engine.teardown import local_cleanup as home

    report = home.survey(resolve_backend_url(request.backend), full=request.full)
    prune = request.prune_after_days is not None
    if request.remove and (prune or any(i.removable for i in report.items)):
        home.remove_residue(report)
        if request.prune_after_days is not None:
            home.prune_receipts(report, float(request.prune_after_days))
    return report


__all__ = ["LocalCleanupReport", "destroy_from_receipt", "local_cleanup"]
