"""What a fleet costs: pure functions of its targets (or of what a stack recorded) and a price catalog.

A stack's *cost basis* is what its price depends on and nothing else: pools (count, platform, preset, how they
are billed), boot disks, the shared filesystem, buckets. Cluster and project stacks record it as the
`cost_basis` output on `up`, so a preview prices the deployed fleet (before) and the spec (after) with one
catalog, and a negotiated price changes both sides alike; `status` prices what is deployed.

Money is `Decimal` throughout (a doubled pool is exactly double); JSON gets floats. Nothing unknown is ever
counted as zero: it is listed under `unknown`. Capacity-block pools are priced as reserved capacity and
kept apart (`reserved`), never added to the on-demand totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from npa_pulumi.plan.prices import HOURS_PER_MONTH, PriceCatalog, Pricing, Quote, StorageKind
from npa_pulumi.plan.targets import ResolvedPool, Target
from npa_pulumi.runtime.presets import gpus_per_node, memory_gib_per_node, vcpus_per_node

COST_BASIS_OUTPUT = "cost_basis"
ZERO = Decimal(0)


class LineKind(StrEnum):
    COMPUTE = "compute"
    DISK = "disk"
    FILESYSTEM = "filesystem"
    BUCKET = "bucket"
    STACK = "stack"  # a project's or fleet's cost object: one line per stack
    PROJECT = "project"  # the fleet's: one line per project


# ----------------------------------------------------------------------------------------- basis


class _Basis(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class PoolBasis(_Basis):
    item: str  # cpu_nodes | gpu_nodes | workers[<name>]
    count: int
    platform: str
    preset: str
    gpus_per_node: int = 0
    vcpus_per_node: int = 0
    memory_gib_per_node: int = 0
    pricing: Pricing = Pricing.ON_DEMAND
    disk_gib_per_node: int = 0


class BucketBasis(_Basis):
    storage_class: str
    size_gib: int


class CostBasis(_Basis):
    """What one stack's price depends on. Recorded as the stack output `cost_basis` (no secret in it: a
    capacity block is only `pricing: reserved`)."""

    format: int = 1
    region: str = ""
    pools: list[PoolBasis] = Field(default_factory=list)
    filesystem_gib: int = 0
    buckets: list[BucketBasis] = Field(default_factory=list)
    # What the stack runs that no catalog can price from the spec (a Slurm control plane whose presets the
    # recipe chooses): listed as unknown, never left out silently. {item: description}
    unpriced: dict[str, str] = Field(default_factory=dict)

    def to_output(self) -> dict[str, Any]:
        return self.model_dump(mode="json")

    @classmethod
    def from_output(cls, value: Any) -> CostBasis | None:
        """A recorded basis, or None when the stack recorded none (or one this version cannot read)."""
        if not isinstance(value, dict) or value.get("format") != 1:
            return None
        try:
            return cls.model_validate(value)
        except ValidationError:
            return None


def _pool_basis(item: str, pool: ResolvedPool | None, pricing: Pricing) -> PoolBasis | None:
    if pool is None or pool.count <= 0:
        return None
    return PoolBasis(
        item=item,
        count=pool.count,
        platform=pool.platform,
        preset=pool.preset,
        gpus_per_node=pool.gpus_per_node,
        vcpus_per_node=pool.vcpus_per_node,
        memory_gib_per_node=pool.memory_gib_per_node,
        pricing=pricing,
        disk_gib_per_node=pool.disk_size_gib,
    )


def _pricing(preemptible: bool, reserved: bool) -> Pricing:
    if reserved:
        return Pricing.RESERVED
    return Pricing.PREEMPTIBLE if preemptible else Pricing.ON_DEMAND


def cluster_basis(target: Target) -> CostBasis:
    """The cost basis of a target's cluster stack."""
    cluster = target.cluster
    pools: list[PoolBasis] = []
    cpu = cluster.cpu_nodes
    gpu = cluster.gpu_nodes
    for basis in (
        _pool_basis("cpu_nodes", cpu, _pricing(bool(cpu and cpu.preemptible), False)),
        _pool_basis(
            "gpu_nodes",
            gpu,
            _pricing(bool(gpu and gpu.preemptible), cluster.capacity_block_group is not None),
        ),
    ):
        if basis is not None:
            pools.append(basis)
    if cluster.soperator is not None:
        for worker in cluster.soperator.workers:
            if worker.size <= 0:
                continue
            pools.append(
                PoolBasis(
                    item=f"workers[{worker.name or worker.preset}]",
                    count=worker.size,
                    platform=worker.platform,
                    preset=worker.preset,
                    gpus_per_node=gpus_per_node(worker.preset),
                    vcpus_per_node=vcpus_per_node(worker.preset),
                    memory_gib_per_node=memory_gib_per_node(worker.preset),
                    pricing=_pricing(worker.preemptible, bool(worker.capacity_block_group)),
                    disk_gib_per_node=worker.boot_disk_gib,
                )
            )
    # An existing filesystem is not the cluster's: it is billed wherever it was made.
    owned_fs = cluster.enable_filestore and not cluster.existing_filestore
    filesystem_gib = cluster.filestore_disk_size_gibibytes if owned_fs else 0
    unpriced: dict[str, str] = {}
    if cluster.soperator is not None:
        filesystem_gib = cluster.soperator.jail_size_gib  # the Slurm jail: a shared filesystem
        unpriced["slurm_control_plane"] = (
            "Slurm controller, login and system nodes (presets chosen by the recipe)"
        )
    return CostBasis(region=target.region, pools=pools, filesystem_gib=filesystem_gib, unpriced=unpriced)


