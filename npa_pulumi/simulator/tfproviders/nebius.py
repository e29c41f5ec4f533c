"""The nebius/nebius provider's handlers (upstream-module-facts §2 and §6): every nebius_* type
upstream k8s-training uses, acting on the local cloud's database through LocalSimulator. The mk8s and
Marketplace types are in nebius_mk8s.py; compute, IAM, storage and VPC types here.

Not modelled by the local cloud (a clear diagnostic, nothing faked): NVLink instance groups (GB300
racks), MysteryBox secrets and access keys delivered through MysteryBox. IAM group memberships are
recorded in the resource's state only: the local cloud has no IAM membership table."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.simulator import ids
from npa_pulumi.simulator.simulator import LocalSimulator
from npa_pulumi.simulator.tfproviders.base import (
    CallContext,
    DataSourceHandler,
    EphemeralHandler,
    ProviderError,
    ProviderHandlers,
    ResourceHandler,
    State,
    StateOnly,
)
from npa_pulumi.simulator.tfproviders.common import (
    cloud_call,
    get_or_none,
    idempotency_key,
    labels_of,
    now_iso,
    simulator,
    size_bytes,
    wait_for,
)
from npa_pulumi.simulator.tfproviders.nebius_mk8s import Cluster, K8sRelease, NodeGroup

Record = dict[str, Any]


class _Simple:
    """A create / get / delete object whose state is its configuration plus an id and a status that
    `status_of` derives from the record; subclasses name the simulator's operations."""

    type_name = ""
    label = ""

    def _create(self, sim: LocalSimulator, planned: State, key: str) -> Record:
        raise NotImplementedError

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        raise NotImplementedError

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        raise NotImplementedError

    def status_of(self, record: Record) -> State:
        return {}

    def base_of(self, record: Record) -> State:
        """The configuration an import reconstructs from the record."""
        return {"parent_id": record.get("project_id"), "labels": record.get("labels") or None}

    def _state(self, base: State, record: Record) -> State:
        return {
            **base,
            "id": record["id"],
            "name": record.get("name") or base.get("name"),
            "created_at": base.get("created_at") or now_iso(),
            "status": self.status_of(record),
        }

    def create(self, ctx: CallContext, planned: State) -> State:
        sim = simulator(ctx)
        with cloud_call(f"creating {self.label} {planned.get('name')!r}"):
            record = self._create(sim, planned, idempotency_key(self.type_name, planned))
        return self._state(planned, record)

    def read(self, ctx: CallContext, state: State) -> State | None:
        sim = simulator(ctx)
        record = get_or_none(lambda: self._get(sim, state["id"]))
        return None if record is None else self._state(state, record)

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        sim = simulator(ctx)
        with cloud_call(f"updating {self.label} {prior['id']}"):
            if planned.get("labels") != prior.get("labels"):
                sim.set_labels(prior["id"], labels_of(planned))
            record = self._get(sim, prior["id"])
        return self._state({**planned, "created_at": prior.get("created_at")}, record)

    def delete(self, ctx: CallContext, state: State) -> None:
        sim = simulator(ctx)
        try:
            self._delete(sim, state["id"])
        except NotFound:
            return
        except CloudError as err:
            raise ProviderError(f"deleting {self.label} {state['id']}: {err.kind}", err.message) from None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        sim = simulator(ctx)
        with cloud_call(f"importing {self.label} {import_id}"):
            record = self._get(sim, import_id)
        return self._state(self.base_of(record), record)


class Filesystem(_Simple):
    type_name, label = "nebius_compute_v1_filesystem", "filesystem"

    def _create(self, sim: LocalSimulator, planned: State, key: str) -> Record:
        size = size_bytes(planned)
        if size is None:
            raise ProviderError(
                "a filesystem needs a size",
                "set one of size_bytes, size_kibibytes, size_mebibytes, size_gibibytes",
            )
        record = sim.create_filesystem(
            project_id=planned["parent_id"],
            name=planned.get("name") or "",
            size_bytes=size,
            disk_type=planned["type"],
            block_size_bytes=int(planned.get("block_size_bytes") or 4096),
            labels=labels_of(planned),
            idempotency_key=key,
        )
        return wait_for(
            sim, lambda: sim.get_filesystem(record["id"]), ("READY",), f"filesystem {record['id']}"
        )

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        return sim.get_filesystem(object_id)

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        sim.delete_filesystem(object_id)

    def _state(self, base: State, record: Record) -> State:
        state = super()._state(base, record)
        state["block_size_bytes"] = base.get("block_size_bytes") or record["block_size_bytes"]
        return state

    def base_of(self, record: Record) -> State:
        return {**super().base_of(record), "type": record["disk_type"], "size_bytes": record["size_bytes"]}

    def status_of(self, record: Record) -> State:
        return {
            "state": record["state"],
            "state_description": "",
            "size_bytes": record["size_bytes"],
            "block_size_bytes": record["block_size_bytes"],
            "reconciling": record["state"] != "READY",
            "read_write_attachments": [],
            "read_only_attachments": [],
        }


