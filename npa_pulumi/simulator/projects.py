"""Identity, IAM projects, VPC networks, subnets and security groups, quota allowances and capacity block
groups.

As on the real service, a network's provider-made default security group goes with its network and
cannot be deleted on its own; a network that still holds another security group cannot be deleted."""

from __future__ import annotations

from typing import Any

from npa_pulumi.cloud.errors import FailedPrecondition, InvalidArgument
from npa_pulumi.cloud.project_defaults import DEFAULT_NETWORK_NAME as DEFAULT_NETWORK
from npa_pulumi.cloud.project_defaults import DEFAULT_SECURITY_GROUP_PREFIX, DEFAULT_SUBNET_PREFIX
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import db, records
from npa_pulumi.simulator.base import OpContext, SimulatorBase, clean_labels


class ProjectsMixin(SimulatorBase):
    def principal(self) -> dict[str, Any]:
        with self._op("principal", {}, write=False) as ctx:
            return {"tenant_id": ctx.tenant_id, "profile": "local", "subject": "local-cloud-user"}

    def default_region(self) -> str:
        """The local tenant's first region (its fixture's `regions[0]`): the local profile's region."""
        with self._op("default_region", {}, write=False) as ctx:
            return ctx.regions[0]

    # ------------------------------------------------------------------ IAM projects

    def list_projects(self, tenant_id: str) -> list[dict[str, Any]]:
        with self._op("list_projects", {"tenant_id": tenant_id}, write=False) as ctx:
            self._check_tenant(ctx, tenant_id)
            return self._list(ctx, "project", "tenant_id", tenant_id)

    def get_project(self, project_id: str) -> dict[str, Any]:
        with self._op("get_project", {"project_id": project_id}, write=False) as ctx:
            return self._fetch(ctx, "project", project_id)

    def create_project(
        self,
        tenant_id: str,
        name: str,
        region: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {"tenant_id": tenant_id, "name": name, "region": region, "labels": clean_labels(labels)}
        with self._op("create_project", params, write=True, timeout_s=timeout_s) as ctx:
            self._check_tenant(ctx, tenant_id)
            if region not in ctx.regions:
                raise InvalidArgument(f"unknown region {region!r}; this tenant has {', '.join(ctx.regions)}")
            project = self._create(
                ctx,
                "project",
                name=name,
                scope=tenant_id,
                project_id="",  # the new project's own id
                parent_id=tenant_id,
                region=region,
                key=idempotency_key,
                data={"labels": clean_labels(labels)},
                params=params,
                charges=[acct.Charge(acct.PROJECT_COUNT, 1)],
            )
            if (db.get_meta(ctx.conn, "project_default_network") or "0") not in ("0", "0.0"):
                self._default_topology(ctx, project)
            return project

    def _default_topology(self, ctx: OpContext, project: dict[str, Any]) -> None:
        """What Nebius makes along with a project: `default-network`, one `default-subnet-<suffix>` in it and
        the network's default security group, without the project's labels (the provider made them, not
        the caller). Made once: a replayed create finds them."""
        pid, region = str(project["id"]), str(project["region"])
        made = ctx.conn.execute(
            "SELECT 1 FROM resources WHERE kind = 'network' AND project_id = ? AND name = ?",
            (pid, DEFAULT_NETWORK),
        ).fetchone()
        if made:
            return
        network = self._create(
            ctx,
            "network",
            name=DEFAULT_NETWORK,
            scope=pid,
            project_id=pid,
            parent_id=pid,
            region=region,
            key=None,
            data={"labels": {}},
            params={"project_id": pid, "name": DEFAULT_NETWORK},
            charges=[
                acct.Charge(acct.VPC_NETWORK_COUNT, 1),
                acct.Charge(acct.VPC_POOL_COUNT, 1),
                acct.Charge(acct.VPC_ROUTETABLE_COUNT, 1),
                acct.Charge(acct.VPC_ROUTE_COUNT, 1),
            ],
        )
        count = ctx.conn.execute("SELECT COUNT(*) FROM resources WHERE kind = 'subnet'").fetchone()[0]
        name = f"{DEFAULT_SUBNET_PREFIX}{pid.rsplit('-', 1)[-1][-8:]}"
        self._create(
            ctx,
            "subnet",
            name=name,
            scope=pid,
            project_id=pid,
            parent_id=str(network["id"]),
            region=region,
            key=None,
            data={"labels": {}, "network_id": network["id"], "cidr": f"10.{count % 250}.0.0/16"},
            params={"project_id": pid, "network_id": network["id"], "name": name},
            charges=[acct.Charge(acct.VPC_SUBNET_COUNT, 1), acct.Charge(acct.VPC_POOL_COUNT, 1)],
        )
        self._default_security_group(ctx, str(network["id"]), pid, region)

    def _default_security_group(self, ctx: OpContext, network_id: str, project_id: str, region: str) -> None:
        """A network's default security group as the cloud makes it: marked `default`, named
        `default-security-group-<suffix>`, without labels."""
        name = f"{DEFAULT_SECURITY_GROUP_PREFIX}{network_id.rsplit('-', 1)[-1][-8:]}"
        self._create(
            ctx,
            "security_group",
            name=name,
            scope=project_id,
            project_id=project_id,
            parent_id=network_id,
            region=region,
            key=None,
            data={"labels": {}, "network_id": network_id, "default": True},
            params={"project_id": project_id, "network_id": network_id, "name": name},
            charges=[],
        )

    def delete_project(self, project_id: str, timeout_s: float | None = None) -> None:
        """Delete an empty project; one that still holds anything is refused, as the IAM API does."""
        with self._op("delete_project", {"project_id": project_id}, write=True, timeout_s=timeout_s) as ctx:
            self._project_row(ctx, project_id)
            held = ctx.conn.execute(
                "SELECT kind, id FROM resources WHERE project_id = ? AND id != ? ORDER BY created_at, id",
                (project_id, project_id),
            ).fetchall()
            if held:
                names = ", ".join(f"{row['kind']} {row['id']}" for row in held)
                raise FailedPrecondition(f"project {project_id} is not empty: {names}")
            self._delete_row(ctx, project_id)

    # ------------------------------------------------------------------ VPC

    def list_networks(self, project_id: str) -> list[dict[str, Any]]:
        with self._op("list_networks", {"project_id": project_id}, write=False) as ctx:
            self._project_row(ctx, project_id)
            return self._list(ctx, "network", "project_id", project_id)

    def get_network(self, network_id: str) -> dict[str, Any]:
        with self._op("get_network", {"network_id": network_id}, write=False) as ctx:
            return self._fetch(ctx, "network", network_id)

    def create_network(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {"project_id": project_id, "name": name, "labels": clean_labels(labels)}
        with self._op("create_network", params, write=True, timeout_s=timeout_s) as ctx:
            project = self._project_row(ctx, project_id)
            return self._create(
                ctx,
                "network",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data={"labels": clean_labels(labels)},
                params=params,
                # A network brings its private pool, a route table and its default route.
                charges=[
                    acct.Charge(acct.VPC_NETWORK_COUNT, 1),
                    acct.Charge(acct.VPC_POOL_COUNT, 1),
                    acct.Charge(acct.VPC_ROUTETABLE_COUNT, 1),
                    acct.Charge(acct.VPC_ROUTE_COUNT, 1),
                ],
            )

    def delete_network(self, network_id: str, timeout_s: float | None = None) -> None:
        with self._op("delete_network", {"network_id": network_id}, write=True, timeout_s=timeout_s) as ctx:
            self._row(ctx, "network", network_id)
            subnets = ctx.conn.execute(
                "SELECT id FROM resources WHERE kind = 'subnet' AND parent_id = ?", (network_id,)
            ).fetchall()
            if subnets:
                names = ", ".join(row["id"] for row in subnets)
                raise FailedPrecondition(f"network {network_id} still has subnets: {names}")
            groups = self._list(ctx, "security_group", "parent_id", network_id)
            others = [g["id"] for g in groups if not g["default"] and g["state"] != "DELETING"]
            if others:
                raise FailedPrecondition(
                    f"network {network_id} still has security groups: {', '.join(others)}"
                )
            for group in groups:
                if group["default"] and group["state"] != "DELETING":
                    self._delete_row(ctx, str(group["id"]))  # the default one goes with its network
            self._delete_row(ctx, network_id)

    def list_security_groups(self, project_id: str) -> list[dict[str, Any]]:
        with self._op("list_security_groups", {"project_id": project_id}, write=False) as ctx:
            self._project_row(ctx, project_id)
            return self._list(ctx, "security_group", "project_id", project_id)

    def create_security_group(
        self,
        project_id: str,
        network_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        """A security group of the caller's (never a network's default one: the cloud makes that)."""
        params = {
            "project_id": project_id,
            "network_id": network_id,
            "name": name,
            "labels": clean_labels(labels),
        }
        with self._op("create_security_group", params, write=True, timeout_s=timeout_s) as ctx:
            project = self._project_row(ctx, project_id)
            network = self._row(ctx, "network", network_id)
            if network["project_id"] != project_id:
                raise InvalidArgument(f"network {network_id} is not in project {project_id}")
            return self._create(
                ctx,
                "security_group",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=network_id,
                region=project["region"],
                key=idempotency_key,
                data={"labels": clean_labels(labels), "network_id": network_id, "default": False},
                params=params,
                charges=[],
            )

    def delete_security_group(self, security_group_id: str, timeout_s: float | None = None) -> None:
        params = {"security_group_id": security_group_id}
        with self._op("delete_security_group", params, write=True, timeout_s=timeout_s) as ctx:
            row = self._row(ctx, "security_group", security_group_id)
            if records.data_of(row).get("default"):
                raise FailedPrecondition(
                    f"security group {security_group_id} is the default of network {row['parent_id']}: "
                    "it goes with its network"
                )
            self._delete_row(ctx, security_group_id)

    def list_subnets(self, project_id: str) -> list[dict[str, Any]]:
        with self._op("list_subnets", {"project_id": project_id}, write=False) as ctx:
            self._project_row(ctx, project_id)
            return self._list(ctx, "subnet", "project_id", project_id)

    def get_subnet(self, subnet_id: str) -> dict[str, Any]:
        with self._op("get_subnet", {"subnet_id": subnet_id}, write=False) as ctx:
            return self._fetch(ctx, "subnet", subnet_id)

    def create_subnet(
        self,
        project_id: str,
        network_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        cidr: str = "",
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {
            "project_id": project_id,
            "network_id": network_id,
            "name": name,
            "labels": clean_labels(labels),
            "cidr": cidr,
        }
        with self._op("create_subnet", params, write=True, timeout_s=timeout_s) as ctx:
            project = self._project_row(ctx, project_id)
            network = self._row(ctx, "network", network_id)
            if network["project_id"] != project_id:
                raise InvalidArgument(f"network {network_id} is not in project {project_id}")
            if not cidr:
                count = ctx.conn.execute("SELECT COUNT(*) FROM resources WHERE kind = 'subnet'").fetchone()[0]
                cidr = f"10.{count % 250}.0.0/16"
            return self._create(
                ctx,
                "subnet",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=network_id,
                region=project["region"],
                key=idempotency_key,
                data={"labels": clean_labels(labels), "network_id": network_id, "cidr": cidr},
                params=params,
                charges=[acct.Charge(acct.VPC_SUBNET_COUNT, 1), acct.Charge(acct.VPC_POOL_COUNT, 1)],
            )

    def delete_subnet(self, subnet_id: str, timeout_s: float | None = None) -> None:
        with self._op("delete_subnet", {"subnet_id": subnet_id}, write=True, timeout_s=timeout_s) as ctx:
            subnet = self._row(ctx, "subnet", subnet_id)
            clusters = ctx.conn.execute(
                "SELECT id, data FROM resources WHERE kind = 'cluster' AND project_id = ?",
                (subnet["project_id"],),
            ).fetchall()
            users = [row["id"] for row in clusters if records.data_of(row).get("subnet_id") == subnet_id]
            if users:
                raise FailedPrecondition(f"subnet {subnet_id} is still used by {', '.join(users)}")
            self._delete_row(ctx, subnet_id)