def project_basis(target: Target) -> CostBasis:
    """The cost basis of a target's project stack (its bucket)."""
    storage = target.object_storage
    buckets = (
        [BucketBasis(storage_class=storage.storage_class, size_gib=storage.size_gibibytes)] if storage else []
    )
    return CostBasis(region=target.region, buckets=buckets)


# ----------------------------------------------------------------------------------------- cost


@dataclass(frozen=True)
class CostLine:
    item: str
    description: str
    kind: LineKind
    quantity: Decimal  # nodes (compute: per hour) or GiB (storage: per month)
    unit: str
    unit_price_usd: Decimal | None  # per node-hour, or per GiB-month; None for summary lines
    hourly_usd: Decimal
    monthly_usd: Decimal
    pricing: Pricing | None = None
    source: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "item": self.item,
            "description": self.description,
            "kind": self.kind.value,
            "pricing": self.pricing.value if self.pricing else None,
            "quantity": usd(self.quantity),
            "unit": self.unit,
            "unit_price_usd": None if self.unit_price_usd is None else usd(self.unit_price_usd),
            "hourly_usd": usd(self.hourly_usd),
            "monthly_usd": usd(self.monthly_usd),
            "source": self.source,
        }


@dataclass(frozen=True)
class UnknownItem:
    item: str
    description: str
    reason: str

    def to_json(self) -> dict[str, str]:
        return {"item": self.item, "description": self.description, "reason": self.reason}


@dataclass(frozen=True)
class Cost:
    """A cost object: priced lines (on-demand and preemptible), unknown items, and reserved capacity apart."""

    lines: tuple[CostLine, ...] = ()
    unknown: tuple[UnknownItem, ...] = ()
    reserved_lines: tuple[CostLine, ...] = ()
    reserved_unknown: tuple[UnknownItem, ...] = ()

    @property
    def hourly_usd(self) -> Decimal:
        return sum((line.hourly_usd for line in self.lines), ZERO)

    @property
    def monthly_usd(self) -> Decimal:
        return sum((line.monthly_usd for line in self.lines), ZERO)

    @property
    def reserved_hourly_usd(self) -> Decimal:
        return sum((line.hourly_usd for line in self.reserved_lines), ZERO)

    @property
    def reserved_monthly_usd(self) -> Decimal:
        return sum((line.monthly_usd for line in self.reserved_lines), ZERO)

    def line(self, item: str) -> CostLine | None:
        return next((line for line in (*self.lines, *self.reserved_lines) if line.item == item), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "hourly_usd": usd(self.hourly_usd),
            "monthly_usd": usd(self.monthly_usd),
            "lines": [line.to_json() for line in self.lines],
            "unknown": [item.to_json() for item in self.unknown],
            "reserved": {
                "hourly_usd": usd(self.reserved_hourly_usd),
                "monthly_usd": usd(self.reserved_monthly_usd),
                "lines": [line.to_json() for line in self.reserved_lines],
                "not_priced": [item.to_json() for item in self.reserved_unknown],
            },
        }


