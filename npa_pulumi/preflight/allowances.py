"""Choosing and interpreting the tenant's quota allowances for the quotas a fleet needs (reference §5).

The quotas service can return several records for one (name, region): the tenant's own, project-level
ones that only subdivide it, and older unscoped ones. Preflight must never be talked into "it fits" by the
wrong record, so the rules are conservative and every doubt fails closed:

* tenant-scoped records (`parent_id` / `container_id` == tenant) are authoritative; unscoped ones are a
  fallback only when the tenant has none; project-scoped records are ignored;
* a finite record beats an unlimited one (`limit=None`); several finite ones must agree exactly;
* a finite record's unit, state and usage evidence must all be interpretable.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from decimal import ROUND_FLOOR, Decimal, InvalidOperation

from npa_pulumi.cloud.port import QuotaAllowance
from npa_pulumi.preflight.demand import GPU_FAMILY_PREFIX, NON_GPU_VCPU, OPTIONAL_VPC_TOPOLOGY, is_byte_quota

Key = tuple[str, str]  # (quota name, region)

# The port strips the API's STATE_ / USAGE_STATE_ prefixes; the raw spellings are accepted too so that an
# adapter that forgets to normalise cannot turn an active allowance into a false rejection.
_ACTIVE_STATES = frozenset({"", "ACTIVE", "STATE_ACTIVE"})
_NOT_USED_STATES = frozenset({"NOT_USED", "USAGE_STATE_NOT_USED"})

SOURCE_EXACT = "exact"
SOURCE_FRACTION = "fraction"
SOURCE_NOT_USED = "not-used"
SOURCE_UNLIMITED = "unlimited"

SCOPE_TENANT = "tenant"
SCOPE_UNSCOPED = "unscoped"


def expected_units(name: str) -> frozenset[str]:
    """The units a finite allowance for `name` may be reported in."""
    if is_byte_quota(name):
        return frozenset({"byte"})
    if name == NON_GPU_VCPU:
        return frozenset({"count", "vcpu"})
    if name.startswith(GPU_FAMILY_PREFIX):
        return frozenset({"count", "gpu"})
    return frozenset({"count"})


class AllowanceError(ValueError):
    """The allowance evidence for one (name, region) cannot be trusted."""

    def __init__(self, name: str, region: str, reason: str) -> None:
        super().__init__(f"quota {name!r} [{region}]: {reason}")
        self.name = name
        self.region = region
        self.reason = reason


@dataclass(frozen=True, slots=True)
class AllowanceEvidence:
    """The one allowance selected for (name, region). `limit`/`available` None = unlimited."""

    name: str
    region: str
    limit: int | None
    available: int | None
    unit: str
    source: str  # exact | fraction | not-used | unlimited
    scope: str  # tenant | unscoped
    usage: int | None = None

    @property
    def unlimited(self) -> bool:
        return self.limit is None

    def shortfall(self, required: int) -> int:
        """How much of `required` is not covered; unlimited never falls short."""
        return 0 if self.available is None else max(0, required - self.available)


@dataclass
class AllowanceLookup:
    """Evidence for every required (name, region): found, erroneous, missing, or optional and unadvertised."""

    found: dict[Key, AllowanceEvidence] = field(default_factory=dict)
    errors: dict[Key, AllowanceError] = field(default_factory=dict)
    missing: set[Key] = field(default_factory=set)  # required and absent: fails closed
    unadvertised: set[Key] = field(default_factory=set)  # optional vpc topology, absent: reported only


def _norm_unit(unit: str) -> str:
    return unit.strip().lower()


def _floor_remaining(limit: int, fraction: Decimal) -> int:
    return max(0, int((Decimal(limit) * (Decimal(1) - fraction)).to_integral_value(rounding=ROUND_FLOOR)))


def _finite(name: str, region: str, record: QuotaAllowance, scope: str) -> AllowanceEvidence:
    assert record.limit is not None
    limit = record.limit
    if limit < 0:
        raise AllowanceError(name, region, f"unusable capacity evidence (negative limit {limit})")
    if record.state.strip().upper() not in _ACTIVE_STATES:
        raise AllowanceError(name, region, f"allowance state is not active: {record.state}")
    unit = _norm_unit(record.unit)
    allowed = expected_units(name)
    if unit not in allowed:
        raise AllowanceError(
            name, region, f"incompatible unit {unit!r}; expected one of: {', '.join(sorted(allowed))}"
        )
    # Exact usage wins; the fractional usage_percentage is next (above 1 means consumption is over the
    # limit, so nothing is left); NOT_USED proves zero consumption. Anything else proves nothing.
    if record.usage is not None:
        if record.usage < 0:
            raise AllowanceError(name, region, f"unusable capacity evidence (negative usage {record.usage})")
        return AllowanceEvidence(
            name, region, limit, max(0, limit - record.usage), unit, SOURCE_EXACT, scope, record.usage
        )
    if record.usage_percentage is not None:
        pct = record.usage_percentage
        if not math.isfinite(pct) or pct < 0:
            raise AllowanceError(name, region, f"unusable capacity evidence (usage_percentage {pct})")
        try:
            available = _floor_remaining(limit, Decimal(str(pct)))
        except InvalidOperation as exc:  # pragma: no cover - isfinite already excludes what Decimal rejects
            raise AllowanceError(name, region, "unusable capacity evidence") from exc
        return AllowanceEvidence(
            name, region, limit, available, unit, SOURCE_FRACTION, scope, limit - available
        )
    if record.usage_state.strip().upper() in _NOT_USED_STATES:
        return AllowanceEvidence(name, region, limit, limit, unit, SOURCE_NOT_USED, scope, 0)
    raise AllowanceError(
        name, region, "unusable capacity evidence (no usage, usage_percentage, or NOT_USED state)"
    )


def _unlimited(name: str, region: str, record: QuotaAllowance) -> str:
    """Validate an unlimited record and return its (possibly empty) unit. No arithmetic needs its usage."""
    if record.state.strip().upper() not in _ACTIVE_STATES:
        raise AllowanceError(name, region, f"allowance state is not active: {record.state}")
    unit = _norm_unit(record.unit)
    allowed = expected_units(name)
    if unit and unit not in allowed:
        raise AllowanceError(
            name, region, f"incompatible unit {unit!r}; expected one of: {', '.join(sorted(allowed))}"
        )
    return unit


def _scope_of(name: str, region: str, record: QuotaAllowance) -> str:
    scopes = {s for s in (record.parent_id.strip(), record.container_id.strip()) if s}
    if len(scopes) > 1:
        raise AllowanceError(
            name, region, "conflicting container metadata (parent_id and container_id differ)"
        )
    return next(iter(scopes), "")


def select_allowance(
    name: str, region: str, candidates: list[QuotaAllowance], tenant_id: str
) -> AllowanceEvidence | None:
    """Select the one allowance that speaks for the tenant, or None when none does. Raises AllowanceError."""
    tenant: list[QuotaAllowance] = []
    unscoped: list[QuotaAllowance] = []
    for record in candidates:
        scope = _scope_of(name, region, record)
        if scope == tenant_id:
            tenant.append(record)
        elif not scope:
            unscoped.append(record)
        # Anything else is a project (or another container): it only subdivides the tenant allowance.
    if tenant:
        selected, scope_name = tenant, SCOPE_TENANT
        if all(r.limit is None for r in tenant) and any(r.limit is not None for r in unscoped):
            # An unlimited tenant record next to a finite legacy one is contradictory, not proof of infinity.
            raise AllowanceError(name, region, "ambiguous scoped/unscoped candidates")
    elif unscoped:
        selected, scope_name = unscoped, SCOPE_UNSCOPED
    else:
        return None

    finite = [r for r in selected if r.limit is not None]
    if finite:
        parsed = [_finite(name, region, r, scope_name) for r in finite]
        if any(p != parsed[0] for p in parsed[1:]):
            raise AllowanceError(name, region, "ambiguous finite candidates")
        return parsed[0]
    units = {u for u in (_unlimited(name, region, r) for r in selected) if u}
    if len(units) > 1:
        raise AllowanceError(name, region, "ambiguous unlimited candidates")
    return AllowanceEvidence(name, region, None, None, next(iter(units), ""), SOURCE_UNLIMITED, scope_name)


def evaluate_allowances(
    records: Iterable[QuotaAllowance], tenant_id: str, required: Iterable[Key]
) -> AllowanceLookup:
    """Index the records once by (name, region), keeping only required keys, then select per key."""
    wanted = set(required)
    grouped: dict[Key, list[QuotaAllowance]] = {}
    for record in records:
        key = (record.name, record.region)
        if key in wanted:
            grouped.setdefault(key, []).append(record)
    lookup = AllowanceLookup()
    for key in sorted(wanted):
        name, region = key
        try:
            evidence = select_allowance(name, region, grouped.get(key, []), tenant_id)
        except AllowanceError as err:
            lookup.errors[key] = err
            continue
        if evidence is not None:
            lookup.found[key] = evidence
        elif name in OPTIONAL_VPC_TOPOLOGY:
            lookup.unadvertised.add(key)
        else:
            lookup.missing.add(key)
    return lookup
