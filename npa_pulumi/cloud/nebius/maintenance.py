"""The Nebius adapter's maintenance reads: the project's unfinished maintenance events
(`nebius.compute.v1.MaintenanceService.ListActive`, as `nebius compute maintenance list-active
--parent-id <project>` lists them), each joined to the instance whose `status.maintenance_event_id` names
it (an event itself carries no instance). Two paged lists per project, never a call per node."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ..port import MaintenanceEvent
from .client import NebiusClient


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
