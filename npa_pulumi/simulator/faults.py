"""Fault injection: fail or slow down the next N calls of an operation, across processes.

Faults live in the database, so a test (or a person at the CLI) can arm one in one process and have it
hit the Pulumi dynamic-provider host or a terraform local-exec in another. Each call of an operation
takes at most one fault, the oldest armed one that matches (`*` matches every operation).
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from typing import Any

from npa_pulumi.cloud.errors import ERROR_KINDS

ANY_OPERATION = "*"
# The cloud port's operations a fault can be armed on (every call of one goes through the fault check).
OPERATIONS: tuple[str, ...] = (
    "principal", "default_region",
    "list_projects", "get_project", "create_project", "delete_project",
    "list_networks", "get_network", "create_network", "delete_network",
    "list_subnets", "get_subnet", "create_subnet", "delete_subnet",
    "list_quota_allowances", "list_capacity_block_groups", "get_capacity_block_group",
    "get_bucket", "find_bucket", "list_buckets", "create_bucket", "delete_bucket", "probe_bucket",
    "count_bucket_objects", "put_object",
    "find_service_account", "list_service_accounts", "create_service_account", "delete_service_account",
    "list_access_keys", "create_access_key", "delete_access_key", "grant_bucket_access",
    "create_cluster", "get_cluster", "list_clusters", "delete_cluster",
    "create_node_group", "get_node_group", "list_node_groups", "list_project_node_groups",
    "delete_node_group", "resize_node_group", "edit_node_group_template", "upgrade_cluster",
    "upgrade_node_group",
    "set_cluster_addons", "merge_cluster_addons", "get_cluster_credentials",
    "create_filesystem", "get_filesystem", "list_filesystems", "delete_filesystem",
    "create_gpu_cluster", "get_gpu_cluster", "list_gpu_clusters", "delete_gpu_cluster",
    "list_security_groups", "create_security_group", "delete_security_group",
    "create_instance", "list_instances", "delete_instance", "create_disk", "list_disks", "delete_disk",
    "create_registry", "list_registries", "delete_registry", "create_group", "list_groups", "delete_group",
    "set_labels", "list_active_maintenance", "recover_node", "remove_node",
)  # fmt: skip


@dataclass(frozen=True)
class Fault:
    """What one call must suffer: a delay, then (optionally) a typed error."""

    latency_ms: int
    error_kind: str | None
    message: str


def validate_error_kind(kind: str | None) -> None:
    if kind is not None and kind not in ERROR_KINDS:
        raise ValueError(f"unknown error kind {kind!r}; choose one of {', '.join(sorted(ERROR_KINDS))}")


def add(
    conn: sqlite3.Connection,
    *,
    op: str,
    error_kind: str | None,
    count: int | None,
    latency_ms: int = 0,
    message: str = "",
) -> dict[str, Any]:
    """Arm a fault. `count=None` keeps it armed until cleared."""
    validate_error_kind(error_kind)
    if count is not None and count < 1:
        raise ValueError("count must be at least 1 (omit it to keep the fault armed until cleared)")
    if latency_ms < 0:
        raise ValueError("latency must not be negative")
    if error_kind is None and latency_ms == 0:
        raise ValueError("a fault needs an error kind, a latency, or both")
    cursor = conn.execute(
        "INSERT INTO faults (op, error_kind, remaining, latency_ms, message, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (op, error_kind, count, latency_ms, message, time.time()),
    )
    row = conn.execute("SELECT * FROM faults WHERE id = ?", (cursor.lastrowid,)).fetchone()
    return record(row)


def record(row: sqlite3.Row) -> dict[str, Any]:
    return {
        "id": row["id"],
        "op": row["op"],
        "error": row["error_kind"],
        "remaining": row["remaining"],
        "latency_ms": row["latency_ms"],
        "message": row["message"],
    }


def list_all(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    return [record(row) for row in conn.execute("SELECT * FROM faults ORDER BY id")]


def clear(conn: sqlite3.Connection, op: str | None = None) -> int:
    if op is None:
        return conn.execute("DELETE FROM faults").rowcount
    return conn.execute("DELETE FROM faults WHERE op = ?", (op,)).rowcount


def any_armed(conn: sqlite3.Connection, op: str) -> bool:
    row = conn.execute("SELECT 1 FROM faults WHERE op IN (?, ?) LIMIT 1", (op, ANY_OPERATION)).fetchone()
    return row is not None


def take(conn: sqlite3.Connection, op: str) -> Fault | None:
    """Consume one use of the oldest matching fault (inside the caller's write transaction)."""
    row = conn.execute(
        "SELECT * FROM faults WHERE op IN (?, ?) ORDER BY id LIMIT 1", (op, ANY_OPERATION)
    ).fetchone()
    if row is None:
        return None
    if row["remaining"] is not None:
        if row["remaining"] <= 1:
            conn.execute("DELETE FROM faults WHERE id = ?", (row["id"],))
        else:
            conn.execute("UPDATE faults SET remaining = remaining - 1 WHERE id = ?", (row["id"],))
    message = row["message"] or f"injected {row['error_kind'] or 'latency'} fault on {op}"
    return Fault(latency_ms=int(row["latency_ms"]), error_kind=row["error_kind"], message=message)
