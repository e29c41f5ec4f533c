"""Quota and reserved-capacity accounting: what each object consumes, whether it fits, current usage.

Every live object records what it consumes in the `allocations` table (one row per quota it touches),
so usage is always `fixture baseline + SUM(allocations)`, grows on create, shrinks on delete, and stays
consistent across processes because checks and inserts share one `BEGIN IMMEDIATE` transaction.

The consumption rules mirror what the real services charge and what the fleet's preflight predicts
(reference §5): a worker node is one instance, one boot disk and two VPC allocations; CPU nodes charge
their preset's vCPUs to `compute.instance.non-gpu.vcpu`; GPU nodes charge `compute.instance.gpu.<family>`
unless they are preemptible or draw from a capacity block group, which is charged instead.
"""

from __future__ import annotations

import math
import re
import sqlite3
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

GIB = 2**30
CAPACITY_TARGET_PREFIX = "capacityblock:"

PROJECT_COUNT = "iam.project.count"  # a simulator-chosen name; no fleet rule depends on it
MK8S_CLUSTER_COUNT = "mk8s.cluster.count"
VPC_ALLOCATION_COUNT = "vpc.allocation.count"
INSTANCE_COUNT = "compute.instance.count"
PREEMPTIBLE_INSTANCE_COUNT = "compute.instance.preemptible.count"
GPU_QUOTA_PREFIX = "compute.instance.gpu."
NON_GPU_VCPU = "compute.instance.non-gpu.vcpu"
DISK_COUNT = "compute.disk.count"
DISK_SIZE_PREFIX = "compute.disk.size."
FILESYSTEM_COUNT = "compute.filesystem.count"
FILESYSTEM_SIZE_PREFIX = "compute.filesystem.size."
GPU_CLUSTER_COUNT = "compute.gpucluster.count"
BUCKET_COUNT = "storage.bucket.count"
BUCKET_SIZE_PREFIX = "storage.bucket.size."
VPC_NETWORK_COUNT = "vpc.network.count"
VPC_SUBNET_COUNT = "vpc.subnet.count"
VPC_POOL_COUNT = "vpc.pool.count"
VPC_ROUTETABLE_COUNT = "vpc.routetable.count"
VPC_ROUTE_COUNT = "vpc.route.count"

_VCPUS = re.compile(r"(\d+)vcpu")
_GPUS = re.compile(r"(\d+)gpu")
_GPU_FAMILY = re.compile(r"^gpu-([a-z0-9]+)")


@dataclass(frozen=True)
class Charge:
    target: str  # a quota name, or capacityblock:<block id>
    amount: int


@dataclass(frozen=True)
class Shortfall:
    """A charge that does not fit: which record refused it and by how much."""

    target: str
    region: str
    limit: int
    usage: int
    requested: int

    @property
    def is_capacity_block(self) -> bool:
        return self.target.startswith(CAPACITY_TARGET_PREFIX)

    @property
    def name(self) -> str:
        return self.target.removeprefix(CAPACITY_TARGET_PREFIX)

    def describe(self) -> str:
        what = "capacity block group" if self.is_capacity_block else "quota"
        return (
            f"{what} {self.name} [{self.region}]: limit {self.limit}, usage {self.usage}, "
            f"requested {self.requested}"
        )


def vcpus_of(preset: str) -> int:
    match = _VCPUS.search(preset or "")
    return int(match.group(1)) if match else 0


def gpus_of(preset: str) -> int:
    match = _GPUS.search(preset or "")
    return int(match.group(1)) if match else 0


def gpu_family(platform: str) -> str:
    match = _GPU_FAMILY.match(platform or "")
    return match.group(1) if match else ""


def size_quota(prefix: str, disk_type: str) -> str:
    """`NETWORK_SSD` -> `<prefix>network-ssd`, as the quota catalog spells storage types."""
    return prefix + (disk_type or "NETWORK_SSD").strip().lower().replace("_", "-")


