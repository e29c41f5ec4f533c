"""Dynamic resources for the project-scoped cloud objects a fleet owns or verifies.

Each provider runs in Pulumi's dynamic-provider host process and talks to the cloud through the port
(`npa_pulumi.cloud`), so `--cloud local` and `--cloud nebius` share every line here. Providers are
stateless (the host unpickles them); everything they need arrives in the resource's properties, read
through a typed `*Inputs` model (components/args.py), and credentials come from the environment at run
time, never from state. What a provider adds to state is an `*Outputs` model.

Creates are idempotent — each first looks for the object it would create (by name and fleet labels) — so
an interrupted `up` whose pending create was cleared can simply run again.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import pulumi
from pulumi import Input
from pulumi.dynamic import CreateResult, DiffResult, ReadResult, ResourceProvider, UpdateResult

from npa_pulumi.cloud.port import Bucket as BucketRecord
from npa_pulumi.cloud.port import CloudPort, Subnet
from npa_pulumi.cloud.port import Project as ProjectRecord
from npa_pulumi.components._cloud import cloud_for
from npa_pulumi.components.args import (
    FleetResourceArgs,
    FleetResourceInputs,
    ProviderModel,
    as_props,
    with_outputs,
)
from npa_pulumi.runtime.supervision import watch_run

# In the engine's provider host (where this module is unpickled), stop when the run that started the host
# is killed, instead of idling or running terraform forever (npa_pulumi/runtime/supervision.py). Else a
# no-op.
watch_run()

GIB = 2**30


def _cloud(inputs: FleetResourceInputs) -> CloudPort:
    return cloud_for(inputs.cloud, inputs.profile, inputs.region, inputs.tenant_id)


def _labels(inputs: FleetResourceInputs) -> dict[str, str]:
    return {"npa-fleet": inputs.fleet, "npa-project": inputs.project_key, "managed-by": "npa-pulumi"}


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


@dataclass(frozen=True, kw_only=True)
class ProjectArgs(FleetResourceArgs):
    tenant_id: str
    region: str
    display_name: str
    project_id: str  # "" to find the project by name, or create it
    create_missing: bool = True


class ProjectInputs(FleetResourceInputs):
    display_name: str
    project_id: str = ""
    create_missing: bool = True


class ProjectOutputs(ProviderModel):
    resolved_id: str
    name: str
    created: bool


def _verify_project(project: ProjectRecord, tenant_id: str, region: str, expected_name: str | None) -> None:
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
        inputs = ProjectInputs.model_validate(props)
        cloud = _cloud(inputs)
        tenant_id, region = inputs.tenant_id, inputs.region
        created = False
        if inputs.project_id:
            project = cloud.get_project(inputs.project_id)
            _verify_project(project, tenant_id, region, None)
        else:
            name = inputs.display_name
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
            elif not inputs.create_missing:
                raise ProjectError(f"project {name!r} does not exist and project creation is disabled")
            else:
                project = cloud.create_project(tenant_id, name, region, labels=_labels(inputs))
                created = True
        outputs = ProjectOutputs(resolved_id=project.id, name=project.name, created=created)
        return CreateResult(id_=project.id, outs=with_outputs(props, outputs))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        project = _cloud(ProjectInputs.model_validate(props)).get_project(id_)
        outputs = ProjectOutputs(
            resolved_id=project.id, name=project.name, created=bool(props.get("created"))
        )
        return ReadResult(id_=id_, outs=with_outputs(props, outputs))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        # Projects are never deleted by a fleet: they are retained (retain_on_delete) and this provider
        # refuses to remove one even if asked.
        return None


class Project(pulumi.dynamic.Resource, module="npa", name="Project"):
    resolved_id: pulumi.Output[str]
    name: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(self, resource_name: str, args: ProjectArgs, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        super().__init__(
            ProjectProvider(),
            resource_name,
            {**as_props(args), "retain_on_delete": True, "resolved_id": None, "name": None, "created": None},
            opts,
        )


# ---------------------------------------------------------------------------------------- network


@dataclass(frozen=True, kw_only=True)
class NetworkArgs(FleetResourceArgs):
    project_id: Input[str]
    region: str
    adopt_subnet_id: str = ""  # `adopt`: bind this existing subnet (import semantics: never created)
    adopt_owned: bool = False  # ... and own it (its network was created by the tool the fleet took over)


class NetworkInputs(FleetResourceInputs):
    project_id: str
    adopt_subnet_id: str = ""
    adopt_owned: bool = False


class NetworkOutputs(ProviderModel):
    network_id: str
    subnet_id: str
    owned: bool


def _gone(props: dict[str, Any]) -> ReadResult:
    """A refresh's answer for an object the cloud no longer has: an empty ID, which makes the engine drop
    the resource from state (so the next update creates it)."""
    return ReadResult(id_="", outs=dict(props))


def _pick_subnet(subnets: list[Subnet]) -> Subnet:
    """The original tool's rule: a name containing 'default', else the lowest id."""
    defaults = [s for s in subnets if "default" in s.name]
    return sorted(defaults or subnets, key=lambda s: s.id)[0]