def usd(value: Decimal) -> float:
    """A JSON number: exact for every figure of the catalog's precision (6 places kept). A figure too
    large to keep 6 places in the decimal context (a spec asking for absurd sizes) has none to round off."""
    try:
        return float(round(value, 6))
    except InvalidOperation:
        return float(value)


def _shape(pool: PoolBasis) -> str:
    return f"{pool.count} × {pool.platform} {pool.preset}"


def _compute(pool: PoolBasis, quote: Quote) -> CostLine:
    hourly = Decimal(pool.count) * quote.hourly_usd
    return CostLine(
        item=pool.item,
        description=f"{_shape(pool)} ({pool.pricing.value})",
        kind=LineKind.COMPUTE,
        quantity=Decimal(pool.count),
        unit="node",
        unit_price_usd=quote.hourly_usd,
        hourly_usd=hourly,
        monthly_usd=hourly * HOURS_PER_MONTH,
        pricing=pool.pricing,
        source=quote.source,
    )


def _storage(item: str, description: str, kind: LineKind, gib: int, price: Decimal, source: str) -> CostLine:
    monthly = Decimal(gib) * price
    return CostLine(
        item=item,
        description=description,
        kind=kind,
        quantity=Decimal(gib),
        unit="GiB",
        unit_price_usd=price,
        hourly_usd=monthly / HOURS_PER_MONTH,
        monthly_usd=monthly,
        source=source,
    )


@dataclass
class _Builder:
    catalog: PriceCatalog
    region: str
    lines: list[CostLine] = field(default_factory=list)
    unknown: list[UnknownItem] = field(default_factory=list)
    reserved_lines: list[CostLine] = field(default_factory=list)
    reserved_unknown: list[UnknownItem] = field(default_factory=list)

    def pool(self, pool: PoolBasis) -> None:
        found = self.catalog.compute(
            pool.platform,
            pool.preset,
            self.region,
            pool.pricing,
            gpus=pool.gpus_per_node,
            vcpus=pool.vcpus_per_node,
            memory=pool.memory_gib_per_node,
        )
        reserved = pool.pricing is Pricing.RESERVED
        if isinstance(found, str):
            item = UnknownItem(pool.item, f"{_shape(pool)} ({pool.pricing.value})", found)
            (self.reserved_unknown if reserved else self.unknown).append(item)
        else:
            (self.reserved_lines if reserved else self.lines).append(_compute(pool, found))
        if pool.disk_gib_per_node > 0:
            gib = pool.count * pool.disk_gib_per_node
            self.storage(
                f"{pool.item}.disk",
                f"{pool.count} × {pool.disk_gib_per_node} GiB boot disk",
                StorageKind.DISK,
                None,
                gib,
            )

    def storage(self, item: str, description: str, kind: StorageKind, type_: str | None, gib: int) -> None:
        found = self.catalog.storage(kind, type_, self.region)
        if isinstance(found, str):
            self.unknown.append(UnknownItem(item, description, found))
            return
        price, source = found
        self.lines.append(_storage(item, description, LineKind(kind.value), gib, price, source))

    def cost(self) -> Cost:
        return Cost(
            tuple(self.lines), tuple(self.unknown), tuple(self.reserved_lines), tuple(self.reserved_unknown)
        )


