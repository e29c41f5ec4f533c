"""Turning stored rows into the records the port and the inventory report.

States are computed here, lazily, from the stored timestamps: an object is PROVISIONING (or CREATING)
until `ready_at` has passed, then RUNNING (or READY). A node group waiting for quota has
`ready_at = WAITING_FOR_QUOTA` and stays PROVISIONING. No background process is needed.
"""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import Any

WAITING_FOR_QUOTA = -1.0  # the ready_at of a node group whose instances do not fit the quota yet

# The resources table's `kind` column, and the inventory list each kind is shown in.
KIND_LISTS: dict[str, str] = {
    "project": "projects",
    "network": "networks",
    "subnet": "subnets",
    "cluster": "mk8s_clusters",
    "node_group": "node_groups",
    "filesystem": "filesystems",
    "gpu_cluster": "gpu_clusters",
    "bucket": "buckets",
    "service_account": "service_accounts",
    "access_key": "access_keys",
    "instance": "instances",
    "disk": "disks",
    "registry": "registries",
    "iam_group": "iam_groups",
    "security_group": "security_groups",
}


def endpoint_for(cluster_id: str, region: str) -> str:
    """The public endpoint; soperator's stand-in recipe computes the same string in HCL."""
    return f"https://pub.{cluster_id}.mk8s.{region}.local-cloud.invalid:443"


def private_endpoint_for(cluster_id: str, region: str) -> str:
    return f"https://{cluster_id}.mk8s.{region}.local-cloud.invalid:443"


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def data_of(row: sqlite3.Row) -> dict[str, Any]:
    loaded = json.loads(row["data"])
    assert isinstance(loaded, dict)
    return loaded


def gone(row: sqlite3.Row | None) -> bool:
    """Whether a row is absent for the cloud's S3 server: missing, or a lagged delete (DELETING)."""
    return row is None or data_of(row).get("deleting_until") is not None


def _is_ready(row: sqlite3.Row, now: float) -> bool:
    ready_at: float = row["ready_at"]
    return 0 <= ready_at <= now


def _common(row: sqlite3.Row) -> dict[str, Any]:
    return {"id": row["id"], "name": row["name"]}


def _project(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "tenant_id": row["tenant_id"],
        "region": row["region"],
        "state": "ACTIVE",
        "suspension_state": "NONE",
        "labels": data.get("labels", {}),
    }


def _network(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "project_id": row["project_id"],
        "state": "READY",
        "labels": data.get("labels", {}),
    }


def _subnet(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "project_id": row["project_id"],
        "network_id": data["network_id"],
        "cidr": data.get("cidr", ""),
        "state": "READY",
        "labels": data.get("labels", {}),
    }


def _bucket(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "project_id": row["project_id"],
        "region": row["region"],
        "storage_class": data["storage_class"],
        "max_size_bytes": data["max_size_bytes"],
        "state": "ACTIVE",
        "suspension_state": "NOT_SUSPENDED",
        "labels": data.get("labels", {}),
    }