class NetworkProvider(_FleetProvider):
    """Binds the project to one subnet: reuses an existing one read-only, or creates (and owns) a
    network + subnet when the project has none. The choice is made once, at create, and kept."""

    replace_keys = ("project_id",)

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = NetworkInputs.model_validate(props)
        cloud = _cloud(inputs)
        project_id = inputs.project_id
        if inputs.adopt_subnet_id:
            return self._adopt(props, cloud, inputs)
        labels = _labels(inputs)
        owned_name = f"{inputs.project_key}-subnet"
        subnets = cloud.list_subnets(project_id)
        ours = [s for s in subnets if s.labels.get("npa-fleet") == inputs.fleet and s.name == owned_name]
        if ours:  # an earlier, interrupted run created it
            subnet, owned = ours[0], True
        elif subnets:
            subnet, owned = _pick_subnet(subnets), False
        else:
            networks = [n for n in cloud.list_networks(project_id) if n.name == f"{inputs.project_key}-net"]
            network = (
                networks[0]
                if networks
                else cloud.create_network(project_id, f"{inputs.project_key}-net", labels=labels)
            )
            subnet, owned = cloud.create_subnet(project_id, network.id, owned_name, labels=labels), True
        outputs = NetworkOutputs(network_id=subnet.network_id, subnet_id=subnet.id, owned=owned)
        return CreateResult(id_=subnet.id, outs=with_outputs(props, outputs))

    @staticmethod
    def _adopt(props: dict[str, Any], cloud: CloudPort, inputs: NetworkInputs) -> CreateResult:
        """The subnet an adopted cluster runs on, read and bound as it is: Pulumi's import, for a dynamic
        resource (whose provider the engine cannot call to import)."""
        subnet = cloud.get_subnet(inputs.adopt_subnet_id)
        if subnet.project_id != inputs.project_id:
            raise RuntimeError(
                f"subnet {subnet.id} is in project {subnet.project_id}, not {inputs.project_id}: not adopted"
            )
        outputs = NetworkOutputs(network_id=subnet.network_id, subnet_id=subnet.id, owned=inputs.adopt_owned)
        return CreateResult(id_=subnet.id, outs=with_outputs(props, outputs))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from npa_pulumi.cloud.errors import NotFound

        try:
            subnet = _cloud(NetworkInputs.model_validate(props)).get_subnet(id_)
        except NotFound:
            return _gone(props)  # deleted outside the fleet: the update after this refresh creates it again
        outputs = NetworkOutputs(
            network_id=subnet.network_id, subnet_id=subnet.id, owned=bool(props.get("owned"))
        )
        return ReadResult(id_=id_, outs=with_outputs(props, outputs))

    def delete(self, id_: str, props: dict[str, Any]) -> None:
        if not props.get("owned"):
            return None  # a reused subnet is read, never owned
        from npa_pulumi.cloud.absence import delete_network, delete_subnet

        inputs = NetworkInputs.model_validate(props)
        cloud = _cloud(inputs)
        # Each waits until the object is gone: a network still holding a deleting subnet refuses its delete.
        delete_subnet(cloud, id_)
        delete_network(cloud, str(props["network_id"]))
        return None


