"""Faults on a cluster's nodes, its Slurm roles and its GPU driver, and what Nebius itself does to a
cluster's nodes on day two, as the local cloud models it (docs.nebius.com: kubernetes/maintenance,
health-checks; compute maintenance):

* a fault on a node (`NODE_FAULTS`: NotReady, a GPU missing, Nebius' conditions, ...), a Slurm role
  (`SLURM_FAULTS`) or the GPU operator's driver (`DRIVER_FAULTS`), switched on and off (or counted, for
  the events of `NODE_EVENTS`);

* maintenance events with reason codes on a node's instance (`HW_GPU_XID_79`, `HW_IB_LINK_DOWN`, ...): an
  active event sets the node's `NebiusMaintenanceScheduled` condition, finishing it clears the condition;
  the project's unfinished events are what `list_active_maintenance` answers (one query per project);
* a node replacement, as auto-repair does it: the node leaves and a new one with a new name (and so a new
  boot id) joins in its place (kube/shapes.py names it);
* the repair ladder's two cloud calls on a node's instance (mk8s names a node after its instance):
  `recover_node` stops and starts it again (compute InstanceService Stop, Start): it comes back on another
  host with a new boot id, the host's faults gone, unless the node has a `defective_host` (the fault
  follows it: what recovery cannot fix); `remove_node` deletes it, and its node group, which keeps its
  target count, replaces it as auto-repair does (a new node, a new name).

Recorded on the cluster's record (`maintenance_events`, `node_replacements`, `node_faults`), which the
cluster's agent mirrors into its API server.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from npa_pulumi.cloud.errors import InvalidArgument, NotFound
from npa_pulumi.simulator import records
from npa_pulumi.simulator.ids import new_id
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import is_deleted

MAINTENANCE_FAULT = "maintenance_scheduled"
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
    MAINTENANCE_FAULT,  # Nebius' NebiusMaintenanceScheduled condition (maintenance events set it too)
    "boot_disk_io_error",  # Nebius' NebiusBootDiskIOError condition
    "ib_link_degraded",
    "stale_device_plugin",  # the device plugin's stale resources (simulator/kube/device_plugin.py)
    "defective_host",  # the node's faults survive a recovery (stop and start): only a new node clears them
)
NODE_EVENTS = ("reboot", "mig_not_ready_taint")  # counted, not switched on and off
TIMED_NODE_FAULTS = ("stale_device_plugin",)  # on since a time (cleared like a state)
# What a recovery (the instance stopped and started again, on another host) clears: the host's faults.
# Maintenance is Nebius' own schedule, and a stale device plugin is the cluster's software.
HOST_FAULTS = (
    "not_ready",
    "gpu_missing",
    "gpu_error",
    "nvlink_degraded",
    "ib_port_down",
    "boot_disk_io_error",
    "ib_link_degraded",
)
SLURM_FAULTS = ("controller_down", "login_down")
# The GPU operator's driver (RTX clusters): `stale_template` is an OnDelete update of the driver DaemonSet
# that leaves its pods on the older template; `no_repo_mount` renders the driver without the mounts of the
# fleet's package-repository files (kube/shapes.py applies both).
DRIVER_FAULTS = ("stale_template", "no_repo_mount")


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat()


class NodeHealth:
    """Faults on a cluster's nodes and parts, node replacements and maintenance events, over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def set_node_fault(self, cluster_id: str, node: str, fault: str, active: bool = True) -> dict[str, Any]:
        """Inject (or clear) a fault on one node of a cluster; the cluster's agent applies it to the API.
        `reboot` (the node's boot id changes) and `mig_not_ready_taint` (the GPU operator's temporary
        taint left on a node) are events; the others are states."""
        if fault not in NODE_FAULTS:
            raise InvalidArgument(f"unknown node fault {fault!r}; choose one of {', '.join(NODE_FAULTS)}")
        with self.store.op(
            "set_node_fault", {"cluster_id": cluster_id, "node": node}, write=True, inject=False
        ) as ctx:
            row = ctx.row("cluster", cluster_id)
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
            ctx.set_data(cluster_id, data)
            return dict(faults_of)

    def set_slurm_fault(self, cluster_id: str, fault: str, active: bool = True) -> dict[str, Any]:
        """Inject (or clear) a fault of a soperator cluster's Slurm roles (`controller_down`, `login_down`):
        the agent makes that role's nodes NotReady and its operator reports the Slurm cluster accordingly
        (npa_pulumi/simulator/kube/slurm.py)."""
        return self._set_cluster_fault(cluster_id, "slurm", SLURM_FAULTS, fault, active)

    def set_slurm_jobs(self, cluster_id: str, node: str, count: int) -> dict[str, int]:
        """How many Slurm jobs run on a soperator worker node now (0: none): a drain of it stays
        `NodeDraining` (DRAIN+ALLOC) until they are done (npa_pulumi/simulator/kube/slurm.py)."""
        if count < 0:
            raise InvalidArgument("a node runs 0 or more Slurm jobs")
        with self.store.op(
            "set_slurm_jobs", {"cluster_id": cluster_id, "node": node}, write=True, inject=False
        ) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            jobs = data.setdefault("slurm_jobs", {})
            if count:
                jobs[node] = count
            else:
                jobs.pop(node, None)
            ctx.set_data(cluster_id, data)
            return dict(jobs)

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
        with self.store.op(f"set_{kind}_fault", {"cluster_id": cluster_id}, write=True, inject=False) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            faults = data.setdefault(f"{kind}_faults", {})
            if active:
                faults[fault] = True
            else:
                faults.pop(fault, None)
            ctx.set_data(cluster_id, data)
            return dict(faults)

    def _update_cluster(self, op: str, cluster_id: str, change: Any) -> Any:
        with self.store.op(op, {"cluster_id": cluster_id}, write=True, inject=False) as ctx:
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            groups = ctx.list_of("node_group", "parent_id", cluster_id)
            found = change(data, groups, ctx.now)
            ctx.set_data(cluster_id, data)
            return found

    @staticmethod
    def _current_node(data: dict[str, Any], groups: list[dict[str, Any]], node: str) -> str:
        from npa_pulumi.simulator.kube import shapes  # (loads yaml: not at the provisioner's start)

        names = shapes.desired_nodes({"id": "", **data}, groups)
        if node not in names:
            raise NotFound(
                f"node {node} is not a node of this cluster (its nodes: {', '.join(sorted(names))})"
            )
        return node

    def replace_node(self, cluster_id: str, node: str) -> dict[str, str]:
        """The node leaves and a new one (a new name, a new boot id) joins in its place."""

        from npa_pulumi.simulator.kube import shapes

        def change(data: dict[str, Any], groups: list[dict[str, Any]], _now: float) -> dict[str, str]:
            self._current_node(data, groups, node)
            base = shapes.base_node_name(node)
            replacements = data.setdefault("node_replacements", {})
            replacements[base] = int(replacements.get(base, 0)) + 1
            return {"replaced": node, "by": shapes.replaced_node_name(base, replacements[base])}

        found: dict[str, str] = self._update_cluster("replace_node", cluster_id, change)
        return found

    def _cluster_of_node(self, ctx: Any, project_id: str, node: str) -> str:
        """The id of the project's cluster that has `node` now (NotFound: no instance of that name)."""
        from npa_pulumi.simulator.kube import shapes

        ctx.project_row(project_id)
        rows = ctx.conn.execute(
            "SELECT * FROM resources WHERE kind = 'cluster' AND project_id = ? ORDER BY created_at, id",
            (project_id,),
        ).fetchall()
        for row in rows:
            if is_deleted(row, ctx.now):
                continue
            groups = ctx.list_of("node_group", "parent_id", row["id"])
            if node in shapes.desired_nodes({"id": row["id"], **records.data_of(row)}, groups):
                return str(row["id"])
        raise NotFound(f"no instance named {node} in project {project_id}")

    def recover_node(self, project_id: str, node: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Stop the node's instance and start it again (compute InstanceService Stop, then Start): it comes
        back under its name with a new boot id, without the host's faults unless its host is defective."""
        params = {"project_id": project_id, "node": node}
        with self.store.op("recover_node", params, write=True, timeout_s=timeout_s) as ctx:
            cluster_id = self._cluster_of_node(ctx, project_id, node)
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            faults_of = data.setdefault("node_faults", {}).setdefault(node, {})
            faults_of["reboots"] = int(faults_of.get("reboots", 0)) + 1
            if not faults_of.get("defective_host"):
                for fault in HOST_FAULTS:
                    faults_of.pop(fault, None)
            ctx.set_data(cluster_id, data)
            return {"instance_id": node, "instance_name": node, "action": "RECOVERED", "state": "RUNNING"}

    def remove_node(self, project_id: str, node: str, timeout_s: float | None = None) -> dict[str, Any]:
        """Delete the node's instance (compute InstanceService Delete): its node group keeps its target
        count, so a new node (a new name, no faults) joins in its place."""
        from npa_pulumi.simulator.kube import shapes

        params = {"project_id": project_id, "node": node}
        with self.store.op("remove_node", params, write=True, timeout_s=timeout_s) as ctx:
            cluster_id = self._cluster_of_node(ctx, project_id, node)
            row = ctx.row("cluster", cluster_id)
            data = records.data_of(row)
            base = shapes.base_node_name(node)
            replacements = data.setdefault("node_replacements", {})
            replacements[base] = int(replacements.get(base, 0)) + 1
            (data.get("node_faults") or {}).pop(node, None)
            ctx.set_data(cluster_id, data)
            return {
                "instance_id": node,
                "instance_name": node,
                "action": "DELETED",
                "state": "DELETING",
                "replaced_by": shapes.replaced_node_name(base, replacements[base]),
            }

    def add_maintenance(
        self, cluster_id: str, node: str, reason: str, planned: bool = False, sla_deadline: str = ""
    ) -> dict[str, Any]:
        """An active maintenance event on the node's instance; the node reports NebiusMaintenanceScheduled.
        `sla_deadline` (RFC 3339) is when the cloud acts on its own, as the MaintenanceService lists it."""
        if not reason.strip():
            raise InvalidArgument("a maintenance event needs a reason code (e.g. HW_GPU_XID_79)")
        deadline = _deadline(sla_deadline)

        def change(data: dict[str, Any], groups: list[dict[str, Any]], now: float) -> dict[str, Any]:
            self._current_node(data, groups, node)
            event = {
                "id": new_id("computemaintenance"),
                "node": node,
                "reason": reason.strip(),
                "planned": planned,
                "created_at": _stamp(now),
                "sla_deadline": deadline,
                "finished_at": "",
            }
            data.setdefault("maintenance_events", []).append(event)
            data.setdefault("node_faults", {}).setdefault(node, {})[MAINTENANCE_FAULT] = True
            return event

        event: dict[str, Any] = self._update_cluster("add_maintenance", cluster_id, change)
        return event

    def finish_maintenance(self, cluster_id: str, node: str) -> list[dict[str, Any]]:
        """Finish the node's active maintenance events; its NebiusMaintenanceScheduled condition clears."""

        def change(data: dict[str, Any], _groups: list[dict[str, Any]], now: float) -> list[dict[str, Any]]:
            finished = []
            for event in data.get("maintenance_events") or []:
                if event.get("node") == node and not event.get("finished_at"):
                    event["finished_at"] = _stamp(now)
                    finished.append(event)
            if not finished:
                raise NotFound(f"node {node} has no active maintenance event")
            (data.get("node_faults") or {}).get(node, {}).pop(MAINTENANCE_FAULT, None)
            return finished

        done: list[dict[str, Any]] = self._update_cluster("finish_maintenance", cluster_id, change)
        return done

    def list_active_maintenance(self, project_id: str) -> list[dict[str, Any]]:
        """The project's unfinished maintenance events, joined to their node's instance (one query)."""
        with self.store.op("list_active_maintenance", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            rows = ctx.conn.execute(
                "SELECT * FROM resources WHERE kind = 'cluster' AND project_id = ? ORDER BY created_at, id",
                (project_id,),
            ).fetchall()
            live = [records.data_of(row) for row in rows if not is_deleted(row, ctx.now)]
        found = []
        for data in live:
            for event in data.get("maintenance_events") or []:
                if event.get("finished_at"):
                    continue
                found.append(
                    {
                        "id": event["id"],
                        "project_id": project_id,
                        "instance_id": event["node"],
                        "instance_name": event["node"],
                        "maintenance_id": f"m-{event['id'][-6:]}",
                        "reason": event["reason"],
                        "planned": bool(event.get("planned")),
                        "created_at": event.get("created_at", ""),
                        "sla_deadline": event.get("sla_deadline", ""),
                    }
                )
        return found


def _deadline(text: str) -> str:
    """An SLA deadline as RFC 3339 in UTC ('' none), or InvalidArgument naming what is valid."""
    if not text.strip():
        return ""
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise InvalidArgument(
            f"sla deadline {text!r} is not an RFC 3339 time (e.g. 2026-12-12T03:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        raise InvalidArgument(f"sla deadline {text!r} names no time zone (e.g. 2026-12-12T03:00:00Z)")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