def _service_account(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {**_common(row), "project_id": row["project_id"], "labels": data.get("labels", {})}


def _access_key(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    # Never the secret: only its hash is stored, and not even that is reported.
    return {
        "id": row["id"],
        "service_account_id": row["parent_id"],
        "project_id": row["project_id"],
        "aws_access_key_id": data["aws_access_key_id"],
        "state": "EXPIRED" if key_expired(data, now) else "ACTIVE",
        "expires_at": data.get("expires_at"),
    }


# Roles that let a key write, read and delete a bucket's objects, as on Nebius (port.BUCKET_OBJECT_ROLE):
# the storage service's probe and the SeaweedFS identities (seaweed.py) allow exactly these.
BUCKET_ROLES = frozenset({"storage.object-editor", "storage.editor", "editor", "admin"})


def key_expired(data: dict[str, Any], now: float) -> bool:
    """Whether an access key's data says it has expired (a temporary key past its `expires_at`)."""
    expires = data.get("expires_at")
    return isinstance(expires, int | float) and now >= expires


def _filesystem(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "project_id": row["project_id"],
        "size_bytes": data["size_bytes"],
        "state": "READY" if _is_ready(row, now) else "CREATING",
        "labels": data.get("labels", {}),
        "disk_type": data.get("disk_type", "NETWORK_SSD"),
        "block_size_bytes": data.get("block_size_bytes", 4096),
    }


def _gpu_cluster(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "project_id": row["project_id"],
        "fabric": data["fabric"],
        "state": "READY" if _is_ready(row, now) else "CREATING",
    }


def _cluster(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    public = data.get("public_endpoint", True)
    return {
        **_common(row),
        "project_id": row["project_id"],
        "state": "RUNNING" if _is_ready(row, now) else "PROVISIONING",
        "endpoint": endpoint_for(row["id"], row["region"])
        if public
        else private_endpoint_for(row["id"], row["region"]),
        "k8s_version": data.get("k8s_version", ""),
        "subnet_id": data.get("subnet_id", ""),
        "labels": data.get("labels", {}),
        "region": row["region"],
        "etcd_cluster_size": data.get("etcd_cluster_size", 3),
        # What the recipe installed into the cluster, and faults injected into its nodes: the cluster's
        # Kubernetes agent (kube/agent.py) shapes the API server's objects from these.
        "addons": data.get("addons", {}),
        "node_faults": data.get("node_faults", {}),
        # Nodes Nebius replaced (simulator/node_health.py): base name -> how many times; kube/shapes.py names
        # the node that joined in its place.
        **({"node_replacements": data["node_replacements"]} if data.get("node_replacements") else {}),
        # soperator clusters: the Slurm role faults (`local-cloud fault slurm`), kube/slurm.py reads them.
        **({"slurm_faults": data["slurm_faults"]} if data.get("slurm_faults") else {}),
        # ... and the Slurm jobs running on its workers (node -> count, `set_slurm_jobs`): a drain of a
        # worker stays NodeDraining while it runs one (kube/slurm.py).
        **({"slurm_jobs": data["slurm_jobs"]} if data.get("slurm_jobs") else {}),
        # RTX clusters: the GPU operator's driver faults (`local-cloud fault driver`), kube/shapes.py.
        **({"driver_faults": data["driver_faults"]} if data.get("driver_faults") else {}),
    }


def _node_group(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    ready = _is_ready(row, now)
    return {
        **_common(row),
        "cluster_id": row["parent_id"],
        "project_id": row["project_id"],
        "state": "RUNNING" if ready else "PROVISIONING",
        "target_node_count": data["node_count"],
        "ready_node_count": data["node_count"] if ready else 0,
        "platform": data.get("platform", ""),
        "preset": data.get("preset", ""),
        "preemptible": data.get("preemptible", False),
        "reservation_policy": data.get("reservation_policy", ""),
        "reservation_ids": list(data.get("reservation_ids", [])),
        "disk_size_gib": data.get("disk_size_gib", 0),
        "conditions": list(data.get("conditions", [])),
        "disk_type": data.get("disk_type", "NETWORK_SSD"),
        "gpu_cluster_id": data.get("gpu_cluster_id", ""),
        "filesystems": list(data.get("filesystems", [])),
        "mount": data.get("mount"),
        "labels": data.get("labels", {}),
        "version": data.get("k8s_version", ""),
    }


def _labelled(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    """Instances, disks, registries and IAM groups: what a user put into a project."""
    record = {**_common(row), "project_id": row["project_id"], "labels": data.get("labels", {})}
    kind = row["kind"]
    if kind == "instance":
        record.update(platform=data.get("platform", ""), preset=data.get("preset", ""), state="RUNNING")
    elif kind == "disk":
        record.update(size_bytes=data.get("size_bytes", 0), state="READY")
    else:  # registry, iam_group
        record["state"] = "ACTIVE"
    return record


def _security_group(row: sqlite3.Row, data: dict[str, Any], now: float) -> dict[str, Any]:
    return {
        **_common(row),
        "project_id": row["project_id"],
        "network_id": data["network_id"],
        "default": bool(data.get("default")),
        "state": "READY",
        "labels": data.get("labels", {}),
    }


_BUILDERS = {
    "project": _project,
    "network": _network,
    "subnet": _subnet,
    "bucket": _bucket,
    "service_account": _service_account,
    "access_key": _access_key,
    "filesystem": _filesystem,
    "gpu_cluster": _gpu_cluster,
    "cluster": _cluster,
    "node_group": _node_group,
    "instance": _labelled,
    "disk": _labelled,
    "registry": _labelled,
    "iam_group": _labelled,
    "security_group": _security_group,
}


def to_record(row: sqlite3.Row, now: float) -> dict[str, Any]:
    data = data_of(row)
    record = _BUILDERS[row["kind"]](row, data, now)
    if data.get("deleting_until") is not None and "state" in record:
        record["state"] = "DELETING"  # deleted, not yet gone (the `delete_lag_seconds` setting)
    return record


def to_inventory_record(row: sqlite3.Row, now: float) -> dict[str, Any]:
    """The record plus bookkeeping the inventory shows (creation time, idempotency key)."""
    record = to_record(row, now)
    record["created_at"] = _iso(row["created_at"])
    if row["idempotency_key"]:
        record["idempotency_key"] = row["idempotency_key"]
    return record
