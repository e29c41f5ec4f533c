"""What else a project can hold, beside what the fleet deploys: compute instances (VMs) and disks,
container registries and IAM groups (VPC security groups are with the networks, in projects.py).

The fleet creates none of these itself except a bucket grant's IAM group (storage.py); they exist so
that a test (or a person at `local-cloud add`) can put into a project what a user could, and so that a
teardown's inventory of a project is as complete as the cloud's. None of them draws on a quota here.
`set_labels` edits any object's labels out of band, as a person in the console could.
"""

from __future__ import annotations

import json
from typing import Any

from npa_pulumi.cloud.errors import InvalidArgument
from npa_pulumi.simulator import records
from npa_pulumi.simulator.base import SimulatorBase, clean_labels


class HoldingsMixin(SimulatorBase):
    # ------------------------------------------------------------------ the shared shape

    def _create_held(
        self,
        op: str,
        kind: str,
        project_id: str,
        name: str,
        data: dict[str, Any],
        idempotency_key: str | None,
        timeout_s: float | None,
        parent_id: str | None = None,
    ) -> dict[str, Any]:
        params = {"project_id": project_id, "name": name, **data}
        with self._op(op, params, write=True, timeout_s=timeout_s) as ctx:
            project = self._project_row(ctx, project_id)
            return self._create(
                ctx,
                kind,
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=parent_id or project_id,
                region=project["region"],
                key=idempotency_key,
                data=data,
                params=params,
                charges=[],
            )

    def _list_held(self, op: str, kind: str, project_id: str) -> list[dict[str, Any]]:
        with self._op(op, {"project_id": project_id}, write=False) as ctx:
            self._project_row(ctx, project_id)
            return self._list(ctx, kind, "project_id", project_id)

    def _delete_held(self, op: str, kind: str, resource_id: str, timeout_s: float | None) -> None:
        with self._op(op, {f"{kind}_id": resource_id}, write=True, timeout_s=timeout_s) as ctx:
            self._row(ctx, kind, resource_id)
            self._delete_row(ctx, resource_id)

    # ------------------------------------------------------------------ compute instances and disks

    def create_instance(
        self,
        project_id: str,
        name: str,
        platform: str = "cpu-d3",
        preset: str = "4vcpu-16gb",
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        data = {"platform": platform, "preset": preset, "labels": clean_labels(labels)}
        return self._create_held(
            "create_instance", "instance", project_id, name, data, idempotency_key, timeout_s
        )

    def list_instances(self, project_id: str) -> list[dict[str, Any]]:
        return self._list_held("list_instances", "instance", project_id)

    def delete_instance(self, instance_id: str, timeout_s: float | None = None) -> None:
        self._delete_held("delete_instance", "instance", instance_id, timeout_s)

    def create_disk(
        self,
        project_id: str,
        name: str,
        size_bytes: int = 64 * 1024**3,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) or size_bytes <= 0:
            raise InvalidArgument("a disk needs a positive integer size_bytes")
        data = {"size_bytes": size_bytes, "labels": clean_labels(labels)}
        return self._create_held("create_disk", "disk", project_id, name, data, idempotency_key, timeout_s)

    def list_disks(self, project_id: str) -> list[dict[str, Any]]:
        return self._list_held("list_disks", "disk", project_id)

    def delete_disk(self, disk_id: str, timeout_s: float | None = None) -> None:
        self._delete_held("delete_disk", "disk", disk_id, timeout_s)

    # ------------------------------------------------------------------ container registries

    def create_registry(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        data = {"labels": clean_labels(labels)}
        return self._create_held(
            "create_registry", "registry", project_id, name, data, idempotency_key, timeout_s
        )

    def list_registries(self, project_id: str) -> list[dict[str, Any]]:
        return self._list_held("list_registries", "registry", project_id)

    def delete_registry(self, registry_id: str, timeout_s: float | None = None) -> None:
        self._delete_held("delete_registry", "registry", registry_id, timeout_s)

    # ------------------------------------------------------------------ IAM groups

    def create_group(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        data = {"labels": clean_labels(labels)}
        return self._create_held(
            "create_group", "iam_group", project_id, name, data, idempotency_key, timeout_s
        )

    def list_groups(self, project_id: str) -> list[dict[str, Any]]:
        return self._list_held("list_groups", "iam_group", project_id)

    def delete_group(self, group_id: str, timeout_s: float | None = None) -> None:
        """The group with its memberships and access permits: a bucket grant through it ends."""
        self._delete_held("delete_group", "iam_group", group_id, timeout_s)

    # ------------------------------------------------------------------ labels, edited out of band

    def set_labels(self, resource_id: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
        """Replace an object's labels, as a person editing them in the console would (a teardown must
        then no longer take the object for the fleet's). Any kind that carries labels."""
        with self._op("set_labels", {"resource_id": resource_id}, write=True) as ctx:
            row = ctx.conn.execute("SELECT * FROM resources WHERE id = ?", (resource_id,)).fetchone()
            if row is None or "labels" not in records.to_record(row, ctx.now):
                raise InvalidArgument(f"{resource_id} is not an object with labels")
            kind = str(row["kind"])
            self._row(ctx, kind, resource_id)  # not found / another tenant, as for any call
            data = {**records.data_of(row), "labels": clean_labels(labels)}
            ctx.conn.execute("UPDATE resources SET data = ? WHERE id = ?", (json.dumps(data), resource_id))
            return self._fetch(ctx, kind, resource_id)
