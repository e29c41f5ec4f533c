"""What Nebius itself does to a cluster's nodes on day two, as the local cloud models it (docs.nebius.com:
kubernetes/maintenance, health-checks; compute maintenance):

* maintenance events with reason codes on a node's instance (`HW_GPU_XID_79`, `HW_IB_LINK_DOWN`, ...): an
  active event sets the node's `NebiusMaintenanceScheduled` condition, finishing it clears the condition;
  the project's unfinished events are what `list_active_maintenance` answers (one query per project);
* a node replacement, as auto-repair does it: the node leaves and a new one with a new name (and so a new
  boot id) joins in its place (kube/shapes.py names it).

Recorded on the cluster's record (`maintenance_events`, `node_replacements`, `node_faults`), which the
cluster's agent mirrors into its API server.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from npa_pulumi.cloud.errors import InvalidArgument, NotFound
from npa_pulumi.simulator import records
from npa_pulumi.simulator.admin import AdminMixin
from npa_pulumi.simulator.base import is_deleted
from npa_pulumi.simulator.ids import new_id

MAINTENANCE_FAULT = "maintenance_scheduled"


def _stamp(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).isoformat()


class NodeHealthMixin(AdminMixin):
    def _update_cluster(self, op: str, cluster_id: str, change: Any) -> Any:
        with self._op(op, {"cluster_id": cluster_id}, write=True, inject=False) as ctx:
            row = self._row(ctx, "cluster", cluster_id)
            data = records.data_of(row)
            groups = self._list(ctx, "node_group", "parent_id", cluster_id)
            found = change(data, groups, ctx.now)
            ctx.conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), cluster_id))
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

    def add_maintenance(
        self, cluster_id: str, node: str, reason: str, planned: bool = False
    ) -> dict[str, Any]:
        """An active maintenance event on the node's instance; the node reports NebiusMaintenanceScheduled."""
        if not reason.strip():
            raise InvalidArgument("a maintenance event needs a reason code (e.g. HW_GPU_XID_79)")

        def change(data: dict[str, Any], groups: list[dict[str, Any]], now: float) -> dict[str, Any]:
            self._current_node(data, groups, node)
            event = {
                "id": new_id("computemaintenance"),
                "node": node,
                "reason": reason.strip(),
                "planned": planned,
                "created_at": _stamp(now),
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
        with self._op("list_active_maintenance", {"project_id": project_id}, write=False) as ctx:
            self._project_row(ctx, project_id)
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
                    }
                )
        return found
