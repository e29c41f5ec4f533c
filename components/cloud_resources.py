"""Dynamic resources for the project-scoped cloud objects a fleet owns or verifies.

Each provider runs in Pulumi's dynamic-provider host process and talks to the cloud through the port
(`npa_pulumi.cloud`), so `--cloud local` and `--cloud nebius` share every line here. Providers are
stateless (the host unpickles them); everything they need arrives in the resource's properties, and
credentials come from the environment at run time, never from state.

Creates are idempotent — each first looks for the object it would create (by name and fleet labels) — so
an interrupted `up` whose pending create was cleared can simply run again.
"""

from __future__ import annotations

import contextlib
from typing import Any

import pulumi
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.runtime.supervision import watch_run

# In the engine's provider host (where this module is unpickled), stop when the run that started the host
# is killed, instead of idling or running terraform forever (npa_pulumi/runtime/supervision.py). Else a no-op.
watch_run()

GIB = 2**30


def _cloud(props: dict[str, Any]) -> Any:
    from npa_pulumi.components._cloud import cloud_for

    return cloud_for(props)


def _labels(props: dict[str, Any]) -> dict[str, str]:
    labels = {"npa-fleet": props["fleet"], "npa-project": props["project_key"], "managed-by": "npa-pulumi"}
    return labels


def _changed(olds: dict[str, Any], news: dict[str, Any], keys: tuple[str, ...]) -> list[str]:
    return [k for k in keys if olds.get(k) != news.get(k)]


class _FleetProvider(ResourceProvider):
    """Shared diff: `replace_keys` force a replacement, `update_keys` an in-place update."""

    replace_keys: tuple[str, ...] = ()
    update_keys: tuple[str, ...] = ()

    def diff(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> DiffResult:
        replaces = _changed(olds, news, self.replace_keys)
        updates = _changed(olds, news, self.update_keys)
        return DiffResult(changes=bool(replaces or updates), replaces=replaces, delete_before_replace=False)

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs={**olds, **news})


# ---------------------------------------------------------------------------------------- project


class ProjectError(Exception):
    pass


def _verify_project(project: Any, tenant_id: str, region: str, expected_name: str | None) -> None:
    problems = []
    if project.tenant_id != tenant_id:
        problems.append(f"belongs to tenant {project.tenant_id}, not {tenant_id}")
    if region and project.region != region:
        problems.append(f"is in region {project.region}, not {region}")
    if project.state != "ACTIVE":
        problems.append(f"is {project.state}, not ACTIVE")
    if project.suspension_state not in ("", "NONE"):
        problems.append(f"is suspended ({project.suspension_state})")
    if expected_name is not None and project.name != expected_name:
        problems.append(f"is named {project.name!r}, not {expected_name!r}")
    if problems:
        raise ProjectError(f"project {project.id} " + "; ".join(problems))


