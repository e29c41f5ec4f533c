"""Quota and capacity-block preflight: prove the tenant can take the selected fleet before any mutation."""

from npa_pulumi.preflight.allowances import AllowanceEvidence, AllowanceLookup, evaluate_allowances
from npa_pulumi.preflight.capacity import NO_FALLBACK, CapacityCheck, check_capacity_blocks, free_gpus
from npa_pulumi.preflight.demand import (
    GIB,
    BucketDemandInput,
    CapacityDemand,
    CapacityDemandConflict,
    ClusterDemandInput,
    ProjectDemandInput,
    Requirement,
    capacity_demand,
    compute_requirements,
)
from npa_pulumi.preflight.report import (
    CapacityBlockLine,
    PreflightFailed,
    PreflightReport,
    RequirementLine,
    print_report,
    render_text,
)
from npa_pulumi.preflight.runner import evaluate_preflight, run_preflight

__all__ = [
    "GIB",
    "NO_FALLBACK",
    "AllowanceEvidence",
    "AllowanceLookup",
    "BucketDemandInput",
    "CapacityBlockLine",
    "CapacityCheck",
    "CapacityDemand",
    "CapacityDemandConflict",
    "ClusterDemandInput",
    "PreflightFailed",
    "PreflightReport",
    "ProjectDemandInput",
    "Requirement",
    "RequirementLine",
    "capacity_demand",
    "check_capacity_blocks",
    "compute_requirements",
    "evaluate_allowances",
    "evaluate_preflight",
    "free_gpus",
    "print_report",
    "render_text",
    "run_preflight",
]