class GpuCluster(_Simple):
    type_name, label = "nebius_compute_v1_gpu_cluster", "GPU cluster"

    def _create(self, sim: LocalSimulator, planned: State, key: str) -> Record:
        return sim.create_gpu_cluster(
            project_id=planned["parent_id"],
            name=planned.get("name") or "",
            fabric=planned["infiniband_fabric"],
            idempotency_key=key,
        )

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        return sim.get_gpu_cluster(object_id)

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        sim.delete_gpu_cluster(object_id)

    def base_of(self, record: Record) -> State:
        return {"parent_id": record["project_id"], "infiniband_fabric": record["fabric"]}

    def status_of(self, record: Record) -> State:
        return {"instances": [], "reconciling": record["state"] != "READY"}


def _find(records: list[Record], object_id: str, what: str) -> Record:
    for record in records:
        if record["id"] == object_id:
            return record
    raise NotFound(f"{what} {object_id} not found")


def _projects(sim: LocalSimulator) -> list[Record]:
    return sim.list_projects(str(sim.principal()["tenant_id"]))


class ServiceAccount(_Simple):
    type_name, label = "nebius_iam_v1_service_account", "service account"

    def _create(self, sim: LocalSimulator, planned: State, key: str) -> Record:
        return sim.create_service_account(
            project_id=planned["parent_id"],
            name=planned.get("name") or "",
            labels=labels_of(planned),
            idempotency_key=key,
        )

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        # The simulator lists service accounts by project: find the project through the inventory.
        for project in _projects(sim):
            for account in sim.list_service_accounts(project["id"]):
                if account["id"] == object_id:
                    return account
        raise NotFound(f"service account {object_id} not found")

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        sim.delete_service_account(object_id)

    def status_of(self, record: Record) -> State:
        return {"active": True}


class Bucket(_Simple):
    type_name, label = "nebius_storage_v1_bucket", "bucket"

    def _create(self, sim: LocalSimulator, planned: State, key: str) -> Record:
        return sim.create_bucket(
            project_id=planned["parent_id"],
            name=planned.get("name") or "",
            storage_class=planned.get("default_storage_class") or "STANDARD",
            max_size_bytes=int(planned.get("max_size_bytes") or 0),
            labels=labels_of(planned),
            idempotency_key=key,
        )

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        return sim.get_bucket(object_id)

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        sim.delete_bucket(object_id)

    def _state(self, base: State, record: Record) -> State:
        state = super()._state(base, record)
        state["versioning_policy"] = base.get("versioning_policy") or "DISABLED"
        state["default_storage_class"] = base.get("default_storage_class") or record["storage_class"].upper()
        return state

    def status_of(self, record: Record) -> State:
        return {
            "state": record["state"],
            "suspension_state": record["suspension_state"],
            "domain_name": f"{record['name']}.storage.{record['region']}.local-cloud.invalid",
            "region": record["region"],
        }


class Subnet(_Simple):
    type_name, label = "nebius_vpc_v1_subnet", "subnet"

    def _create(self, sim: LocalSimulator, planned: State, key: str) -> Record:
        pools = ((planned.get("ipv4_private_pools") or {}).get("pools")) or []
        cidrs = [c.get("cidr") for p in pools for c in (p.get("cidrs") or []) if c.get("cidr")]
        return sim.create_subnet(
            project_id=planned["parent_id"],
            network_id=planned["network_id"],
            name=planned.get("name") or "",
            labels=labels_of(planned),
            cidr=cidrs[0] if cidrs else "",
            idempotency_key=key,
        )

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        return sim.get_subnet(object_id)

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        sim.delete_subnet(object_id)

    def base_of(self, record: Record) -> State:
        return {**super().base_of(record), "network_id": record["network_id"]}

    def status_of(self, record: Record) -> State:
        return _subnet_status(record)


