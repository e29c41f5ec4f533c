"""Run preflight against a cloud port: read the tenant's evidence once, then judge the whole fleet at once.

Preflight never raises for what it finds: a failed or empty read, a conflicting capacity binding, a
shortfall: all become a report that is not ok, so the caller can show every problem together (and `up`
raises `PreflightFailed` with it). It is read-only and runs before any project, bucket, subnet or cluster
is touched.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import Literal

from npa_pulumi.cloud.errors import CloudError
from npa_pulumi.cloud.port import CapacityBlockGroup, CloudPort, QuotaAllowance
from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.preflight.allowances import AllowanceLookup, evaluate_allowances
from npa_pulumi.preflight.capacity import (
    NO_FALLBACK,
    CapacityCheck,
    capacity_failure_message,
    check_capacity_blocks,
)
from npa_pulumi.preflight.demand import (
    BucketDemandInput,
    CapacityDemand,
    CapacityDemandConflict,
    ClusterDemandInput,
    ProjectDemandInput,
    Requirement,
    SoperatorDemandInput,
    capacity_demand,
    compute_requirements,
)
from npa_pulumi.preflight.report import CapacityBlockLine, PreflightReport, RequirementLine

log = logging.getLogger(__name__)


def _describe_exception(err: Exception) -> str:
    # CloudError renders as "<kind>: <message> (request: ...)"; anything else as "<Type>: <message>".
    return str(err) if isinstance(err, CloudError) else f"{type(err).__name__}: {err}"


def _requirement_line(req: Requirement, lookup: AllowanceLookup | None, no_evidence: str) -> RequirementLine:
    def failed(status: Literal["error", "missing"], detail: str) -> RequirementLine:
        # Fail closed: nothing is proven available, so the whole amount is short.
        return RequirementLine(
            name=req.name,
            region=req.region,
            required=req.amount,
            available=0,
            limit=None,
            shortfall=req.amount,
            unit=req.unit,
            status=status,
            detail=detail,
        )

    if lookup is None:
        return failed("error", no_evidence)
    key = req.key
    if key in lookup.errors:
        return failed("error", lookup.errors[key].reason)
    if key in lookup.missing:
        return failed("missing", "required allowance omitted from the tenant catalog")
    if key in lookup.unadvertised:
        return RequirementLine(
            name=req.name,
            region=req.region,
            required=req.amount,
            available=None,
            limit=None,
            shortfall=0,
            unit=req.unit,
            status="unadvertised",
        )
    evidence = lookup.found[key]
    shortfall = evidence.shortfall(req.amount)
    return RequirementLine(
        name=req.name,
        region=req.region,
        required=req.amount,
        available=evidence.available,
        limit=evidence.limit,
        shortfall=shortfall,
        unit=evidence.unit or req.unit,
        status="unlimited" if evidence.unlimited else ("shortfall" if shortfall else "ok"),
        evidence=evidence.source,
        scope=evidence.scope,
    )


def _capacity_line(check: CapacityCheck) -> CapacityBlockLine:
    d = check.demand
    return CapacityBlockLine(
        id=mask_id(d.block_id),
        region=d.region,
        platform=d.platform,
        fabric=d.fabric,
        required_gpus=d.required_gpus,
        free_gpus=check.free_gpus,
        limit=None if check.block is None else check.block.limit,
        status="ok" if check.ok else "rejected",
        reason=check.reason,
    )


def evaluate_preflight(
    tenant_id: str,
    requirements: Sequence[Requirement],
    demands: Sequence[CapacityDemand],
    allowances: Iterable[QuotaAllowance] | None,
    blocks: Iterable[CapacityBlockGroup] | None,
    errors: Iterable[str] = (),
) -> PreflightReport:
    """Judge requirements and capacity demands against evidence already read (None = no usable read).

    Pure: the runner does the reads; tests and benchmarks can call this directly.
    """
    all_errors = list(errors)
    notes: list[str] = []

    lookup = (
        None
        if allowances is None
        else evaluate_allowances(allowances, tenant_id, (r.key for r in requirements))
    )
    lines = [_requirement_line(r, lookup, "no readable tenant quota evidence") for r in requirements]
    for ln in lines:
        if ln.status == "unadvertised":
            notes.append(
                f"quota {ln.name} [{ln.region}]: unadvertised optional quota in the completed tenant "
                "catalog; "
                "treated as not quota-controlled in this region"
            )
    missing = sorted({ln.name for ln in lines if ln.status == "missing"})
    if missing:
        all_errors.append(f"tenant quota catalog omitted required allowances: {', '.join(missing)}")
    all_errors.extend(
        f"quota {ln.name} [{ln.region}]: {ln.detail}"
        for ln in lines
        if ln.status == "error" and lookup is not None
    )

    if blocks is None:
        checks = [CapacityCheck(d, None, None, "capacity block groups could not be read") for d in demands]
    else:
        checks = check_capacity_blocks(demands, blocks, tenant_id)
    if any(not c.ok for c in checks):
        all_errors.append(capacity_failure_message(checks))
    elif checks:
        # Only now are the reserved GPUs known to be covered, so leaving them out of on-demand GPU quota
        # (as the demand computation does) is justified.
        reserved = sum(c.demand.required_gpus for c in checks)
        notes.append(
            f"validated {reserved} GPU(s) against {len(checks)} active capacity block group(s); "
            "ordinary GPU quota excluded"
        )

    return PreflightReport.build(lines, [_capacity_line(c) for c in checks], all_errors, notes)


def run_preflight(
    cloud: CloudPort,
    tenant_id: str,
    clusters: Sequence[ClusterDemandInput] = (),
    projects: Sequence[ProjectDemandInput] = (),
    buckets: Sequence[BucketDemandInput] = (),
    soperators: Sequence[SoperatorDemandInput] = (),
) -> PreflightReport:
    """Budget the selected targets against the tenant's quotas and capacity blocks. Never raises for what
    it finds or fails to read: the report says it (fail closed).

    Each listing is read at most once, and only when there is something to check against it.
    """
    errors: list[str] = []
    requirements = compute_requirements(clusters, projects, buckets, soperators)
    demands: list[CapacityDemand] = []
    try:
        demands = capacity_demand(clusters)
    except CapacityDemandConflict as err:
        errors.append(f"{err}\n{NO_FALLBACK}")

    if not tenant_id.strip():
        if requirements or demands:
            errors.append("no tenant id: tenant quota and capacity evidence cannot be read")
        return evaluate_preflight(tenant_id, requirements, demands, None, None, errors)

    blocks: list[CapacityBlockGroup] | None = None
    if demands:
        try:
            blocks = list(cloud.list_capacity_block_groups(tenant_id))
        except Exception as err:  # fail closed on anything the adapter throws, never a traceback
            log.debug("capacity block read failed", exc_info=True)
            errors.append(
                "could not read capacity block groups; refusing to bypass STRICT reservation preflight: "
                + _describe_exception(err)
            )
        else:
            if not blocks:
                errors.append(
                    "capacity block group read returned nothing; refusing to bypass STRICT reservations"
                )
                blocks = None

    allowances: list[QuotaAllowance] | None = None
    if requirements:
        try:
            allowances = list(cloud.list_quota_allowances(tenant_id))
        except Exception as err:  # fail closed, as above
            log.debug("quota allowance read failed", exc_info=True)
            errors.append(
                "could not read tenant quota allowances; refusing to create projects or resources without "
                "capacity evidence: " + _describe_exception(err)
            )
        else:
            if not allowances:
                errors.append(
                    "tenant quota allowance read returned nothing; refusing to proceed without evidence"
                )
                allowances = None

    return evaluate_preflight(tenant_id, requirements, demands, allowances, blocks, errors)
