"""Identity and IAM projects: who the caller is, the tenant's projects, and what the cloud makes along
with a new project when the `project_default_network` setting asks (its default network, subnet and the
network's default security group, made through vpc.py's helpers)."""

from __future__ import annotations

from typing import Any

from npa_pulumi.cloud.errors import FailedPrecondition, InvalidArgument
from npa_pulumi.cloud.project_defaults import DEFAULT_NETWORK_NAME as DEFAULT_NETWORK
from npa_pulumi.cloud.project_defaults import DEFAULT_SUBNET_PREFIX
from npa_pulumi.simulator import accounting as acct
from npa_pulumi.simulator import db, vpc
from npa_pulumi.simulator.store import Store
from npa_pulumi.simulator.transaction import OpContext, clean_labels

# The subject the local IAM names in what a token authenticates (the API servers' token file, say).
LOCAL_SUBJECT = "local-cloud-user"


def iam_token(tenant_id: str) -> str:
    """The IAM token the local cloud issues to its caller in `tenant_id` (`nebius iam get-access-token`'s
    stand-in, which Terraform gets as TF_VAR_iam_token). Each cluster's Kubernetes API server accepts it as
    a bearer token, as an mk8s cluster accepts its tenant's IAM tokens (kube/controlplane.py)."""
    return f"npa-local-iam-token.{tenant_id}"


class Projects:
    """The caller's identity and the tenant's IAM projects over the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    def principal(self) -> dict[str, Any]:
        with self.store.op("principal", {}, write=False) as ctx:
            return {"tenant_id": ctx.tenant_id, "profile": "local", "subject": LOCAL_SUBJECT}

    def default_region(self) -> str:
        """The local tenant's first region (its fixture's `regions[0]`): the local profile's region."""
        with self.store.op("default_region", {}, write=False) as ctx:
            return ctx.regions[0]

    # ------------------------------------------------------------------ IAM projects

    def list_projects(self, tenant_id: str) -> list[dict[str, Any]]:
        with self.store.op("list_projects", {"tenant_id": tenant_id}, write=False) as ctx:
            ctx.check_tenant(tenant_id)
            return ctx.list_of("project", "tenant_id", tenant_id)

    def get_project(self, project_id: str) -> dict[str, Any]:
        with self.store.op("get_project", {"project_id": project_id}, write=False) as ctx:
            return ctx.fetch("project", project_id)

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
        with self.store.op("create_project", params, write=True, timeout_s=timeout_s) as ctx:
            ctx.check_tenant(tenant_id)
            if region not in ctx.regions:
                raise InvalidArgument(f"unknown region {region!r}; this tenant has {', '.join(ctx.regions)}")
            project = ctx.create(
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
                _default_topology(ctx, project)
            return project

    def delete_project(self, project_id: str, timeout_s: float | None = None) -> None:
        """Delete an empty project; one that still holds anything is refused, as the IAM API does."""
        with self.store.op(
            "delete_project", {"project_id": project_id}, write=True, timeout_s=timeout_s
        ) as ctx:
            ctx.project_row(project_id)
            held = ctx.conn.execute(
                "SELECT kind, id FROM resources WHERE project_id = ? AND id != ? ORDER BY created_at, id",
                (project_id, project_id),
            ).fetchall()
            if held:
                names = ", ".join(f"{row['kind']} {row['id']}" for row in held)
                raise FailedPrecondition(f"project {project_id} is not empty: {names}")
            ctx.delete_row(project_id)


def _default_topology(ctx: OpContext, project: dict[str, Any]) -> None:
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
    network = ctx.create(
        "network",
        name=DEFAULT_NETWORK,
        scope=pid,
        project_id=pid,
        parent_id=pid,
        region=region,
        key=None,
        data={"labels": {}},
        params={"project_id": pid, "name": DEFAULT_NETWORK},
        charges=vpc.network_charges(),
    )
    name = f"{DEFAULT_SUBNET_PREFIX}{pid.rsplit('-', 1)[-1][-8:]}"
    ctx.create(
        "subnet",
        name=name,
        scope=pid,
        project_id=pid,
        parent_id=str(network["id"]),
        region=region,
        key=None,
        data={"labels": {}, "network_id": network["id"], "cidr": vpc.next_cidr(ctx)},
        params={"project_id": pid, "network_id": network["id"], "name": name},
        charges=vpc.subnet_charges(),
    )
    vpc.add_default_security_group(ctx, str(network["id"]), pid, region)