def _subnet_status(record: Record) -> State:
    cidr = record.get("cidr") or ""
    return {"state": record["state"], "ipv4_private_cidrs": [cidr] if cidr else [], "ipv4_public_cidrs": []}


class AccessKey(_Simple):
    """INLINE delivery: the secret is in the create's answer, once, and kept in state (sensitive)."""

    type_name, label = "nebius_iam_v2_access_key", "access key"

    def create(self, ctx: CallContext, planned: State) -> State:
        mode = planned.get("secret_delivery_mode") or "INLINE"
        if mode != "INLINE":
            raise ProviderError(
                f"secret_delivery_mode {mode} is not served by the local cloud",
                "the local cloud has no MysteryBox; use INLINE (upstream's o11y Loki key needs MYSTERY_BOX:"
                " leave loki disabled on the local cloud)",
            )
        account = ((planned.get("account") or {}).get("service_account") or {}).get("id")
        if not account:
            raise ProviderError(
                "the local cloud serves access keys of service accounts only",
                "set account.service_account.id",
            )
        sim = simulator(ctx)
        with cloud_call("creating an access key"):
            created = sim.create_access_key(
                project_id=planned["parent_id"],
                service_account_id=account,
                idempotency_key=idempotency_key(self.type_name, planned),
            )
        state = self._state({**planned, "secret_delivery_mode": mode}, created["key"])
        state["status"]["secret"] = created["secret"]
        return state

    def _get(self, sim: LocalSimulator, object_id: str) -> Record:
        for project in _projects(sim):
            for account in sim.list_service_accounts(project["id"]):
                for key in sim.list_access_keys(account["id"]):
                    if key["id"] == object_id:
                        return key
        raise NotFound(f"access key {object_id} not found")

    def _delete(self, sim: LocalSimulator, object_id: str) -> None:
        sim.delete_access_key(object_id)

    def _state(self, base: State, record: Record) -> State:
        state = super()._state(base, record)
        # the secret is shown once: a read keeps what the create put in state
        state["status"]["secret"] = ((base.get("status") or {}).get("secret")) or None
        return state

    def base_of(self, record: Record) -> State:
        return {
            "parent_id": record["project_id"],
            "account": {"service_account": {"id": record["service_account_id"]}},
            "secret_delivery_mode": "INLINE",
        }

    def status_of(self, record: Record) -> State:
        return {
            "aws_access_key_id": record["aws_access_key_id"],
            "secret": None,
            "secret_reference_id": None,
            "algorithm": "HMAC-SHA256",
            "fingerprint": hashlib.sha256(record["aws_access_key_id"].encode()).hexdigest()[:32],
            "key_size": 256,
            "state": record["state"],
        }


class GroupMembership(StateOnly):
    """Recorded in state only: the local cloud has no IAM membership table (the group itself is the
    tenant's built-in `editors`, see IamGroup)."""

    def create(self, ctx: CallContext, planned: State) -> State:
        digest = hashlib.sha256(f"{planned['parent_id']}/{planned.get('member_id')}".encode()).hexdigest()
        return {
            **planned,
            "id": f"groupmembership-e00{digest[: ids.ID_BODY_LENGTH]}",
            "created_at": now_iso(),
            "status": {"service_account_status": {"active": True}, "tenant_user_account_status": None},
        }

    def import_(self, ctx: CallContext, import_id: str) -> State:
        raise ProviderError(
            "the local cloud cannot import a group membership",
            "memberships are not modelled by the local cloud",
        )


class NotModelled:
    """A type upstream declares but the local cloud does not model: a clear diagnostic on use."""

    def __init__(self, what: str, hint: str) -> None:
        self.what, self.hint = what, hint

    def _refuse(self) -> ProviderError:
        return ProviderError(f"the local cloud does not model {self.what}", self.hint)

    def create(self, ctx: CallContext, planned: State) -> State:
        raise self._refuse()

    def read(self, ctx: CallContext, state: State) -> State | None:
        return None

    def update(self, ctx: CallContext, planned: State, prior: State) -> State:
        raise self._refuse()

    def delete(self, ctx: CallContext, state: State) -> None:
        return None

    def import_(self, ctx: CallContext, import_id: str) -> State:
        raise self._refuse()

    def open_ephemeral(self, ctx: CallContext, config: State) -> State:
        raise self._refuse()


