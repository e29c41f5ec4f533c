"""Compute objects that node groups hang off: shared filesystems and InfiniBand GPU clusters.

Both become READY once the simulated provisioning time has passed, and neither can be deleted while a
node group still uses it (FailedPrecondition), as on the real service.
"""

from __future__ import annotations

from typing import Any

from npa_pulumi.cloud.errors import FailedPrecondition, InvalidArgument
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import records
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import clean_labels


class Compute:
    """Shared filesystems and GPU clusters over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    # ------------------------------------------------------------------ shared filesystems

    def create_filesystem(
        self,
        project_id: str,
        name: str,
        size_bytes: int,
        disk_type: str = "NETWORK_SSD",
        block_size_bytes: int = 4096,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {
            "project_id": project_id,
            "name": name,
            "size_bytes": size_bytes,
            "disk_type": disk_type,
            "block_size_bytes": block_size_bytes,
            "labels": clean_labels(labels),
        }
        with self.store.op("create_filesystem", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            if not isinstance(size_bytes, int) or isinstance(size_bytes, bool) or size_bytes <= 0:
                raise InvalidArgument("a filesystem needs a positive integer size_bytes")
            stored = {k: v for k, v in params.items() if k not in ("project_id", "name")}
            return ctx.create(
                "filesystem",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data=stored,
                params=params,
                charges=[
                    acct.Charge(acct.FILESYSTEM_COUNT, 1),
                    acct.Charge(acct.size_quota(acct.FILESYSTEM_SIZE_PREFIX, disk_type), size_bytes),
                ],
                ready_at=ctx.now + ctx.provisioning_seconds,
            )

    def filesystem_snapshot(self, filesystem_id: str) -> dict[str, Any] | None:
        """A filesystem's record, or None: what a cluster's agent needs to model the mount on its nodes
        (the size a probe's statvfs reports). Not an API call (no faults apply)."""
        with self.store.op(
            "filesystem_snapshot", {"filesystem_id": filesystem_id}, write=False, inject=False
        ) as ctx:
            row = ctx.conn.execute(
                "SELECT * FROM resources WHERE id = ? AND kind = 'filesystem'", (filesystem_id,)
            ).fetchone()
            return None if row is None else records.to_record(row, ctx.now)

    def get_filesystem(self, filesystem_id: str) -> dict[str, Any]:
        with self.store.op("get_filesystem", {"filesystem_id": filesystem_id}, write=False) as ctx:
            return ctx.fetch("filesystem", filesystem_id)

    def list_filesystems(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_filesystems", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("filesystem", "project_id", project_id)

    def delete_filesystem(self, filesystem_id: str, timeout_s: float | None = None) -> None:
        params = {"filesystem_id": filesystem_id}
        with self.store.op("delete_filesystem", params, write=True, timeout_s=timeout_s) as ctx:
            filesystem = ctx.row("filesystem", filesystem_id)
            users = ctx.node_groups_using(filesystem["project_id"], "filesystems", filesystem_id)
            if users:
                raise FailedPrecondition(f"filesystem {filesystem_id} is attached to {', '.join(users)}")
            ctx.delete_row(filesystem_id)

    # ------------------------------------------------------------------ GPU clusters

    def create_gpu_cluster(
        self,
        project_id: str,
        name: str,
        fabric: str,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {"project_id": project_id, "name": name, "fabric": fabric}
        with self.store.op("create_gpu_cluster", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            if not (fabric or "").strip():
                raise InvalidArgument("a GPU cluster needs an InfiniBand fabric")
            return ctx.create(
                "gpu_cluster",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data={"fabric": fabric.strip()},
                params=params,
                charges=[acct.Charge(acct.GPU_CLUSTER_COUNT, 1)],
                ready_at=ctx.now + ctx.provisioning_seconds,
            )

    def get_gpu_cluster(self, gpu_cluster_id: str) -> dict[str, Any]:
        with self.store.op("get_gpu_cluster", {"gpu_cluster_id": gpu_cluster_id}, write=False) as ctx:
            return ctx.fetch("gpu_cluster", gpu_cluster_id)

    def list_gpu_clusters(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_gpu_clusters", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("gpu_cluster", "project_id", project_id)

    def delete_gpu_cluster(self, gpu_cluster_id: str, timeout_s: float | None = None) -> None:
        params = {"gpu_cluster_id": gpu_cluster_id}
        with self.store.op("delete_gpu_cluster", params, write=True, timeout_s=timeout_s) as ctx:
            gpu_cluster = ctx.row("gpu_cluster", gpu_cluster_id)
            users = ctx.node_groups_using(gpu_cluster["project_id"], "gpu_cluster_id", gpu_cluster_id)
            if users:
                raise FailedPrecondition(f"GPU cluster {gpu_cluster_id} is used by {', '.join(users)}")
            ctx.delete_row(gpu_cluster_id)
