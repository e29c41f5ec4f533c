"""Managed Kubernetes: clusters and node groups, and the bounded waits the stand-in recipe relies on.

A cluster is PROVISIONING until the simulated provisioning time has passed, then RUNNING. A node group
additionally waits for its instances to fit the quota or its capacity block (see `scheduling`), so a
quota-starved group stays PROVISIONING with a QuotaFailure condition instead of failing — the real
behaviour. `provision` is what the recipe's create-time provisioners call: create, wait until RUNNING
within a bound, and remove the object again when it does not get there.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from npa_pulumi.cloud.errors import (
    CloudError,
    CloudRequest,
    FailedPrecondition,
    InvalidArgument,
    NotFound,
    OperationTimeout,
    QuotaExceeded,
    Unavailable,
)
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import records, scheduling
from npa_pulumi.simulator.admin import ENV_WAIT_TIMEOUT, AdminMixin
from npa_pulumi.simulator.base import OpContext, clean_labels
from npa_pulumi.simulator.kube import binaries as kube_binaries
from npa_pulumi.simulator.kube import lifecycle as kube_lifecycle
from npa_pulumi.simulator.kube.controlplane import Access

DEFAULT_K8S_VERSION = "1.32"
RESERVATION_POLICIES = ("", "AUTO", "FORBID", "STRICT")
ATTACH_MODES = ("READ_WRITE", "READ_ONLY")
_POLL_S = 0.1
NODE_FAULTS = (
    "not_ready",
    "gpu_missing",
    "gpu_error",
    "reboot",
    "pod_failure",
    "mig_not_ready_taint",
    "storage_unavailable",
    "mig_disabled",
    "nvlink_degraded",
    "ib_port_down",
    "maintenance_scheduled",  # Nebius' NebiusMaintenanceScheduled condition (simulator/node_health.py)
    "boot_disk_io_error",  # Nebius' NebiusBootDiskIOError condition
    "ib_link_degraded",
    "stale_device_plugin",  # the device plugin's stale resources (simulator/kube/device_plugin.py)
)
NODE_EVENTS = ("reboot", "mig_not_ready_taint")  # counted, not switched on and off
TIMED_NODE_FAULTS = ("stale_device_plugin",)  # on since a time (cleared like a state)
SLURM_FAULTS = ("controller_down", "login_down")
# The GPU operator's driver (RTX clusters): `stale_template` is an OnDelete update of the driver DaemonSet
# that leaves its pods on the older template; `no_repo_mount` renders the driver without the mounts of the
# fleet's package-repository files (kube/shapes.py applies both).
DRIVER_FAULTS = ("stale_template", "no_repo_mount")


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


class Mk8sMixin(AdminMixin):
    # ------------------------------------------------------------------ clusters

    def create_cluster(
        self,
        project_id: str,
        name: str,
        subnet_id: str,
        k8s_version: str = "",
        public_endpoint: bool = True,
        etcd_cluster_size: int = 3,
        labels: dict[str, str] | None = None,
        tenant_id: str | None = None,
        region: str | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """`tenant_id` / `region`, when given, must match the project's (the recipe passes its TF_VARs)."""
        params = {
            "project_id": project_id,
            "name": name,
            "subnet_id": subnet_id,
            "k8s_version": k8s_version or "",
            "public_endpoint": bool(public_endpoint),
            "etcd_cluster_size": etcd_cluster_size,
            "labels": clean_labels(labels),
        }
        with self._op("create_cluster", params, write=True, timeout_s=timeout_s) as ctx:
            if tenant_id is not None:
                self._check_tenant(ctx, tenant_id)
            project = self._project_row(ctx, project_id)
            if region is not None and region != project["region"]:
                raise InvalidArgument(f"project {project_id} is in {project['region']}, not {region}")
            subnet = self._row(ctx, "subnet", subnet_id)
            if subnet["project_id"] != project_id:
                raise InvalidArgument(f"subnet {subnet_id} is not in project {project_id}")
            stored = {k: v for k, v in params.items() if k not in ("project_id", "name")}
            stored["k8s_version"] = k8s_version or DEFAULT_K8S_VERSION  # the service picks when unset
            return self._create(
                ctx,
                "cluster",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data=stored,
                params=params,
                charges=[acct.Charge(acct.MK8S_CLUSTER_COUNT, 1)],
                ready_at=ctx.now + ctx.provisioning_seconds,
            )

    def get_cluster(self, cluster_id: str) -> dict[str, Any]:
        with self._op("get_cluster", {"cluster_id": cluster_id}, write=False) as ctx:
            return self._fetch(ctx, "cluster", cluster_id)

    def list_clusters(self, project_id: str) -> list[dict[str, Any]]:
        with self._op("list_clusters", {"project_id": project_id}, write=False) as ctx:
            self._project_row(ctx, project_id)
            return self._list(ctx, "cluster", "project_id", project_id)

    def delete_cluster(self, cluster_id: str, timeout_s: float | None = None) -> None:
        """Deleting a cluster deletes its node groups with it, as mk8s does, and stops its API server."""
        with self._op("delete_cluster", {"cluster_id": cluster_id}, write=True, timeout_s=timeout_s) as ctx:
            self._row(ctx, "cluster", cluster_id)
            self._delete_cluster_rows(ctx, cluster_id)
        kube_lifecycle.stop(self.directory, cluster_id)

    # ------------------------------------------------------------------ inside the cluster

    def cluster_snapshot(self, cluster_id: str) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The cluster and its node groups, or None once the cluster is gone: what the cluster's
        Kubernetes agent mirrors into the API server. Not an API call (no faults apply)."""
        with self._op(
            "cluster_snapshot", {"cluster_id": cluster_id}, write=False, inject=False, reconcile=True
        ) as ctx:
            row = ctx.conn.execute(
                "SELECT * FROM resources WHERE id = ? AND kind = 'cluster'", (cluster_id,)
            ).fetchone()
            if row is None:
                return None
            return records.to_record(row, ctx.now), self._list(ctx, "node_group", "parent_id", cluster_id)

    def set_cluster_addons(self, cluster_id: str, addons: dict[str, Any]) -> dict[str, Any]:
        """What the recipe installs into the cluster (its Helm releases): `gpu_driver` (managed-image |
        operator | ""), `filestore`, `mig` ({strategy, config}), `kuberay` ({worker_replicas, ...}),
        `rtx_driver` (the RTX profile's {platform, preset, values, revision})."""
        params = {"cluster_id": cluster_id, "addons": addons}
        with self._op("set_cluster_addons", params, write=True) as ctx:
            row = self._row(ctx, "cluster", cluster_id)
            data = records.data_of(row)
            data["addons"] = dict(addons)
            if isinstance(addons.get("kuberay"), str):  # the recipe sends it as JSON text
                data["addons"]["kuberay"] = json.loads(addons["kuberay"] or "{}") or {"worker_replicas": 1}
            if isinstance(addons.get("rtx_driver"), str):  # as JSON text too
                data["addons"]["rtx_driver"] = json.loads(addons["rtx_driver"] or "{}")
            ctx.conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), cluster_id))
            return self._fetch(ctx, "cluster", cluster_id)

    def set_node_fault(self, cluster_id: str, node: str, fault: str, active: bool = True) -> dict[str, Any]:
        """Inject (or clear) a fault on one node of a cluster; the cluster's agent applies it to the API.
        `reboot` (the node's boot id changes) and `mig_not_ready_taint` (the GPU operator's temporary
        taint left on a node) are events; the others are states."""
        if fault not in NODE_FAULTS:
            raise InvalidArgument(f"unknown node fault {fault!r}; choose one of {', '.join(NODE_FAULTS)}")
        with self._op(
            "set_node_fault", {"cluster_id": cluster_id, "node": node}, write=True, inject=False
        ) as ctx:
            row = self._row(ctx, "cluster", cluster_id)
            data = records.data_of(row)
            faults_of = data.setdefault("node_faults", {}).setdefault(node, {})
            if fault == "reboot":
                faults_of["reboots"] = int(faults_of.get("reboots", 0)) + 1
            elif fault in NODE_EVENTS:
                faults_of[fault] = int(faults_of.get(fault, 0)) + 1
            elif fault in TIMED_NODE_FAULTS and active:
                faults_of[fault] = ctx.now  # what happened after it (a pod's restart) is judged against it
            elif active:
                faults_of[fault] = True
            else:
                faults_of.pop(fault, None)
            ctx.conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), cluster_id))
            return dict(faults_of)

    def set_slurm_fault(self, cluster_id: str, fault: str, active: bool = True) -> dict[str, Any]:
        """Inject (or clear) a fault of a soperator cluster's Slurm roles (`controller_down`, `login_down`):
        the agent makes that role's nodes NotReady and its operator reports the Slurm cluster accordingly
        (npa_pulumi/simulator/kube/slurm.py)."""
        return self._set_cluster_fault(cluster_id, "slurm", SLURM_FAULTS, fault, active)

    def set_driver_fault(self, cluster_id: str, fault: str, active: bool = True) -> dict[str, Any]:
        """Inject (or clear) a fault of the GPU operator's driver on an RTX cluster (DRIVER_FAULTS); the
        cluster's agent renders the driver DaemonSet accordingly (npa_pulumi/simulator/kube/shapes.py)."""
        return self._set_cluster_fault(cluster_id, "driver", DRIVER_FAULTS, fault, active)

    def _set_cluster_fault(
        self, cluster_id: str, kind: str, allowed: tuple[str, ...], fault: str, active: bool
    ) -> dict[str, Any]:
        """Switch one fault of a cluster's `kind` (slurm, driver) on or off: operation `set_<kind>_fault`,
        recorded under `<kind>_faults`; the current set."""
        if fault not in allowed:
            raise InvalidArgument(f"unknown {kind} fault {fault!r}; choose one of {', '.join(allowed)}")
        with self._op(f"set_{kind}_fault", {"cluster_id": cluster_id}, write=True, inject=False) as ctx:
            row = self._row(ctx, "cluster", cluster_id)
            data = records.data_of(row)
            faults = data.setdefault(f"{kind}_faults", {})
            if active:
                faults[fault] = True
            else:
                faults.pop(fault, None)
            ctx.conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), cluster_id))
            return dict(faults)

    def get_cluster_credentials(self, cluster_id: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Administrator credentials for the cluster's API server (a client certificate), starting the
        server if it is not running. Secret: callers keep the key out of logs and plaintext state."""
        with self._op("get_cluster_credentials", {"cluster_id": cluster_id}, write=False) as ctx:
            cluster = self._fetch(ctx, "cluster", cluster_id)
        if cluster["state"] != "RUNNING":
            raise FailedPrecondition(f"cluster {cluster_id} is {cluster['state']}, not RUNNING")
        if not self.kubernetes_api_enabled():
            raise FailedPrecondition(
                "this local cloud runs no Kubernetes API servers (setting kubernetes_api is 0)"
            )
        access = self._ensure_api(cluster_id, self.wait_timeout(timeout_s))
        return {
            "server": access.server,
            "ca_pem": Path(access.ca_file).read_text(),
            "client_certificate_pem": Path(access.cert_file).read_text(),
            "client_key_pem": Path(access.key_file).read_text(),
        }

    def _ensure_api(self, cluster_id: str, timeout_s: float) -> Access:
        try:
            return kube_lifecycle.ensure_running(self.directory, cluster_id, timeout_s)
        except (kube_lifecycle.ControlPlaneError, kube_binaries.KubeBinariesMissing) as err:
            raise Unavailable(
                str(err), CloudRequest("get_cluster_credentials", {"cluster_id": cluster_id})
            ) from None

    def _delete_cluster_rows(self, ctx: OpContext, cluster_id: str) -> None:
        groups = ctx.conn.execute(
            "SELECT id FROM resources WHERE kind = 'node_group' AND parent_id = ?", (cluster_id,)
        ).fetchall()
        for group in groups:
            self._delete_row(ctx, group["id"])
        self._delete_row(ctx, cluster_id)

    # ------------------------------------------------------------------ node groups

    def create_node_group(
        self,
        cluster_id: str,
        name: str,
        node_count: int,
        platform: str,
        preset: str = "",
        disk_type: str = "NETWORK_SSD",
        disk_size_gib: int = 128,
        preemptible: bool = False,
        public_ips: bool = False,
        reservation_policy: str | None = None,
        reservation_ids: list[str] | None = None,
        gpu_cluster_id: str | None = None,
        filesystems: list[dict[str, str]] | None = None,
        mount: dict[str, str] | None = None,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """Accepted even when the instances exceed quota: the group then stays PROVISIONING with a
        QuotaFailure condition until quota frees up, exactly as the real service behaves.

        `filesystems` are attachments `{filesystem_id, attach_mode, mount_tag}`; `mount` records how the
        nodes mount the shared filesystem (`{path, tag, fs_type, options}`), so tests can inspect it."""
        params = {
            "cluster_id": cluster_id,
            "name": name,
            "node_count": node_count,
            "platform": platform,
            "preset": preset or "",
            "disk_type": disk_type,
            "disk_size_gib": disk_size_gib,
            "preemptible": bool(preemptible),
            "public_ips": bool(public_ips),
            "reservation_policy": (reservation_policy or "").strip().upper(),
            "reservation_ids": list(reservation_ids or []),
            "gpu_cluster_id": gpu_cluster_id or "",
            "filesystems": list(filesystems or []),
            "mount": mount,
            "labels": clean_labels(labels),
        }
        with self._op("create_node_group", params, write=True, timeout_s=timeout_s) as ctx:
            replayed = self._replay(ctx, "node_group", idempotency_key, params)
            if replayed is not None:
                return records.to_record(replayed, ctx.now)
            cluster = self._row(ctx, "cluster", cluster_id)
            self._check_node_group_request(ctx, cluster, params)
            self._check_name_free(ctx, "node_group", cluster_id, name)
            stored = {k: v for k, v in params.items() if k not in ("cluster_id", "name")}
            rid = self._insert(
                ctx,
                "node_group",
                name=name,
                scope=cluster_id,
                project_id=cluster["project_id"],
                parent_id=cluster_id,
                region=cluster["region"],
                key=idempotency_key,
                data={**stored, "conditions": []},
                params=params,
                ready_at=records.WAITING_FOR_QUOTA,
            )
            row = self._row(ctx, "node_group", rid)
            scheduling.try_start(ctx.conn, row, ctx.tenant_id, ctx.now, ctx.provisioning_seconds)
            return self._fetch(ctx, "node_group", rid)

    def _check_node_group_request(self, ctx: OpContext, cluster: sqlite3.Row, params: dict[str, Any]) -> None:
        if not _is_count(params["node_count"]):
            raise InvalidArgument("node_count must be a non-negative integer")
        if not params["platform"]:
            raise InvalidArgument("a node group needs a platform")
        if not _is_count(params["disk_size_gib"]) or params["disk_size_gib"] == 0:
            raise InvalidArgument("disk_size_gib must be a positive integer")
        policy, block_ids = params["reservation_policy"], params["reservation_ids"]
        if policy not in RESERVATION_POLICIES:
            raise InvalidArgument(f"reservation policy {policy!r} is not AUTO, FORBID or STRICT")
        if policy in ("", "FORBID") and block_ids:
            raise InvalidArgument(f"reservation policy {policy or '(none)'} takes no reservation ids")
        for block_id in block_ids:
            self._check_block_fits(ctx, block_id, cluster["region"], params["platform"])
        if params["gpu_cluster_id"]:
            gpu_cluster = self._row(ctx, "gpu_cluster", params["gpu_cluster_id"])
            if gpu_cluster["project_id"] != cluster["project_id"]:
                raise InvalidArgument(f"GPU cluster {params['gpu_cluster_id']} is in another project")
        for attachment in params["filesystems"]:
            filesystem = self._row(ctx, "filesystem", str(attachment.get("filesystem_id", "")))
            if filesystem["project_id"] != cluster["project_id"]:
                raise InvalidArgument(f"filesystem {filesystem['id']} is in another project")
            if attachment.get("attach_mode", "READ_WRITE") not in ATTACH_MODES:
                raise InvalidArgument(f"attach_mode must be one of {', '.join(ATTACH_MODES)}")

    def _check_block_fits(self, ctx: OpContext, block_id: str, region: str, platform: str) -> None:
        block = self._block_row(ctx, block_id)
        if block["region"] != region:
            raise FailedPrecondition(f"capacity block group {block_id} is in {block['region']}, not {region}")
        if block["platform"] != platform:
            raise FailedPrecondition(
                f"capacity block group {block_id} reserves {block['platform']}, not {platform}"
            )
        if block["state"] not in ("", "ACTIVE"):
            raise FailedPrecondition(f"capacity block group {block_id} is {block['state']}, not ACTIVE")

    def get_node_group(self, node_group_id: str) -> dict[str, Any]:
        params = {"node_group_id": node_group_id}
        with self._op("get_node_group", params, write=False, reconcile=True) as ctx:
            return self._fetch(ctx, "node_group", node_group_id)

    def list_node_groups(self, cluster_id: str) -> list[dict[str, Any]]:
        with self._op("list_node_groups", {"cluster_id": cluster_id}, write=False, reconcile=True) as ctx:
            self._row(ctx, "cluster", cluster_id)
            return self._list(ctx, "node_group", "parent_id", cluster_id)

    def list_project_node_groups(self, project_id: str) -> list[dict[str, Any]]:
        """Every node group of the project's clusters in one query (what fleet-wide reads batch on)."""
        params = {"project_id": project_id}
        with self._op("list_project_node_groups", params, write=False, reconcile=True) as ctx:
            self._project_row(ctx, project_id)
            return self._list(ctx, "node_group", "project_id", project_id)

    def resize_node_group(self, node_group_id: str, node_count: int) -> dict[str, Any]:
        """Change a node group's size in place, as the console or the mk8s API can behind a fleet's back.
        Its instances are released and charged again at the new size (the group waits, PROVISIONING with a
        QuotaFailure condition, when the new size does not fit)."""
        params = {"node_group_id": node_group_id, "node_count": node_count}
        with self._op("resize_node_group", params, write=True) as ctx:
            if not _is_count(node_count):
                raise InvalidArgument("node_count must be a non-negative integer")
            row = self._row(ctx, "node_group", node_group_id)
            data = records.data_of(row)
            data["node_count"] = node_count
            acct.release(ctx.conn, node_group_id)
            ctx.conn.execute(
                "UPDATE resources SET ready_at = ?, data = ? WHERE id = ?",
                (records.WAITING_FOR_QUOTA, json.dumps(data), node_group_id),
            )
            scheduling.try_start(
                ctx.conn,
                self._row(ctx, "node_group", node_group_id),
                ctx.tenant_id,
                ctx.now,
                ctx.provisioning_seconds,
            )
            return self._fetch(ctx, "node_group", node_group_id)

    def edit_node_group_template(
        self,
        node_group_id: str,
        preset: str | None = None,
        preemptible: bool | None = None,
        reservation_policy: str | None = None,
        reservation_ids: list[str] | None = None,
        disk_size_gib: int | None = None,
    ) -> dict[str, Any]:
        """Change a node group's template in place, as the console or the mk8s API can behind a fleet's
        back (a preset, preemptibility, the reservation binding or the boot disk): nothing in the fleet's
        stacks records it, so only a live inventory shows it. Instances are charged again as on a resize."""
        params: dict[str, Any] = {"node_group_id": node_group_id}
        changes: dict[str, Any] = {}
        if preset is not None:
            changes["preset"] = preset
        if preemptible is not None:
            changes["preemptible"] = bool(preemptible)
        if reservation_policy is not None:
            changes["reservation_policy"] = reservation_policy.strip().upper()
        if reservation_ids is not None:
            changes["reservation_ids"] = [str(r) for r in reservation_ids]
        if disk_size_gib is not None:
            if not _is_count(disk_size_gib) or disk_size_gib <= 0:
                raise InvalidArgument("disk_size_gib must be a positive integer")
            changes["disk_size_gib"] = disk_size_gib
        with self._op("edit_node_group_template", {**params, **changes}, write=True) as ctx:
            if changes.get("reservation_policy", "") not in ("", "AUTO", "FORBID", "STRICT"):
                raise InvalidArgument("reservation_policy must be one of AUTO, FORBID, STRICT (or empty)")
            row = self._row(ctx, "node_group", node_group_id)
            data = {**records.data_of(row), **changes}
            acct.release(ctx.conn, node_group_id)
            ctx.conn.execute(
                "UPDATE resources SET ready_at = ?, data = ? WHERE id = ?",
                (records.WAITING_FOR_QUOTA, json.dumps(data), node_group_id),
            )
            scheduling.try_start(
                ctx.conn,
                self._row(ctx, "node_group", node_group_id),
                ctx.tenant_id,
                ctx.now,
                ctx.provisioning_seconds,
            )
            return self._fetch(ctx, "node_group", node_group_id)

    def delete_node_group(self, node_group_id: str, timeout_s: float | None = None) -> None:
        params = {"node_group_id": node_group_id}
        with self._op("delete_node_group", params, write=True, timeout_s=timeout_s) as ctx:
            self._row(ctx, "node_group", node_group_id)
            self._delete_row(ctx, node_group_id)

    # ------------------------------------------------------------------ bounded waits, for the recipe

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

    def _peek(self, kind: str, resource_id: str) -> dict[str, Any]:
        """A read that is not an API call of its own (no fault injection)."""
        with self._op(f"wait_{kind}", {"id": resource_id}, write=False, inject=False, reconcile=True) as ctx:
            return self._fetch(ctx, kind, resource_id)

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

    def provision(self, kind: str, wait_timeout_s: float | None = None, **request: Any) -> dict[str, Any]:
        """Create a cluster or node group and wait until it is RUNNING, as the Terraform provider does.
        On failure the object is deleted again: a failed local-exec taints its resource, and Terraform
        never runs the destroy-time provisioner of a tainted resource, so nothing else would."""
        if kind == "cluster":
            record = self.create_cluster(**request)
        elif kind == "node_group":
            record = self.create_node_group(**request)
        else:
            raise ValueError(f"cannot provision a {kind}")
        timeout = self.wait_timeout(wait_timeout_s)
        deadline = time.monotonic() + timeout
        try:
            running = self.wait_until_running(kind, record["id"], timeout)
            if self.kubernetes_api_enabled():
                self._wait_inside(kind, running, max(1.0, deadline - time.monotonic()))
            return running
        except CloudError:
            with contextlib.suppress(NotFound):
                self._roll_back(kind, record["id"])
            raise

    def _wait_inside(self, kind: str, record: dict[str, Any], timeout_s: float) -> None:
        """RUNNING in mk8s means a reachable API server, and for a node group, nodes registered and Ready."""
        if kind == "cluster":
            self._ensure_api(record["id"], timeout_s)
            return
        access = self._ensure_api(record["cluster_id"], timeout_s)
        try:
            kube_lifecycle.wait_for_nodes(access, record["id"], int(record["target_node_count"]), timeout_s)
        except kube_lifecycle.ControlPlaneError as err:
            raise OperationTimeout(str(err), CloudRequest("wait_node_group", {"id": record["id"]})) from None

    def _roll_back(self, kind: str, resource_id: str) -> None:
        with self._op(f"rollback_{kind}", {"id": resource_id}, write=True, inject=False) as ctx:
            self._row(ctx, kind, resource_id)
            if kind == "cluster":
                self._delete_cluster_rows(ctx, resource_id)
            else:
                self._delete_row(ctx, resource_id)
        if kind == "cluster":
            kube_lifecycle.stop(self.directory, resource_id)
