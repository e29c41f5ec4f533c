"""Administration of the local cloud: its settings, fault injection and the full inventory, each a service
over the store.

These are not cloud API calls (no fault injection applies to them); the `local-cloud` CLI uses them.
"""

from __future__ import annotations

import json
import os
from typing import Any

from npa_pulumi.cloud.errors import InvalidArgument
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import db, faults, records
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import is_deleted

ENV_WAIT_TIMEOUT = "NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S"
# `kubernetes_api`: 1 runs a real Kubernetes API server (with kwok nodes) behind every cluster, 0 skips it
# (for tests that never look inside a cluster); $NPA_LOCAL_CLOUD_KUBERNETES_API overrides the setting.
ENV_KUBERNETES_API = "NPA_LOCAL_CLOUD_KUBERNETES_API"
SETTINGS: dict[str, float] = {
    "provisioning_seconds": 0.0,
    "wait_timeout_seconds": 30.0,
    "kubernetes_api": 1.0,
    # 1: a new project comes with the cloud's default topology (`default-network` and one
    # `default-subnet-*` in it), as Nebius makes for a project; 0: a new project is empty.
    "project_default_network": 0.0,
    # Eventual consistency: a deleted project, network, subnet, bucket, service account or access key stays
    # visible (state DELETING, still holding its name and counting as its parent's child) this many seconds,
    # as a real control plane's deletes complete asynchronously; 0: gone at once.
    "delete_lag_seconds": 0.0,
}


class Settings:
    """The cloud's settings (`SETTINGS`, kept in its database's meta table) and what they decide."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def settings(self) -> dict[str, Any]:
        with self.store.connection() as conn:
            stored = {key: float(db.get_meta(conn, key) or default) for key, default in SETTINGS.items()}
            return {
                **stored,
                "tenant_id": db.get_meta(conn, "tenant_id"),
                "regions": json.loads(db.get_meta(conn, "regions") or "[]"),
                "fixture_source": db.get_meta(conn, "fixture_source"),
                "directory": str(self.store.directory),
                "wait_timeout_env_override": os.environ.get(ENV_WAIT_TIMEOUT),
                "kubernetes_api_env_override": os.environ.get(ENV_KUBERNETES_API),
            }

    def kubernetes_api_enabled(self) -> bool:
        env = os.environ.get(ENV_KUBERNETES_API, "").strip().lower()
        if env:
            return env not in ("0", "false", "no", "off")
        return bool(self.settings()["kubernetes_api"])

    def set_setting(self, name: str, value: float) -> None:
        """provisioning_seconds: how long new clusters, node groups, filesystems and GPU clusters take;
        wait_timeout_seconds: how long a create waits for them (see `wait_timeout`)."""
        if name not in SETTINGS:
            raise ValueError(f"unknown setting {name!r}; choose one of {', '.join(SETTINGS)}")
        if name == "kubernetes_api" and value not in (0, 1):
            raise ValueError("kubernetes_api is 1 (a Kubernetes API server per cluster) or 0 (none)")
        if name == "project_default_network" and value not in (0, 1):
            raise ValueError("project_default_network is 1 (new projects get a default network) or 0")
        if value < 0 or (name == "wait_timeout_seconds" and value == 0):
            raise ValueError(
                f"{name} must be {'positive' if name == 'wait_timeout_seconds' else 'non-negative'}"
            )
        with self.store.connection(write=True) as conn:
            db.set_meta(conn, name, repr(float(value)))

    def wait_timeout(self, explicit: float | None = None) -> float:
        """The bound on waiting for RUNNING: explicit > $NPA_LOCAL_CLOUD_WAIT_TIMEOUT_S > the setting."""
        if explicit is not None:
            return float(explicit)
        env = os.environ.get(ENV_WAIT_TIMEOUT)
        if env:
            try:
                return float(env)
            except ValueError:
                raise InvalidArgument(f"{ENV_WAIT_TIMEOUT}={env!r} is not a number of seconds") from None
        return float(self.settings()["wait_timeout_seconds"])


class FaultInjection:
    """Faults armed on operations (faults.py) and on a cluster's API server."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def add_fault(
        self,
        op: str,
        error_kind: str | None,
        *,
        count: int | None = 1,
        latency_ms: int = 0,
        message: str = "",
    ) -> dict[str, Any]:
        """Fail (error_kind) and/or slow (latency_ms) the next `count` calls of `op` (`*`: any);
        `count=None` keeps the fault armed until cleared."""
        if op != faults.ANY_OPERATION and op not in faults.OPERATIONS:
            raise ValueError(f"unknown operation {op!r}; choose one of {', '.join(faults.OPERATIONS)} or '*'")
        with self.store.connection(write=True) as conn:
            return faults.add(
                conn, op=op, error_kind=error_kind, count=count, latency_ms=latency_ms, message=message
            )

    def list_faults(self) -> list[dict[str, Any]]:
        with self.store.connection() as conn:
            return faults.list_all(conn)

    def clear_faults(self, op: str | None = None) -> int:
        with self.store.connection(write=True) as conn:
            return faults.clear(conn, op)

    def set_api_fault(self, cluster_id: str, fault: str, active: bool = True) -> None:
        """`unreachable`: the cluster's API server stops answering (its process is paused, so clients
        time out as they would behind a broken network) until cleared."""
        from npa_pulumi.simulator.kube import lifecycle

        if fault != "unreachable":
            raise ValueError(f"unknown API fault {fault!r}; the API fault is `unreachable`")
        if not lifecycle.pause_api(self.store.directory, cluster_id, paused=active):
            raise ValueError(f"cluster {cluster_id} has no running Kubernetes API server")


class Inventory:
    """Everything in the cloud at once, as `local-cloud show` lists it."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def inventory(self) -> dict[str, list[dict[str, Any]]]:
        """Everything in the cloud, as `local-cloud show --output json` prints it: one list per kind,
        plus quotas and capacity block groups with their current usage. Never a secret."""
        with self.store.op("inventory", {}, write=False, inject=False, reconcile=True) as ctx:
            out: dict[str, list[dict[str, Any]]] = {name: [] for name in records.KIND_LISTS.values()}
            from npa_pulumi.simulator.kube import lifecycle

            apis = lifecycle.running(self.store.directory)
            for row in ctx.conn.execute("SELECT * FROM resources ORDER BY created_at, id"):
                if is_deleted(row, ctx.now):
                    continue  # its delete lag has passed: gone
                record = records.to_inventory_record(row, ctx.now)
                if row["kind"] == "cluster":
                    record["kube_api"] = apis.get(row["id"], "")  # "" when no API server runs for it
                out[records.KIND_LISTS[row["kind"]]].append(record)
            quota_rows = ctx.conn.execute("SELECT * FROM quotas ORDER BY position").fetchall()
            out["quotas"] = [acct.quota_record(ctx.conn, row, ctx.tenant_id) for row in quota_rows]
            block_rows = ctx.conn.execute("SELECT * FROM capacity_blocks ORDER BY position").fetchall()
            out["capacity_block_groups"] = [acct.capacity_block_record(ctx.conn, row) for row in block_rows]
            return out
