"""The bounded waits the local cloud's Terraform providers (simulator/tfproviders) and soperator's stand-in
recipe rely on: `provision` is what their creates call (create a cluster or node group, wait until RUNNING
within a bound, and remove the object again when it does not get there); RUNNING in mk8s means a reachable
API server, and for a node group, nodes registered and Ready.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from npa_pulumi.cloud.errors import CloudError, CloudRequest, NotFound, OperationTimeout, QuotaExceeded
from npa_pulumi.simulator.admin import Settings
from npa_pulumi.simulator.kube import lifecycle as kube_lifecycle
from npa_pulumi.simulator.mk8s import Mk8s, delete_cluster_rows, ensure_api
from npa_pulumi.simulator.store import Store

_POLL_S = 0.1


class Provisioning:
    """Creating a cluster or node group and waiting for it, over the store and the mk8s service."""

    def __init__(self, store: Store, settings: Settings, mk8s: Mk8s) -> None:
        self.store = store
        self.settings = settings
        self.mk8s = mk8s

    def _peek(self, kind: str, resource_id: str) -> dict[str, Any]:
        """A read that is not an API call of its own (no fault injection)."""
        with self.store.op(
            f"wait_{kind}", {"id": resource_id}, write=False, inject=False, reconcile=True
        ) as ctx:
            return ctx.fetch(kind, resource_id)

    def wait_until_running(self, kind: str, resource_id: str, timeout_s: float) -> dict[str, Any]:
        """Poll a cluster or node group until RUNNING. A group held back by quota fails with
        QuotaExceeded naming the quota; anything else still PROVISIONING fails with OperationTimeout."""
        deadline = time.monotonic() + timeout_s
        while True:
            record = self._peek(kind, resource_id)
            if record["state"] == "RUNNING" or time.monotonic() >= deadline:
                break
            time.sleep(min(_POLL_S, max(0.0, deadline - time.monotonic())))
        if record["state"] == "RUNNING":
            return record
        request = CloudRequest(f"wait_{kind}", {"id": resource_id, "timeout_s": timeout_s})
        label = f"{kind.replace('_', ' ')} {record['name']} ({resource_id})"
        conditions = record.get("conditions") or []
        if conditions:
            first = conditions[0]
            message = f"{label} stayed PROVISIONING for {timeout_s:g}s: {first['kind']}: {first['message']}"
            raise QuotaExceeded(message, request)
        raise OperationTimeout(f"{label} was still {record['state']} after {timeout_s:g}s", request)

    def provision(self, /, kind: str, wait_timeout_s: float | None = None, **request: Any) -> dict[str, Any]:
        """Create a cluster or node group and wait until it is RUNNING, as the Terraform provider does.
        On failure the object is deleted again: a failed local-exec taints its resource, and Terraform
        never runs the destroy-time provisioner of a tainted resource, so nothing else would. (`self` is
        positional-only so that the façade's typed delegate, services.Served, can take `**request`.)"""
        if kind == "cluster":
            record = self.mk8s.create_cluster(**request)
        elif kind == "node_group":
            record = self.mk8s.create_node_group(**request)
        else:
            raise ValueError(f"cannot provision a {kind}")
        timeout = self.settings.wait_timeout(wait_timeout_s)
        deadline = time.monotonic() + timeout
        try:
            running = self.wait_until_running(kind, record["id"], timeout)
            if self.settings.kubernetes_api_enabled():
                self._wait_inside(kind, running, max(1.0, deadline - time.monotonic()))
            return running
        except CloudError:
            with contextlib.suppress(NotFound):
                self._roll_back(kind, record["id"])
            raise

    def _wait_inside(self, kind: str, record: dict[str, Any], timeout_s: float) -> None:
        """RUNNING in mk8s means a reachable API server, and for a node group, nodes registered and Ready."""
        if kind == "cluster":
            ensure_api(self.store.directory, record["id"], timeout_s)
            return
        access = ensure_api(self.store.directory, record["cluster_id"], timeout_s)
        try:
            kube_lifecycle.wait_for_nodes(access, record["id"], int(record["target_node_count"]), timeout_s)
        except kube_lifecycle.ControlPlaneError as err:
            raise OperationTimeout(str(err), CloudRequest("wait_node_group", {"id": record["id"]})) from None

    def _roll_back(self, kind: str, resource_id: str) -> None:
        with self.store.op(f"rollback_{kind}", {"id": resource_id}, write=True, inject=False) as ctx:
            ctx.row(kind, resource_id)
            if kind == "cluster":
                delete_cluster_rows(ctx, resource_id)
            else:
                ctx.delete_row(resource_id)
        if kind == "cluster":
            kube_lifecycle.stop(self.store.directory, resource_id)
