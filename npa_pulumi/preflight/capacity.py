"""STRICT capacity block checks (reference §5): a reserved pool must find its block ready, or deploy stops.

The recipe renders `STRICT` reservations, so a block that is missing, foreign, inactive, misplaced,
mis-shaped or full makes the node group wait forever instead of using on-demand capacity. Preflight proves
the block can take the pool before anything is created; there is no fallback to on-demand GPU quota.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import ROUND_FLOOR, Decimal

from npa_pulumi.cloud.port import CapacityBlockGroup
from npa_pulumi.cloud.redaction import mask_id
from npa_pulumi.preflight.demand import CapacityDemand

NO_FALLBACK = "STRICT reservation-backed node groups will not fall back to on-demand capacity."

_ACTIVE_STATES = frozenset({"ACTIVE", "STATE_ACTIVE"})
_NOT_USED_STATES = frozenset({"NOT_USED", "USAGE_STATE_NOT_USED"})


def free_gpus(block: CapacityBlockGroup) -> int | None:
    """Reserved GPUs still free in the block, or None when the block's status does not prove it.

    limit − usage; without usage, floor(limit × (1 − usage_percentage)), where the value is a fraction and a
    value above 1 is read as a percent (older wire format); without either, the full limit when NOT_USED.
    """
    limit = block.limit
    if limit < 0:
        return None
    if block.usage is not None:
        return None if block.usage < 0 else max(0, limit - block.usage)
    if block.usage_percentage is not None:
        pct = block.usage_percentage
        if not math.isfinite(pct) or pct < 0:
            return None
        fraction = Decimal(str(pct))
        if fraction > 1:
            fraction /= 100
        remaining = (Decimal(limit) * (Decimal(1) - fraction)).to_integral_value(rounding=ROUND_FLOOR)
        return max(0, int(remaining))
    if block.usage_state.strip().upper() in _NOT_USED_STATES:
        return limit
    return None


@dataclass(frozen=True, slots=True)
class CapacityCheck:
    """The outcome for one capacity block: `reason` is "" when the block can take the demand."""

    demand: CapacityDemand
    block: CapacityBlockGroup | None
    free_gpus: int | None
    reason: str

    @property
    def ok(self) -> bool:
        return not self.reason

    def describe(self) -> str:
        return f"{mask_id(self.demand.block_id)}: {self.reason or 'ok'}"


def _index_blocks(blocks: Iterable[CapacityBlockGroup]) -> tuple[dict[str, CapacityBlockGroup], set[str]]:
    """Index by id; an id listed twice with different evidence proves nothing about that block."""
    index: dict[str, CapacityBlockGroup] = {}
    ambiguous: set[str] = set()
    for block in blocks:
        seen = index.get(block.id)
        if seen is not None and seen != block:
            ambiguous.add(block.id)
        index.setdefault(block.id, block)
    return index, ambiguous


def _first_failure(
    demand: CapacityDemand,
    block: CapacityBlockGroup | None,
    free: int | None,
    tenant_id: str,
    ambiguous: bool,
) -> str:
    # Checks run in the reference's order and stop at the first failure: a later check (free GPUs, say)
    # means nothing for a block that is in the wrong tenant or region.
    if block is None:
        return "not found in tenant"
    if ambiguous:
        return "listed more than once with different evidence"
    if block.parent_id != tenant_id:
        return "belongs to another tenant"
    if block.state.strip().upper() not in _ACTIVE_STATES:
        return f"is not active ({block.state or 'unknown'})"
    if block.region != demand.region:
        return f"region {block.region!r} does not match {demand.region!r}"
    if block.platform != demand.platform:
        return f"platform {block.platform!r} does not match {demand.platform!r}"
    # The fabric is a workload requirement only for a clustered pool; a non-clustered pool takes whatever
    # fabric the block is in.
    if demand.fabric and block.fabric != demand.fabric:
        return f"fabric {block.fabric!r} does not match {demand.fabric!r}"
    if free is None:
        return "remaining GPU capacity is unavailable"
    if free < demand.required_gpus:
        return f"needs {demand.required_gpus} GPUs, only {free} reserved GPUs remain"
    return ""


def check_capacity_blocks(
    demands: Iterable[CapacityDemand], blocks: Iterable[CapacityBlockGroup], tenant_id: str
) -> list[CapacityCheck]:
    """Check every demanded block against the tenant's listing, in demand order."""
    index, ambiguous = _index_blocks(blocks)
    checks: list[CapacityCheck] = []
    for demand in demands:
        block = index.get(demand.block_id)
        free = None if block is None else free_gpus(block)
        reason = _first_failure(demand, block, free, tenant_id, demand.block_id in ambiguous)
        checks.append(CapacityCheck(demand, block, free, reason))
    return checks


def capacity_failure_message(checks: Iterable[CapacityCheck]) -> str:
    """Every rejected block with its reason (ids masked), ending with the no-fallback statement."""
    failed = [c for c in checks if not c.ok]
    return "\n".join(
        [
            "reserved capacity is insufficient or incompatible for this fleet:",
            *(f"  - {c.describe()}" for c in failed),
            NO_FALLBACK,
        ]
    )
