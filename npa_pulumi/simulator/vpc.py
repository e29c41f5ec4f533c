"""VPC networks, subnets and security groups.

As on the real service, a network's provider-made default security group goes with its network and
cannot be deleted on its own; a network that still holds another security group cannot be deleted. The
module's functions make what the cloud itself makes (a project's default topology, projects.py)."""

from __future__ import annotations

from typing import Any

from npa_pulumi.cloud.errors import FailedPrecondition, InvalidArgument
from npa_pulumi.cloud.project_defaults import DEFAULT_SECURITY_GROUP_PREFIX
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import records
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import OpContext, clean_labels


def network_charges() -> list[acct.Charge]:
    """A network brings its private pool, a route table and its default route."""
    return [
        acct.Charge(acct.VPC_NETWORK_COUNT, 1),
        acct.Charge(acct.VPC_POOL_COUNT, 1),
        acct.Charge(acct.VPC_ROUTETABLE_COUNT, 1),
        acct.Charge(acct.VPC_ROUTE_COUNT, 1),
    ]


def subnet_charges() -> list[acct.Charge]:
    return [acct.Charge(acct.VPC_SUBNET_COUNT, 1), acct.Charge(acct.VPC_POOL_COUNT, 1)]


def next_cidr(ctx: OpContext) -> str:
    """The CIDR the cloud picks for a subnet created without one."""
    count = ctx.conn.execute("SELECT COUNT(*) FROM resources WHERE kind = 'subnet'").fetchone()[0]
    return f"10.{count % 250}.0.0/16"


def add_default_security_group(ctx: OpContext, network_id: str, project_id: str, region: str) -> None:
    """A network's default security group as the cloud makes it: marked `default`, named
    `default-security-group-<suffix>`, without labels."""
    name = f"{DEFAULT_SECURITY_GROUP_PREFIX}{network_id.rsplit('-', 1)[-1][-8:]}"
    ctx.create(
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


class Vpc:
    """Networks, subnets and security groups over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def list_networks(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_networks", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("network", "project_id", project_id)

    def get_network(self, network_id: str) -> dict[str, Any]:
        with self.store.op("get_network", {"network_id": network_id}, write=False) as ctx:
            return ctx.fetch("network", network_id)

    def create_network(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float | None = None,
    ) -> dict[str, Any]:
        params = {"project_id": project_id, "name": name, "labels": clean_labels(labels)}
        with self.store.op("create_network", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            return ctx.create(
                "network",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=project_id,
                region=project["region"],
                key=idempotency_key,
                data={"labels": clean_labels(labels)},
                params=params,
                charges=network_charges(),
            )

    def delete_network(self, network_id: str, timeout_s: float | None = None) -> None:
        with self.store.op(
            "delete_network", {"network_id": network_id}, write=True, timeout_s=timeout_s
        ) as ctx:
            ctx.row("network", network_id)
            subnets = ctx.conn.execute(
                "SELECT id FROM resources WHERE kind = 'subnet' AND parent_id = ?", (network_id,)
            ).fetchall()
            if subnets:
                names = ", ".join(row["id"] for row in subnets)
                raise FailedPrecondition(f"network {network_id} still has subnets: {names}")
            groups = ctx.list_of("security_group", "parent_id", network_id)
            others = [g["id"] for g in groups if not g["default"] and g["state"] != "DELETING"]
            if others:
                raise FailedPrecondition(
                    f"network {network_id} still has security groups: {', '.join(others)}"
                )
            for group in groups:
                if group["default"] and group["state"] != "DELETING":
                    ctx.delete_row(str(group["id"]))  # the default one goes with its network
            ctx.delete_row(network_id)

    def list_security_groups(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_security_groups", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("security_group", "project_id", project_id)

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
        with self.store.op("create_security_group", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            network = ctx.row("network", network_id)
            if network["project_id"] != project_id:
                raise InvalidArgument(f"network {network_id} is not in project {project_id}")
            return ctx.create(
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
        with self.store.op("delete_security_group", params, write=True, timeout_s=timeout_s) as ctx:
            row = ctx.row("security_group", security_group_id)
            if records.data_of(row).get("default"):
                raise FailedPrecondition(
                    f"security group {security_group_id} is the default of network {row['parent_id']}: "
                    "it goes with its network"
                )
            ctx.delete_row(security_group_id)

    def list_subnets(self, project_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_subnets", {"project_id": project_id}, write=False) as ctx:
            ctx.project_row(project_id)
            return ctx.list_of("subnet", "project_id", project_id)

    def get_subnet(self, subnet_id: str) -> dict[str, Any]:
        with self.store.op("get_subnet", {"subnet_id": subnet_id}, write=False) as ctx:
            return ctx.fetch("subnet", subnet_id)

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
        with self.store.op("create_subnet", params, write=True, timeout_s=timeout_s) as ctx:
            project = ctx.project_row(project_id)
            network = ctx.row("network", network_id)
            if network["project_id"] != project_id:
                raise InvalidArgument(f"network {network_id} is not in project {project_id}")
            if not cidr:
                cidr = next_cidr(ctx)
            return ctx.create(
                "subnet",
                name=name,
                scope=project_id,
                project_id=project_id,
                parent_id=network_id,
                region=project["region"],
                key=idempotency_key,
                data={"labels": clean_labels(labels), "network_id": network_id, "cidr": cidr},
                params=params,
                charges=subnet_charges(),
            )

    def delete_subnet(self, subnet_id: str, timeout_s: float | None = None) -> None:
        with self.store.op("delete_subnet", {"subnet_id": subnet_id}, write=True, timeout_s=timeout_s) as ctx:
            subnet = ctx.row("subnet", subnet_id)
            clusters = ctx.conn.execute(
                "SELECT id, data FROM resources WHERE kind = 'cluster' AND project_id = ?",
                (subnet["project_id"],),
            ).fetchall()
            users = [row["id"] for row in clusters if records.data_of(row).get("subnet_id") == subnet_id]
            if users:
                raise FailedPrecondition(f"subnet {subnet_id} is still used by {', '.join(users)}")
            ctx.delete_row(subnet_id)