def node_group_charges(
    *,
    platform: str,
    preset: str,
    node_count: int,
    disk_type: str,
    disk_size_gib: int,
    preemptible: bool,
    capacity_block_id: str | None,
) -> list[Charge]:
    if node_count <= 0:
        return []
    family = gpu_family(platform)
    charges = [
        Charge(PREEMPTIBLE_INSTANCE_COUNT if preemptible else INSTANCE_COUNT, node_count),
        Charge(DISK_COUNT, node_count),
        Charge(size_quota(DISK_SIZE_PREFIX, disk_type), node_count * disk_size_gib * GIB),
        Charge(VPC_ALLOCATION_COUNT, 2 * node_count),  # an address plus a pod alias per worker
    ]
    if not family:
        charges.append(Charge(NON_GPU_VCPU, node_count * vcpus_of(preset)))
    else:
        gpus = node_count * gpus_of(preset)
        if capacity_block_id:
            charges.append(Charge(CAPACITY_TARGET_PREFIX + capacity_block_id, gpus))
        elif not preemptible:
            charges.append(Charge(GPU_QUOTA_PREFIX + family, gpus))
    return [c for c in charges if c.amount > 0]


def _consumed(
    conn: sqlite3.Connection, target: str, region: str, tenant_id: str, project_id: str | None = None
) -> int:
    sql = "SELECT COALESCE(SUM(amount), 0) FROM allocations WHERE target = ? AND region = ? AND tenant_id = ?"
    args: list[Any] = [target, region, tenant_id]
    if project_id is not None:
        sql += " AND project_id = ?"
        args.append(project_id)
    return int(conn.execute(sql, args).fetchone()[0])


def _effective_baseline(base_usage: int | None, base_pct: float | None, limit: int | None) -> int:
    if base_usage is not None:
        return base_usage
    if base_pct is not None and limit is not None:
        fraction = base_pct if base_pct <= 1 else base_pct / 100
        return math.ceil(limit * fraction)
    return 0


def _tenant_has_record(conn: sqlite3.Connection, name: str, region: str, tenant_id: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM quotas WHERE name = ? AND region = ? AND scope = 'tenant' AND parent_id = ?",
        (name, region, tenant_id),
    ).fetchone()
    return row is not None


def _applicable_quota_rows(
    conn: sqlite3.Connection, name: str, region: str, tenant_id: str, project_id: str
) -> list[sqlite3.Row]:
    """The finite, active records that bound a charge: the tenant's, the project's, and unscoped ones
    only where the tenant has no record of its own (they are a fallback, as the preflight treats them)."""
    rows = conn.execute(
        "SELECT * FROM quotas WHERE name = ? AND region = ? AND lim IS NOT NULL AND state IN ('', 'ACTIVE')",
        (name, region),
    ).fetchall()
    applicable = []
    for row in rows:
        scope = row["scope"]
        if (
            (scope == "tenant" and row["parent_id"] == tenant_id)
            or (scope == "project" and row["parent_id"] == project_id)
            or (scope == "unscoped" and not _tenant_has_record(conn, name, region, tenant_id))
        ):
            applicable.append(row)
    return applicable


def _quota_shortfall(
    conn: sqlite3.Connection, charge: Charge, region: str, tenant_id: str, project_id: str
) -> Shortfall | None:
    for row in _applicable_quota_rows(conn, charge.target, region, tenant_id, project_id):
        scope_project = project_id if row["scope"] == "project" else None
        usage = _effective_baseline(row["base_usage"], row["base_usage_pct"], row["lim"]) + _consumed(
            conn, charge.target, region, tenant_id, scope_project
        )
        if usage + charge.amount > row["lim"]:
            return Shortfall(charge.target, region, int(row["lim"]), usage, charge.amount)
    return None


def capacity_block_usage(conn: sqlite3.Connection, row: sqlite3.Row) -> int:
    consumed = int(
        conn.execute(
            "SELECT COALESCE(SUM(amount), 0) FROM allocations WHERE target = ?",
            (CAPACITY_TARGET_PREFIX + row["id"],),
        ).fetchone()[0]
    )
    return _effective_baseline(row["base_usage"], row["base_usage_pct"], row["lim"]) + consumed


