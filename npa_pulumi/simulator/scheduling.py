"""Starting node groups: the simulated instance scheduler.

A node group is accepted even when its instances do not fit the quota (or its reserved capacity block);
it then waits, PROVISIONING, with a QuotaFailure (or CapacityBlockFailure) condition naming the quota,
its limit and what was requested — the real service's failure mode that the seed warns about. Whenever
a write transaction runs, waiting groups are tried again, oldest first, so capacity that frees up (in
any process) is picked up without a background daemon.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import records

_NO_BLOCK = "(none)"


def _charges(data: dict[str, Any], block_id: str | None) -> list[acct.Charge]:
    return acct.node_group_charges(
        platform=data["platform"],
        preset=data["preset"],
        node_count=data["node_count"],
        disk_type=data["disk_type"],
        disk_size_gib=data["disk_size_gib"],
        preemptible=data["preemptible"],
        capacity_block_id=block_id,
    )


def charge_options(conn: sqlite3.Connection, tenant_id: str, data: dict[str, Any]) -> list[list[acct.Charge]]:
    """The ways a node group may be satisfied, in order of preference: STRICT draws only from its blocks
    (any ACTIVE block of its platform when it names none); AUTO prefers its blocks, then on-demand quota;
    FORBID and no policy use on-demand quota."""
    policy, block_ids = data["reservation_policy"], list(data["reservation_ids"])
    if policy == "STRICT" and not block_ids:
        rows = conn.execute(
            "SELECT id FROM capacity_blocks WHERE parent_id = ? AND platform = ? AND state IN ('', 'ACTIVE') "
            "ORDER BY position",
            (tenant_id, data["platform"]),
        ).fetchall()
        block_ids = [row["id"] for row in rows] or [_NO_BLOCK]
    options = [_charges(data, block_id) for block_id in block_ids] if policy in ("STRICT", "AUTO") else []
    if policy != "STRICT":
        options.append(_charges(data, None))
    return options


def _condition(shortfall: acct.Shortfall) -> dict[str, Any]:
    return {
        "kind": "CapacityBlockFailure" if shortfall.is_capacity_block else "QuotaFailure",
        "message": f"not enough {shortfall.describe()}",
        "quota": shortfall.name,
        "limit": shortfall.limit,
        "requested": shortfall.requested,
    }


def try_start(
    conn: sqlite3.Connection, row: sqlite3.Row, tenant_id: str, now: float, provisioning_s: float
) -> bool:
    """Allocate a waiting group's instances if some option fits (it then provisions from `now`);
    otherwise record the first option's shortfall as its condition."""
    data = records.data_of(row)
    first: acct.Shortfall | None = None
    for option in charge_options(conn, tenant_id, data):
        where = {"region": row["region"], "tenant_id": tenant_id, "project_id": row["project_id"]}
        shortfall = acct.find_shortfall(conn, option, **where)
        if shortfall is None:
            acct.allocate(conn, row["id"], option, **where)
            data["conditions"] = []
            conn.execute(
                "UPDATE resources SET ready_at = ?, data = ? WHERE id = ?",
                (now + provisioning_s, json.dumps(data), row["id"]),
            )
            return True
        first = first or shortfall
    assert first is not None, "every node group has at least one way to be satisfied"
    data["conditions"] = [_condition(first)]
    conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), row["id"]))
    return False


def has_waiting(conn: sqlite3.Connection) -> bool:
    query = "SELECT 1 FROM resources WHERE kind = 'node_group' AND ready_at < 0 LIMIT 1"
    return conn.execute(query).fetchone() is not None


def reconcile_waiting(conn: sqlite3.Connection, tenant_id: str, now: float, provisioning_s: float) -> None:
    """Try every waiting group again, oldest first (inside a write transaction)."""
    rows = conn.execute(
        "SELECT * FROM resources WHERE kind = 'node_group' AND ready_at < 0 ORDER BY created_at, id"
    ).fetchall()
    for row in rows:
        try_start(conn, row, tenant_id, now, provisioning_s)