class Network(pulumi.dynamic.Resource, module="npa", name="Network"):
    network_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    owned: pulumi.Output[bool]

    def __init__(self, resource_name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        props = as_props(args)
        if not props["adopt_subnet_id"]:  # only an adoption carries them: no other stack's inputs change
            del props["adopt_subnet_id"], props["adopt_owned"]
        super().__init__(
            NetworkProvider(),
            resource_name,
            {**props, "network_id": None, "subnet_id": None, "owned": None},
            opts,
        )


# ---------------------------------------------------------------------------------------- storage


class BucketError(Exception):
    pass


@dataclass(frozen=True, kw_only=True)
class StorageArgs(FleetResourceArgs):
    """What every storage resource of a project carries."""

    project_id: Input[str]
    region: str


class StorageInputs(FleetResourceInputs):
    project_id: str


@dataclass(frozen=True, kw_only=True)
class BucketArgs(StorageArgs):
    bucket_name: Input[str]
    storage_class: str
    size_gibibytes: int
    adopt_bucket_id: str = ""  # `adopt`: bind this existing bucket (import semantics: never created)
    adopt_created: bool = False  # ... which the tool the fleet took over created (ownership evidence)


class BucketInputs(StorageInputs):
    bucket_name: str
    storage_class: str
    size_gibibytes: int
    adopt_bucket_id: str = ""
    adopt_created: bool = False


class BucketOutputs(ProviderModel):
    bucket_id: str
    created: bool


def _verify_bucket(bucket: BucketRecord, inputs: BucketInputs) -> None:
    wrong = bucket.mismatches(
        project_id=inputs.project_id,
        name=inputs.bucket_name,
        region=inputs.region,
        storage_class=inputs.storage_class,
        max_size_bytes=inputs.size_gibibytes * GIB,
    )
    if wrong:
        raise BucketError(f"bucket {bucket.name} does not match the spec: {'; '.join(wrong)}")


class BucketProvider(_FleetProvider):
    replace_keys = ("project_id", "bucket_name", "region")
    update_keys = ("storage_class", "size_gibibytes")

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = BucketInputs.model_validate(props)
        cloud = _cloud(inputs)
        if inputs.adopt_bucket_id:
            return self._adopt(props, cloud, inputs)
        existing = cloud.find_bucket(inputs.project_id, inputs.bucket_name)
        created = existing is None
        bucket = existing or cloud.create_bucket(
            inputs.project_id,
            inputs.bucket_name,
            inputs.storage_class,
            inputs.size_gibibytes * GIB,
            labels=_labels(inputs),
        )
        _verify_bucket(cloud.get_bucket(bucket.id), inputs)  # provider read-back, not the create response
        return CreateResult(
            id_=bucket.id, outs=with_outputs(props, BucketOutputs(bucket_id=bucket.id, created=created))
        )

    @staticmethod
    def _adopt(props: dict[str, Any], cloud: CloudPort, inputs: BucketInputs) -> CreateResult:
        """The bucket the original tool made for the project, read, proved against the spec and bound as it
        is: Pulumi's import, for a dynamic resource (see NetworkProvider._adopt)."""
        bucket = cloud.get_bucket(inputs.adopt_bucket_id)
        _verify_bucket(bucket, inputs)
        outputs = BucketOutputs(bucket_id=bucket.id, created=inputs.adopt_created)
        return CreateResult(id_=bucket.id, outs=with_outputs(props, outputs))

    def update(self, id_: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        raise BucketError(
            f"bucket {news['bucket_name']}: changing storage_class or size_gibibytes of an existing bucket"
            " is not supported by npa-pulumi yet; change it with the Nebius console/CLI, then update the spec"
        )

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        from npa_pulumi.cloud.errors import NotFound

        try:
            bucket = _cloud(BucketInputs.model_validate(props)).get_bucket(id_)
        except NotFound:
            return _gone(props)  # deleted outside the fleet: the update after this refresh creates it again
        outputs = BucketOutputs(bucket_id=bucket.id, created=bool(props.get("created")))
        # Size and class as they are now, so a refresh shows drift from the spec.
        live = {"size_gibibytes": bucket.max_size_bytes // GIB, "storage_class": bucket.storage_class}
        return ReadResult(id_=id_, outs={**with_outputs(props, outputs), **live})

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # buckets hold durable artifacts: retained, never deleted by a fleet destroy


class Bucket(pulumi.dynamic.Resource, module="npa", name="Bucket"):
    bucket_id: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(self, resource_name: str, args: BucketArgs, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        props = as_props(args)
        if not props["adopt_bucket_id"]:  # only an adoption carries them: no other stack's inputs change
            del props["adopt_bucket_id"], props["adopt_created"]
        super().__init__(
            BucketProvider(),
            resource_name,
            {**props, "retain_on_delete": True, "bucket_id": None, "created": None},
            opts,
        )


STORAGE_SERVICE_ACCOUNT = "npa-fleet-storage"


@dataclass(frozen=True, kw_only=True)
class ServiceAccountArgs(StorageArgs):
    account_name: str


class ServiceAccountInputs(StorageInputs):
    account_name: str


class ServiceAccountOutputs(ProviderModel):
    service_account_id: str
    created: bool = False  # this fleet created it: durable proof a teardown may delete it


class ServiceAccountProvider(_FleetProvider):
    replace_keys = ("project_id", "account_name")

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = ServiceAccountInputs.model_validate(props)
        cloud = _cloud(inputs)
        found = cloud.find_service_account(inputs.project_id, inputs.account_name)
        account = found or cloud.create_service_account(
            inputs.project_id, inputs.account_name, labels=_labels(inputs)
        )
        outputs = ServiceAccountOutputs(service_account_id=account.id, created=found is None)
        return CreateResult(id_=account.id, outs=with_outputs(props, outputs))

    def read(self, id_: str, props: dict[str, Any]) -> ReadResult:
        outputs = ServiceAccountOutputs(service_account_id=id_, created=bool(props.get("created")))
        return ReadResult(id_=id_, outs=with_outputs(props, outputs))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # storage IAM is retained with the bucket; its removal is an explicit, separate step


class ServiceAccount(pulumi.dynamic.Resource, module="npa", name="ServiceAccount"):
    service_account_id: pulumi.Output[str]
    created: pulumi.Output[bool]

    def __init__(
        self, resource_name: str, args: ServiceAccountArgs, opts: pulumi.ResourceOptions | None = None
    ):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        super().__init__(
            ServiceAccountProvider(),
            resource_name,
            {**as_props(args), "retain_on_delete": True, "service_account_id": None, "created": None},
            opts,
        )


@dataclass(frozen=True, kw_only=True)
class AccessKeyArgs(StorageArgs):
    service_account_id: Input[str]


class AccessKeyInputs(StorageInputs):
    service_account_id: str


class AccessKeyOutputs(ProviderModel):
    access_key_id: str
    aws_access_key_id: str
    secret: str  # listed in additional_secret_outputs: a Pulumi secret in state


def _rotate(cloud: CloudPort, inputs: AccessKeyInputs, keep: str) -> None:
    """Keys do not pile up: a secret is shown once, so a re-created project stack cannot reuse the old key
    and mints a new one; the account's other keys are then deleted. Only on an account that carries this
    fleet's labels (one the fleet created): a user's account and its keys are never touched."""
    from npa_pulumi.cloud.errors import NotFound

    accounts = [
        a for a in cloud.list_service_accounts(inputs.project_id) if a.id == inputs.service_account_id
    ]
    if not accounts or accounts[0].labels.get("npa-fleet") != inputs.fleet:
        return
    if accounts[0].labels.get("managed-by") != "npa-pulumi":
        return
    for key in cloud.list_access_keys(inputs.project_id, inputs.service_account_id):
        if key.id != keep:
            with contextlib.suppress(NotFound):
                cloud.delete_access_key(key.id)


class AccessKeyProvider(_FleetProvider):
    replace_keys = ("project_id", "service_account_id")

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = AccessKeyInputs.model_validate(props)
        cloud = _cloud(inputs)
        created = cloud.create_access_key(inputs.project_id, inputs.service_account_id)
        _rotate(cloud, inputs, keep=created.key.id)
        outputs = AccessKeyOutputs(
            access_key_id=created.key.id,
            aws_access_key_id=created.key.aws_access_key_id,
            secret=created.secret.get_secret_value(),
        )
        return CreateResult(id_=created.key.id, outs=with_outputs(props, outputs))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # retained with its service account (see ServiceAccountProvider.delete)


class AccessKey(pulumi.dynamic.Resource, module="npa", name="AccessKey"):
    access_key_id: pulumi.Output[str]
    aws_access_key_id: pulumi.Output[str]
    secret: pulumi.Output[str]

    def __init__(self, resource_name: str, args: AccessKeyArgs, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(retain_on_delete=True, additional_secret_outputs=["secret"])
        )
        super().__init__(
            AccessKeyProvider(),
            resource_name,
            {
                **as_props(args),
                "retain_on_delete": True,
                "access_key_id": None,
                "aws_access_key_id": None,
                "secret": None,
            },
            opts,
        )


STORAGE_ACCESS_GROUP = "npa-fleet-storage-access"


@dataclass(frozen=True, kw_only=True)
class BucketGrantArgs(StorageArgs):
    bucket_id: Input[str]
    service_account_id: Input[str]


class BucketGrantInputs(StorageInputs):
    bucket_id: str
    service_account_id: str


class BucketGrantOutputs(ProviderModel):
    grant_id: str  # the access permit
    group_id: str
    role: str


class BucketGrantProvider(_FleetProvider):
    """The storage identity's bucket-scoped grant (CloudPort.grant_bucket_access): a project group with the
    account as member and one access permit on exactly the bucket; never the tenant's editors group."""

    replace_keys = ("project_id", "bucket_id", "service_account_id")

    def create(self, props: dict[str, Any]) -> CreateResult:
        inputs = BucketGrantInputs.model_validate(props)
        grant = _cloud(inputs).grant_bucket_access(
            inputs.project_id, inputs.bucket_id, inputs.service_account_id, STORAGE_ACCESS_GROUP
        )
        outputs = BucketGrantOutputs(grant_id=grant.permit_id, group_id=grant.group_id, role=grant.role)
        return CreateResult(id_=grant.permit_id, outs=with_outputs(props, outputs))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None  # retained with its service account (see ServiceAccountProvider.delete)


class BucketGrant(pulumi.dynamic.Resource, module="npa", name="BucketGrant"):
    grant_id: pulumi.Output[str]
    group_id: pulumi.Output[str]
    role: pulumi.Output[str]

    def __init__(self, resource_name: str, args: BucketGrantArgs, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(retain_on_delete=True))
        super().__init__(
            BucketGrantProvider(),
            resource_name,
            {**as_props(args), "retain_on_delete": True, "grant_id": None, "group_id": None, "role": None},
            opts,
        )


@dataclass(frozen=True, kw_only=True)
class BucketProbeArgs(StorageArgs):
    bucket_id: Input[str]
    service_account_id: Input[str]
    access_key_id: Input[str]
    aws_access_key_id: Input[str]
    secret: Input[str]
    grant_id: Input[str]  # the probe proves the grant: it runs (again) when the grant changes


class BucketProbeInputs(StorageInputs):
    bucket_id: str
    service_account_id: str
    access_key_id: str
    aws_access_key_id: str
    secret: str
    grant_id: str = ""


class BucketProbeOutputs(ProviderModel):
    verified: bool


class BucketProbeProvider(_FleetProvider):
    """Write, read back and delete one object with the fleet's own key; the bucket is not ready otherwise."""

    update_keys = ("bucket_id", "access_key_id", "grant_id")

    def _probe(self, props: dict[str, Any]) -> BucketProbeOutputs:
        from pydantic import SecretStr

        from npa_pulumi.cloud.port import AccessKey as KeyRecord
        from npa_pulumi.cloud.port import AccessKeySecret

        inputs = BucketProbeInputs.model_validate(props)
        cloud = _cloud(inputs)
        bucket = cloud.get_bucket(inputs.bucket_id)
        key = KeyRecord(
            id=inputs.access_key_id,
            service_account_id=inputs.service_account_id,
            project_id=inputs.project_id,
            aws_access_key_id=inputs.aws_access_key_id,
        )
        cloud.probe_bucket(bucket, AccessKeySecret(key=key, secret=SecretStr(inputs.secret)))
        return BucketProbeOutputs(verified=True)

    def create(self, props: dict[str, Any]) -> CreateResult:
        outputs = self._probe(props)
        return CreateResult(id_=f"probe-{props['bucket_id']}", outs=with_outputs(props, outputs))

    def update(self, _id: str, olds: dict[str, Any], news: dict[str, Any]) -> UpdateResult:
        return UpdateResult(outs=with_outputs(news, self._probe(news)))

    def delete(self, _id: str, _props: dict[str, Any]) -> None:
        return None


class BucketProbe(pulumi.dynamic.Resource, module="npa", name="BucketProbe"):
    verified: pulumi.Output[bool]

    def __init__(self, resource_name: str, args: BucketProbeArgs, opts: pulumi.ResourceOptions | None = None):
        opts = pulumi.ResourceOptions.merge(
            opts, pulumi.ResourceOptions(additional_secret_outputs=["secret"])
        )
        super().__init__(BucketProbeProvider(), resource_name, {**as_props(args), "verified": None}, opts)