class ProjectProvider(_FleetProvider):
    replace_keys = ("project_id", "display_name", "tenant_id", "region")

    def create(self, props: dict[str, Any]) -> CreateResult:
        cloud = _cloud(props)
        tenant_id, region = props["tenant_id"], props["region"]
        created = False
        if props.get("project_id"):
            project = cloud.get_project(props["project_id"])
            _verify_project(project, tenant_id, region, None)
        else:
            name = props["display_name"]
            matches = [p for p in cloud.list_projects(tenant_id) if p.name == name]
            if len(matches) > 1:
                ids = ", ".join(sorted(p.id for p in matches))
                raise ProjectError(
                    f"project name {name!r} is ambiguous in tenant {tenant_id} ({ids}); "
                    "use an explicit project_id"
                )
            if matches:
                project = matches[0]
                _verify_project(project, tenant_id, region, name)
            elif not props.get("create_missing", True):
                raise ProjectError(f"project {name!r} does not exist and project creation is disabled")
            else:
                project = cloud.create_project(tenant_id, name, region, labels=_labels(props))
                created = True
        return CreateResult(
            id_=project.id,
            outs={**props, "resolved_id": project.id, "name": project.name, "created": created},
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        project = _cloud(props).get_project(id_)
        return ReadResult(id_=id_, outs={**props, "resolved_id": project.id, "name": project.name})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # Projects are never deleted by a fleet: they are retained (retain_on_delete) and this provider
        # refuses to remove one even if asked.
        return None


class Project(pulumi.dynamic.Resource, module="npa", name="Project"):
    resolved_id: pulumi.Output[str]
    name: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        super().__init__(
            ProjectProvider(),
            resource_name,
            {**props, "retain_on_delete": True, "resolved_id": None, "name": None, "created": None},
            opts,
        )


# ---------------------------------------------------------------------------------------- network


def _pick_subnet(subnets: list[Any]) -> Any:
    """The original tool's rule: a name containing 'default', else the lowest id."""
    defaults = [s for s in subnets if "default" in s.name]
    return sorted(defaults or subnets, key=lambda s: s.id)[0]


class NetworkProvider(_FleetProvider):
    """Binds the project to one subnet: reuses an existing one read-only, or creates (and owns) a
    network + subnet when the project has none. The choice is made once, at create, and kept."""

    replace_keys = ("project_id",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        cloud = _cloud(props)
        project_id = props["project_id"]
        labels = _labels(props)
        owned_name = f"{props['project_key']}-subnet"
        subnets = cloud.list_subnets(project_id)
        ours = [s for s in subnets if s.labels.get("npa-fleet") == props["fleet"] and s.name == owned_name]
        if ours:  # an earlier, interrupted run created it
            subnet, owned = ours[0], True
        elif subnets:
            subnet, owned = _pick_subnet(subnets), False
        else:
            networks = [n for n in cloud.list_networks(project_id) if n.name == f"{props['project_key']}-net"]
            network = (
                networks[0]
                if networks
                else cloud.create_network(project_id, f"{props['project_key']}-net", labels=labels)
            )
            subnet, owned = cloud.create_subnet(project_id, network.id, owned_name, labels=labels), True
        outs = {**props, "network_id": subnet.network_id, "subnet_id": subnet.id, "owned": owned}
        return CreateResult(id_=subnet.id, outs=outs)

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        subnet = _cloud(props).get_subnet(id_)
        return ReadResult(id_=id_, outs={**props, "subnet_id": subnet.id, "network_id": subnet.network_id})

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        if not props.get("owned"):
            return None  # a reused subnet is read, never owned
        from npa_pulumi.cloud.errors import NotFound

        cloud = _cloud(props)
        with contextlib.suppress(NotFound):  # already gone counts as deleted
            cloud.delete_subnet(id_)
        with contextlib.suppress(NotFound):
            cloud.delete_network(props["network_id"])
        return None


class Network(pulumi.dynamic.Resource, module="npa", name="Network"):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    owned: pulumi.Output[bool]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        super().__init__(
            NetworkProvider(),
            resource_name,
            {**props, "network_id": None, "subnet_id": None, "owned": None},
            opts,
        )


# ---------------------------------------------------------------------------------------- storage


class BucketError(Exception):
    pass


def _verify_bucket(bucket: Any, props: dict[str, Any]) -> None:
    expected = {
        "project_id": props["project_id"],
        "name": props["bucket_name"],
        "region": props["region"],
        "storage_class": props["storage_class"],
        "max_size_bytes": int(props["size_gibibytes"]) * GIB,
        "state": "ACTIVE",
        "suspension_state": "NOT_SUSPENDED",
    }
    wrong = {k: (getattr(bucket, k), v) for k, v in expected.items() if getattr(bucket, k) != v}
    if wrong:
        detail = "; ".join(f"{k} is {got!r}, expected {want!r}" for k, (got, want) in wrong.items())
        raise BucketError(f"bucket {bucket.name} does not match the spec: {detail}")


class BucketProvider(_FleetProvider):
    replace_keys = ("project_id", "bucket_name", "region")
    update_keys = ("storage_class", "size_gibibytes")

    def create(self, props: dict[str, Any]) -> CreateResult:
        cloud = _cloud(props)
        existing = cloud.find_bucket(props["project_id"], props["bucket_name"])
        created = existing is None
        bucket = existing or cloud.create_bucket(
            props["project_id"],
            props["bucket_name"],
            props["storage_class"],
            int(props["size_gibibytes"]) * GIB,
            labels=_labels(props),
        )
        _verify_bucket(cloud.get_bucket(bucket.id), props)  # provider read-back, not the create response
        return CreateResult(id_=bucket.id, outs={**props, "bucket_id": bucket.id, "created": created})

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        raise BucketError(
            f"bucket {news['bucket_name']}: changing storage_class or size_gibibytes of an existing bucket"
            " is not supported by npa-pulumi yet; change it with the Nebius console/CLI, then update the spec"
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        bucket = _cloud(props).get_bucket(id_)
        return ReadResult(
            id_=id_,
            outs={
                **props,
                "bucket_id": bucket.id,
                "size_gibibytes": bucket.max_size_bytes // GIB,
                "storage_class": bucket.storage_class,
            },
        )

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # buckets hold durable artifacts: retained, never deleted by a fleet destroy


class Bucket(pulumi.dynamic.Resource, module="npa", name="Bucket"):
    bucket_id: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        super().__init__(
            BucketProvider(),
            resource_name,
            {**props, "retain_on_delete": True, "bucket_id": None, "created": None},
            opts,
        )


STORAGE_SERVICE_ACCOUNT = "npa-fleet-storage"


class ServiceAccountProvider(_FleetProvider):
    replace_keys = ("project_id", "account_name")

    def create(self, props: dict[str, Any]) -> CreateResult:
        cloud = _cloud(props)
        account = cloud.find_service_account(
            props["project_id"], props["account_name"]
        ) or cloud.create_service_account(props["project_id"], props["account_name"], labels=_labels(props))
        return CreateResult(id_=account.id, outs={**props, "service_account_id": account.id})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # storage IAM is retained with the bucket; its removal is an explicit, separate step


class ServiceAccount(pulumi.dynamic.Resource, module="npa", name="ServiceAccount"):
    service_account_id: pulumi.Output[str]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        super().__init__(
            ServiceAccountProvider(),
            resource_name,
            {**props, "retain_on_delete": True, "service_account_id": None},
            opts,
        )


class AccessKeyProvider(_FleetProvider):
    replace_keys = ("project_id", "service_account_id")

    def create(self, props: dict[str, Any]) -> CreateResult:
        created = _cloud(props).create_access_key(props["project_id"], props["service_account_id"])
        outs = {
            **props,
            "access_key_id": created.key.id,
            "aws_access_key_id": created.key.aws_access_key_id,
            "secret": created.secret.get_secret_value(),
        }
        return CreateResult(id_=created.key.id, outs=outs)

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # retained with its service account (see ServiceAccountProvider.delete)


class AccessKey(pulumi.dynamic.Resource, module="npa", name="AccessKey"):
    access_key_id: pulumi.Output[str]
    aws_access_key_id: pulumi.Output[str]
    secret: pulumi.Output[str]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(retain_on_delete=True, additional_secret_outputs=["secret"])
        )
        super().__init__(
            AccessKeyProvider(),
            resource_name,
            {
                **props,
                "retain_on_delete": True,
                "access_key_id": None,
                "aws_access_key_id": None,
                "secret": None,
            },
            opts,
        )


class BucketProbeProvider(_FleetProvider):
    """Write, read back and delete one object with the fleet's own key; the bucket is not ready otherwise."""

    update_keys = ("bucket_id", "access_key_id")

    def _probe(self, props: dict[str, Any]) -> None:
        from pydantic import SecretStr

        from npa_pulumi.cloud.port import AccessKey as KeyRecord
        from npa_pulumi.cloud.port import AccessKeySecret

        cloud = _cloud(props)
        bucket = cloud.get_bucket(props["bucket_id"])
        key = KeyRecord(
            id=props["access_key_id"],
            service_account_id=props["service_account_id"],
            project_id=props["project_id"],
            aws_access_key_id=props["aws_access_key_id"],
        )
        cloud.probe_bucket(bucket, AccessKeySecret(key=key, secret=SecretStr(props["secret"])))

    def create(self, props: dict[str, Any]) -> CreateResult:
        self._probe(props)
        return CreateResult(id_=f"probe-{props['bucket_id']}", outs={**props, "verified": True})

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        self._probe(news)
        return UpdateResult(outs={**news, "verified": True})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class BucketProbe(pulumi.dynamic.Resource, module="npa", name="BucketProbe"):
    verified: pulumi.Output[bool]

    def __init__(self, resource_name: str, props: dict[str, Any], opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["secret"])
        )
        super().__init__(BucketProbeProvider(), resource_name, {**props, "verified": None}, opts)