def _capacity_shortfall(conn: sqlite3.Connection, charge: Charge, region: str) -> Shortfall | None:
    block_id = charge.target.removeprefix(CAPACITY_TARGET_PREFIX)
    row = conn.execute("SELECT * FROM capacity_blocks WHERE id = ?", (block_id,)).fetchone()
    if row is None:
        return Shortfall(charge.target, region, 0, 0, charge.amount)
    usage = capacity_block_usage(conn, row)
    if usage + charge.amount > row["lim"]:
        return Shortfall(charge.target, row["region"], int(row["lim"]), usage, charge.amount)
    return None


def find_shortfall(
    conn: sqlite3.Connection, charges: Iterable[Charge], *, region: str, tenant_id: str, project_id: str
) -> Shortfall | None:
    for charge in charges:
        if charge.target.startswith(CAPACITY_TARGET_PREFIX):
            shortfall = _capacity_shortfall(conn, charge, region)
        else:
            shortfall = _quota_shortfall(conn, charge, region, tenant_id, project_id)
        if shortfall is not None:
            return shortfall
    return None


def allocate(
    conn: sqlite3.Connection,
    owner_id: str,
    charges: Iterable[Charge],
    *,
    region: str,
    tenant_id: str,
    project_id: str,
) -> None:
    conn.executemany(
        "INSERT INTO allocations (owner_id, target, region, tenant_id, project_id, amount) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        [(owner_id, c.target, region, tenant_id, project_id, c.amount) for c in charges],
    )


def release(conn: sqlite3.Connection, owner_id: str) -> None:
    conn.execute("DELETE FROM allocations WHERE owner_id = ?", (owner_id,))


def _usage_state(reported_usage: int | None, consumed: int, configured: str) -> str:
    if consumed > 0:
        return "USED"
    if configured:
        return configured
    if reported_usage is None:
        return ""
    return "USED" if reported_usage > 0 else "NOT_USED"


def _usage_fields(
    base_usage: int | None, base_pct: float | None, limit: int | None, consumed: int, usage_state: str
) -> dict[str, Any]:
    """How a record reports usage: a count when the baseline had one, else only a percentage."""
    if base_usage is None and base_pct is None:
        usage: int | None = None if consumed == 0 else consumed
        pct: float | None = None
    elif base_usage is None:
        usage = None
        pct = base_pct + (consumed / limit if limit else 0.0)  # type: ignore[operator]
    else:
        usage = base_usage + consumed
        pct = None if not limit else usage / limit
    return {
        "usage": usage,
        "usage_percentage": pct,
        "usage_state": _usage_state(usage, consumed, usage_state),
    }


def quota_record(conn: sqlite3.Connection, row: sqlite3.Row, tenant_id: str) -> dict[str, Any]:
    """A quota allowance as the quotas service reports it, with current usage."""
    scope = row["scope"]
    project = row["parent_id"] if scope == "project" else None
    consumed = _consumed(conn, row["name"], row["region"], tenant_id, project)
    record = {
        "id": row["id"],
        "name": row["name"],
        "region": row["region"],
        "limit": row["lim"],
        "unit": row["unit"],
        "state": row["state"],
        "parent_id": row["parent_id"],
        "container_id": row["container_id"],
        "scope": row["scope"],
    }
    record.update(
        _usage_fields(row["base_usage"], row["base_usage_pct"], row["lim"], consumed, row["usage_state"])
    )
    return record


def capacity_block_record(conn: sqlite3.Connection, row: sqlite3.Row) -> dict[str, Any]:
    consumed = int(
        conn.execute(
            "SELECT COALESCE(SUM(amount), 0) FROM allocations WHERE target = ?",
            (CAPACITY_TARGET_PREFIX + row["id"],),
        ).fetchone()[0]
    )
    record = {
        "id": row["id"],
        "parent_id": row["parent_id"],
        "region": row["region"],
        "platform": row["platform"],
        "fabric": row["fabric"],
        "state": row["state"],
        "limit": row["lim"],
    }
    record.update(
        _usage_fields(row["base_usage"], row["base_usage_pct"], row["lim"], consumed, row["usage_state"])
    )
    return record
