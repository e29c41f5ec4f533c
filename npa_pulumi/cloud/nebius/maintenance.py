"""The Nebius adapter's day-two calls on a project's cluster nodes (their compute instances: mk8s names a
node after its instance):

* the maintenance read: the project's unfinished maintenance events
  (`nebius.compute.v1.MaintenanceService.ListActive`, as `nebius compute maintenance list-active
  --parent-id <project>` lists them), each joined to the instance whose `status.maintenance_event_id`
  names it (an event itself carries no instance). Two paged lists per project, never a call per node;
* the repair ladder's recovery of a node: its instance found by name (`InstanceService.GetByName`), the
  host under it marked unhealthy (`compute.v1.NodeService.SetUnhealthy`: the scheduler then avoids that
  host, and "after stop/start via Compute API [the VM] most probably will be assigned to a different
  node"), then stopped and started again (`InstanceService.Stop`, `Start`). SetUnhealthy needs
  `compute.node.setUnhealthy`, which Nebius grants to the VM's own service account: refused to the
  fleet's principal, the stop and start still run (the host is then not marked);
* the ladder's removal of a node from its group: its instance deleted (`InstanceService.Delete`). mk8s
  has no per-node call (NodeGroupService offers get, list, create, update, delete, upgrade); the group
  keeps its target node count and so creates another instance in its place.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ..errors import PermissionDenied
from ..port import DEFAULT_OPERATION_TIMEOUT_S, MaintenanceEvent, NodeRepair
from .client import NebiusClient

# How the ladder names itself in a host's health-check record (NodeService.SetUnhealthy).
REPAIR_CHECK_ID = "npa-remediation"


def _stamp(value: Any) -> str:
    return value.isoformat() if isinstance(value, datetime) else ""


def maintenance_event(event: Any, project_id: str, instance: Any | None) -> MaintenanceEvent:
    status = event.status
    return MaintenanceEvent(
        id=event.id,
        project_id=project_id,
        instance_id=instance.metadata.id if instance is not None else "",
        instance_name=instance.metadata.name if instance is not None else "",
        maintenance_id=status.maintenance_id,
        reason=status.maintenance_reason,
        planned=bool(event.spec.is_planned),
        created_at=_stamp(status.created_at),
        sla_deadline=_stamp(status.sla_deadline_ts),
    )


class Maintenance(NebiusClient):
    """The project's active maintenance events (compute v1 MaintenanceService)."""

    def list_active_maintenance(self, project_id: str) -> list[MaintenanceEvent]:
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "MaintenanceServiceClient")
        events = self._list(
            "compute.v1.MaintenanceService.ListActive",
            {"parent_id": project_id},
            lambda token, kw: client.list_active(
                compute.ListMaintenanceEventsRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
            ),
        )
        if not events:
            return []
        instances = self._client("compute.v1", "InstanceServiceClient")
        by_event = {
            i.status.maintenance_event_id: i
            for i in self._list(
                "compute.v1.InstanceService.List",
                {"parent_id": project_id},
                lambda token, kw: instances.list(
                    compute.ListInstancesRequest(parent_id=project_id, **self._page_kwargs(token)), **kw
                ),
            )
            if i.status.maintenance_event_id
        }
        return [maintenance_event(e, project_id, by_event.get(e.id)) for e in events]

    # ------------------------------------------------------------------ the repair ladder's calls

    def _node_instance(self, project_id: str, node: str) -> Any:
        common = self._api("common.v1")
        client = self._client("compute.v1", "InstanceServiceClient")
        return self._read(
            "compute.v1.InstanceService.GetByName",
            {"parent_id": project_id, "name": node},
            lambda kw: client.get_by_name(common.GetByNameRequest(parent_id=project_id, name=node), **kw),
        )

    def recover_node(
        self, project_id: str, node: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> NodeRepair:
        compute = self._api("compute.v1")
        instance = self._node_instance(project_id, node)
        iid = instance.metadata.id
        marked = self._mark_host_unhealthy(iid, node)
        client = self._client("compute.v1", "InstanceServiceClient")
        for verb in ("Stop", "Start"):
            self._mutate(
                f"compute.v1.InstanceService.{verb}",
                {"id": iid},
                self._instance_call(client, verb, getattr(compute, f"{verb}InstanceRequest")(id=iid)),
                timeout_s,
            )
        state = "RUNNING" if marked else "RUNNING (its host not marked unhealthy: not permitted)"
        return NodeRepair(instance_id=iid, instance_name=node, action="RECOVERED", state=state)

    @staticmethod
    def _instance_call(client: Any, verb: str, request: Any) -> Callable[[dict[str, Any]], Any]:
        method = getattr(client, verb.lower())
        return lambda kw: method(request, **kw)

    def _mark_host_unhealthy(self, instance_id: str, node: str) -> bool:
        """Whether the host under the instance was marked unhealthy (False: the principal may not)."""
        compute = self._api("compute.v1")
        client = self._client("compute.v1", "NodeServiceClient")
        info = compute.NodeSetUnhealthyRequest.HealthCheckInfo(
            observed_at=datetime.now(UTC),
            check_id=REPAIR_CHECK_ID,
            description=f"the repair ladder's cloud-recovery of node {node}",
        )
        try:  # idempotent (marking a host twice changes nothing), so it retries as a read does
            self._read(
                "compute.v1.NodeService.SetUnhealthy",
                {"instance_id": instance_id},
                lambda kw: client.set_unhealthy(
                    compute.NodeSetUnhealthyRequest(instance_id=instance_id, health_check_info=info), **kw
                ),
            )
        except PermissionDenied:
            return False
        return True

    def remove_node(
        self, project_id: str, node: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> NodeRepair:
        compute = self._api("compute.v1")
        iid = self._node_instance(project_id, node).metadata.id
        client = self._client("compute.v1", "InstanceServiceClient")
        self._mutate(
            "compute.v1.InstanceService.Delete",
            {"id": iid},
            lambda kw: client.delete(compute.DeleteInstanceRequest(id=iid), **kw),
            timeout_s,
        )
        return NodeRepair(instance_id=iid, instance_name=node, action="DELETED", state="DELETED")