def price_basis(basis: CostBasis, catalog: PriceCatalog) -> Cost:
    """The cost of one stack from its basis."""
    builder = _Builder(catalog, basis.region)
    for pool in basis.pools:
        builder.pool(pool)
    if basis.filesystem_gib > 0:
        builder.storage(
            "filesystem",
            f"{basis.filesystem_gib} GiB shared filesystem",
            StorageKind.FILESYSTEM,
            None,
            basis.filesystem_gib,
        )
    for item, description in basis.unpriced.items():
        builder.unknown.append(
            UnknownItem(item, description, "not priced: the spec does not say what it runs on")
        )
    for bucket in basis.buckets:
        builder.storage(
            "bucket",
            f"bucket ({bucket.storage_class}), up to {bucket.size_gib} GiB (its size limit)",
            StorageKind.BUCKET,
            bucket.storage_class,
            bucket.size_gib,
        )
    return builder.cost()


def combine(parts: Iterable[tuple[str, Cost]], kind: LineKind = LineKind.STACK) -> Cost:
    """A cost object over several: one line per part (its name), unknown and reserved items kept, named."""
    lines, unknown, reserved_lines, reserved_unknown = [], [], [], []
    for name, cost in parts:
        lines.append(_summary_line(name, kind, cost.hourly_usd, cost.monthly_usd))
        if cost.reserved_lines:
            reserved_lines.append(
                _summary_line(name, kind, cost.reserved_hourly_usd, cost.reserved_monthly_usd)
            )
        unknown += [_named(name, item) for item in cost.unknown]
        reserved_unknown += [_named(name, item) for item in cost.reserved_unknown]
    return Cost(tuple(lines), tuple(unknown), tuple(reserved_lines), tuple(reserved_unknown))


def _summary_line(name: str, kind: LineKind, hourly: Decimal, monthly: Decimal) -> CostLine:
    return CostLine(
        item=name,
        description=name,
        kind=kind,
        quantity=Decimal(1),
        unit=kind.value,
        unit_price_usd=None,
        hourly_usd=hourly,
        monthly_usd=monthly,
    )


def _named(name: str, item: UnknownItem) -> UnknownItem:
    # A child's item is named by the stack it is in (`fleet.a.train: gpu_nodes`), so a reviewer finds it
    # without the breakdown.
    if ": " in item.item:
        return item  # already named by its stack
    return UnknownItem(f"{name}: {item.item}", item.description, item.reason)


# ----------------------------------------------------------------------------------------- the plan


def plan_costs(targets: Sequence[Target], catalog: PriceCatalog) -> dict[str, Cost]:
    """Every stack's cost (project stacks once), by stack name."""
    costs: dict[str, Cost] = {}
    for target in targets:
        if target.project_stack not in costs:
            costs[target.project_stack] = price_basis(project_basis(target), catalog)
        costs[target.cluster_stack] = price_basis(cluster_basis(target), catalog)
    return costs


# ----------------------------------------------------------------------------------------- words


def money(value: float | Decimal, *, signed: bool = False) -> str:
    """`$40,880`, `$1.19`, `-$12.50`, `+$3` (signed): whole dollars from $1,000 up, cents below."""
    amount = float(value)
    sign = "-" if amount < 0 else ("+" if signed and amount > 0 else "")
    magnitude = abs(amount)
    text = f"{magnitude:,.0f}" if magnitude >= 1000 else f"{magnitude:,.2f}"
    return f"{sign}${text}"


def cost_phrase(cost: dict[str, Any]) -> str:
    """One line for a cost object's JSON: `$868.99/month ($1.19/h); 4 unknown; reserved $0/month`."""
    parts = [f"{money(cost['monthly_usd'])}/month ({money(cost['hourly_usd'])}/h)"]
    if cost.get("unknown"):
        parts.append(f"{len(cost['unknown'])} item(s) not priced")
    reserved = cost.get("reserved") or {}
    if reserved.get("lines"):
        parts.append(f"reserved {money(reserved['monthly_usd'])}/month apart")
    if reserved.get("not_priced"):
        parts.append(f"{len(reserved['not_priced'])} reserved pool(s) not priced")
    return "; ".join(parts)