def _lookup(
    config: State, by_id: Callable[[str], Record], in_parent: Callable[[str], list[Record]], what: str
) -> Record:
    """A data source's object: by `id`, or by `name` + `parent_id`."""
    if config.get("id"):
        return by_id(str(config["id"]))
    name, parent = config.get("name"), config.get("parent_id")
    if not (name and parent):
        raise ProviderError(f"looking up a {what}", "set id, or name and parent_id")
    for record in in_parent(str(parent)):
        if record.get("name") == name:
            return record
    raise NotFound(f"no {what} named {name!r} in {parent}")


def _data_state(config: State, record: Record, status: State, **fields: Any) -> State:
    return {
        **config,
        "id": record["id"],
        "name": record.get("name"),
        "parent_id": record.get("project_id") or config.get("parent_id"),
        "labels": record.get("labels") or {},
        "status": status,
        **fields,
    }


class FilesystemData:
    def read_data(self, ctx: CallContext, config: State) -> State:
        sim = simulator(ctx)
        with cloud_call("reading filesystem"):
            record = _lookup(config, sim.get_filesystem, sim.list_filesystems, "filesystem")
        return _data_state(
            config,
            record,
            Filesystem().status_of(record),
            type=record["disk_type"],
            size_bytes=record["size_bytes"],
            block_size_bytes=record["block_size_bytes"],
        )


class SubnetData:
    def read_data(self, ctx: CallContext, config: State) -> State:
        sim = simulator(ctx)
        with cloud_call("reading subnet"):
            record = _lookup(config, sim.get_subnet, sim.list_subnets, "subnet")
        return _data_state(config, record, _subnet_status(record), network_id=record["network_id"])


# Every Nebius tenant has built-in IAM groups; the module looks `editors` up under the tenant id.
BUILTIN_GROUPS = ("editors", "viewers", "admins")


class IamGroupData:
    def read_data(self, ctx: CallContext, config: State) -> State:
        sim = simulator(ctx)
        tenant = sim.principal().get("tenant_id", "")
        name, parent = config.get("name"), config.get("parent_id")
        if config.get("id") or parent != tenant or name not in BUILTIN_GROUPS:
            raise ProviderError(
                "the local cloud serves the tenant's built-in groups only",
                f"look one up by name ({', '.join(BUILTIN_GROUPS)}) and parent_id = the tenant id {tenant}",
            )
        digest = hashlib.sha256(f"{tenant}/{name}".encode()).hexdigest()
        record = {"id": f"group-e00{digest[: ids.ID_BODY_LENGTH]}", "name": name, "project_id": tenant}
        status = {
            "state": "ACTIVE",
            "members_count": 0,
            "service_accounts_count": 0,
            "tenant_user_accounts_count": 0,
        }
        return _data_state(config, record, status)


_GB300 = NotModelled("NVLink instance groups (GB300 racks)", "the local cloud has no GB300 platform")
_MYSTERYBOX = NotModelled("MysteryBox secrets", "upstream reads one only for Loki: leave loki disabled")

RESOURCES: dict[str, ResourceHandler] = {
    "nebius_mk8s_v1_cluster": Cluster(),
    "nebius_mk8s_v1_node_group": NodeGroup(),
    "nebius_applications_v1alpha1_k8s_release": K8sRelease(),
    "nebius_compute_v1_filesystem": Filesystem(),
    "nebius_compute_v1_gpu_cluster": GpuCluster(),
    "nebius_compute_v1_nvl_instance_group": _GB300,
    "nebius_iam_v1_service_account": ServiceAccount(),
    "nebius_iam_v1_group_membership": GroupMembership(),
    "nebius_iam_v2_access_key": AccessKey(),
    "nebius_storage_v1_bucket": Bucket(),
    "nebius_vpc_v1_subnet": Subnet(),
}
DATA_SOURCES: dict[str, DataSourceHandler] = {
    "nebius_compute_v1_filesystem": FilesystemData(),
    "nebius_vpc_v1_subnet": SubnetData(),
    "nebius_iam_v1_group": IamGroupData(),
}
EPHEMERAL: dict[str, EphemeralHandler] = {"nebius_mysterybox_v1_secret_payload_entry": _MYSTERYBOX}

HANDLERS = ProviderHandlers(resources=RESOURCES, data_sources=DATA_SOURCES, ephemeral_resources=EPHEMERAL)
