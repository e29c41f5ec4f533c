"""`LocalCloud`: the `CloudPort` adapter over the embedded simulator.

It implements the port exactly, so the engine cannot tell it from the `nebius` adapter, and adds the
simulator-only operations soperator's stand-in recipe needs (creating mk8s clusters, node groups, filesystems
and GPU clusters, each with an optional client-supplied idempotency key). Every create also accepts an
`idempotency_key`: a replay with the same key and request returns the object created the first time.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from pydantic import SecretStr

from npa_pulumi.cloud.port import (
    BUCKET_OBJECT_ROLE,
    DEFAULT_OPERATION_TIMEOUT_S,
    AccessKey,
    AccessKeySecret,
    Bucket,
    BucketGrant,
    CapacityBlockGroup,
    CloudPort,
    CloudRecord,
    Cluster,
    Disk,
    Filesystem,
    GpuCluster,
    IamGroup,
    Instance,
    MaintenanceEvent,
    Network,
    NodeGroup,
    NodeGroupCondition,
    NodeRepair,
    Principal,
    Project,
    QuotaAllowance,
    Registry,
    SecurityGroup,
    ServiceAccount,
    Subnet,
)
from npa_pulumi.cloud.retry import call_with_retry
from npa_pulumi.kube.kubeconfig import ClientCertificate, ClusterAccess
from npa_pulumi.simulator import seaweedd
from npa_pulumi.simulator.projects import iam_token
from npa_pulumi.simulator.simulator import LocalSimulator

R = TypeVar("R", bound=CloudRecord)


def _as(model: type[R], record: dict[str, Any]) -> R:
    """The port record from a simulator dict (which may carry extra, simulator-only fields)."""
    return model.model_validate({k: v for k, v in record.items() if k in model.model_fields})


def _node_group(record: dict[str, Any]) -> NodeGroup:
    fields = {k: v for k, v in record.items() if k in NodeGroup.model_fields}
    fields["reservation_ids"] = tuple(record.get("reservation_ids", ()))
    fields["conditions"] = tuple(NodeGroupCondition.model_validate(c) for c in record.get("conditions", ()))
    return NodeGroup.model_validate(fields)


_OPERATION_S = DEFAULT_OPERATION_TIMEOUT_S  # the node repairs' default wait, as for every other operation


class LocalCloud:
    """The local Nebius simulator behind the cloud port. `directory` defaults to
    `$NPA_LOCAL_CLOUD_DIR` or `~/.npa-pulumi/local-cloud/`; it is seeded from the default tenant fixture
    on first use."""

    name = "local"

    def __init__(self, directory: Path | None = None, *, auto_init: bool = True) -> None:
        self.simulator = LocalSimulator(directory, auto_init=auto_init)

    @property
    def directory(self) -> Path:
        return self.simulator.directory

    # identity
    def principal(self) -> Principal:
        return _as(Principal, self.simulator.principal())

    def default_region(self) -> str:
        return self.simulator.default_region()

    def access_token(self) -> SecretStr:
        """The local IAM's token, which the Terraform bridge passes as TF_VAR_iam_token as it does for
        Nebius: each cluster's Kubernetes API server authenticates it (simulator/projects.py iam_token)."""
        return SecretStr(iam_token(self.principal().tenant_id))

    # IAM projects
    def list_projects(self, tenant_id: str) -> list[Project]:
        return [_as(Project, p) for p in self.simulator.list_projects(tenant_id)]

    def get_project(self, project_id: str) -> Project:
        return _as(Project, self.simulator.get_project(project_id))

    def create_project(
        self,
        tenant_id: str,
        name: str,
        region: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        idempotency_key: str | None = None,
    ) -> Project:
        record = self.simulator.create_project(
            tenant_id, name, region, labels, idempotency_key=idempotency_key, timeout_s=timeout_s
        )
        return _as(Project, record)

    # VPC
    def delete_project(self, project_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_project(project_id, timeout_s=timeout_s)

    def list_networks(self, project_id: str) -> list[Network]:
        return [_as(Network, n) for n in self.simulator.list_networks(project_id)]

    def get_network(self, network_id: str) -> Network:
        return _as(Network, self.simulator.get_network(network_id))

    def create_network(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        idempotency_key: str | None = None,
    ) -> Network:
        record = self.simulator.create_network(
            project_id, name, labels, idempotency_key=idempotency_key, timeout_s=timeout_s
        )
        return _as(Network, record)

    def delete_network(self, network_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_network(network_id, timeout_s=timeout_s)

    def list_subnets(self, project_id: str) -> list[Subnet]:
        return [_as(Subnet, s) for s in self.simulator.list_subnets(project_id)]

    def get_subnet(self, subnet_id: str) -> Subnet:
        return _as(Subnet, self.simulator.get_subnet(subnet_id))

    def create_subnet(
        self,
        project_id: str,
        network_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        idempotency_key: str | None = None,
        cidr: str = "",
    ) -> Subnet:
        record = self.simulator.create_subnet(
            project_id,
            network_id,
            name,
            labels,
            cidr=cidr,
            idempotency_key=idempotency_key,
            timeout_s=timeout_s,
        )
        return _as(Subnet, record)

    def delete_subnet(self, subnet_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_subnet(subnet_id, timeout_s=timeout_s)

    # quotas and reserved capacity
    def list_quota_allowances(self, tenant_id: str) -> list[QuotaAllowance]:
        return [_as(QuotaAllowance, q) for q in self.simulator.list_quota_allowances(tenant_id)]

    def list_capacity_block_groups(self, tenant_id: str) -> list[CapacityBlockGroup]:
        return [_as(CapacityBlockGroup, b) for b in self.simulator.list_capacity_block_groups(tenant_id)]

    def get_capacity_block_group(self, block_id: str) -> CapacityBlockGroup:
        return _as(CapacityBlockGroup, self.simulator.get_capacity_block_group(block_id))

    # object storage
    def get_bucket(self, bucket_id: str) -> Bucket:
        return _as(Bucket, self.simulator.get_bucket(bucket_id))

    def find_bucket(self, project_id: str, name: str) -> Bucket | None:
        found = self.simulator.find_bucket(project_id, name)
        return None if found is None else _as(Bucket, found)

    def list_buckets(self, project_id: str) -> list[Bucket]:
        return [_as(Bucket, b) for b in self.simulator.list_buckets(project_id)]

    def count_bucket_objects(self, bucket_id: str) -> int:
        return self.simulator.count_bucket_objects(bucket_id)

    def create_bucket(
        self,
        project_id: str,
        name: str,
        storage_class: str,
        max_size_bytes: int,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        idempotency_key: str | None = None,
    ) -> Bucket:
        record = self.simulator.create_bucket(
            project_id,
            name,
            storage_class,
            max_size_bytes,
            labels,
            idempotency_key=idempotency_key,
            timeout_s=timeout_s,
        )
        return _as(Bucket, record)

    def delete_bucket(self, bucket_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_bucket(bucket_id, timeout_s=timeout_s)

    def probe_bucket(self, bucket: Bucket, credentials: AccessKeySecret) -> None:
        """Write, read back and delete one object with the given key; raise on any mismatch."""
        self.simulator.probe_bucket(
            bucket.id,
            credentials.key.id,
            credentials.key.aws_access_key_id,
            credentials.secret.get_secret_value(),
        )

    # IAM service accounts and access keys
    def find_service_account(self, project_id: str, name: str) -> ServiceAccount | None:
        found = self.simulator.find_service_account(project_id, name)
        return None if found is None else _as(ServiceAccount, found)

    def list_service_accounts(self, project_id: str) -> list[ServiceAccount]:
        return [_as(ServiceAccount, a) for a in self.simulator.list_service_accounts(project_id)]

    def list_access_keys(self, project_id: str, service_account_id: str) -> list[AccessKey]:
        keys = self.simulator.list_access_keys(service_account_id)
        return [_as(AccessKey, k) for k in keys if k.get("project_id") == project_id]

    def create_service_account(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        idempotency_key: str | None = None,
    ) -> ServiceAccount:
        record = self.simulator.create_service_account(
            project_id, name, labels, idempotency_key=idempotency_key, timeout_s=timeout_s
        )
        return _as(ServiceAccount, record)

    def delete_service_account(
        self, service_account_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None:
        self.simulator.delete_service_account(service_account_id, timeout_s=timeout_s)

    def create_access_key(
        self,
        project_id: str,
        service_account_id: str,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        expires_at: datetime | None = None,
    ) -> AccessKeySecret:
        created = self.simulator.create_access_key(
            project_id,
            service_account_id,
            timeout_s=timeout_s,
            expires_at=None if expires_at is None else expires_at.timestamp(),
        )
        return AccessKeySecret(key=_as(AccessKey, created["key"]), secret=SecretStr(created["secret"]))

    def delete_access_key(self, access_key_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_access_key(access_key_id, timeout_s=timeout_s)

    def grant_bucket_access(
        self,
        project_id: str,
        bucket_id: str,
        service_account_id: str,
        group_name: str,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> BucketGrant:
        record = self.simulator.grant_bucket_access(
            project_id, bucket_id, service_account_id, group_name, BUCKET_OBJECT_ROLE
        )
        return _as(BucketGrant, record)

    def list_groups(self, project_id: str) -> list[IamGroup]:
        return [_as(IamGroup, g) for g in self.simulator.list_groups(project_id)]

    def delete_group(self, group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_group(group_id, timeout_s=timeout_s)

    # VPC security groups
    def list_security_groups(self, project_id: str) -> list[SecurityGroup]:
        return [_as(SecurityGroup, g) for g in self.simulator.list_security_groups(project_id)]

    def delete_security_group(
        self, security_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None:
        self.simulator.delete_security_group(security_group_id, timeout_s=timeout_s)

    # what else a project can hold
    def list_instances(self, project_id: str) -> list[Instance]:
        return [_as(Instance, i) for i in self.simulator.list_instances(project_id)]

    def list_disks(self, project_id: str) -> list[Disk]:
        return [_as(Disk, d) for d in self.simulator.list_disks(project_id)]

    def list_registries(self, project_id: str) -> list[Registry]:
        return [_as(Registry, r) for r in self.simulator.list_registries(project_id)]

    def list_active_maintenance(self, project_id: str) -> list[MaintenanceEvent]:
        return [_as(MaintenanceEvent, e) for e in self.simulator.list_active_maintenance(project_id)]

    def recover_node(self, project_id: str, node: str, timeout_s: float = _OPERATION_S) -> NodeRepair:
        return _as(NodeRepair, self.simulator.recover_node(project_id, node, timeout_s=timeout_s))

    def remove_node(self, project_id: str, node: str, timeout_s: float = _OPERATION_S) -> NodeRepair:
        return _as(NodeRepair, self.simulator.remove_node(project_id, node, timeout_s=timeout_s))

    # Managed Kubernetes and what hangs off it
    def get_cluster(self, cluster_id: str) -> Cluster:
        return _as(Cluster, self.simulator.get_cluster(cluster_id))

    def list_clusters(self, project_id: str) -> list[Cluster]:
        return [_as(Cluster, c) for c in self.simulator.list_clusters(project_id)]

    def delete_cluster(self, cluster_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_cluster(cluster_id, timeout_s=timeout_s)

    def kubernetes_api_available(self) -> bool:
        return self.simulator.kubernetes_api_enabled()

    def object_storage_endpoint(self, region: str) -> str:
        return seaweedd.ensure_running(self.directory)

    def cluster_access(self, cluster_id: str) -> ClusterAccess:
        creds = self.simulator.get_cluster_credentials(cluster_id)
        certificate = ClientCertificate(creds["client_certificate_pem"], creds["client_key_pem"])
        return ClusterAccess(creds["server"], creds["ca_pem"], certificate)

    def get_node_group(self, node_group_id: str) -> NodeGroup:
        return _node_group(self.simulator.get_node_group(node_group_id))

    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]:
        return [_node_group(g) for g in self.simulator.list_node_groups(cluster_id)]

    def list_project_node_groups(self, project_id: str, cluster_ids: Sequence[str]) -> list[NodeGroup]:
        wanted = set(cluster_ids)
        groups = self.simulator.list_project_node_groups(project_id)
        return [_node_group(g) for g in groups if g["cluster_id"] in wanted]

    def delete_node_group(self, node_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_node_group(node_group_id, timeout_s=timeout_s)

    def list_filesystems(self, project_id: str) -> list[Filesystem]:
        return [_as(Filesystem, f) for f in self.simulator.list_filesystems(project_id)]

    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]:
        return [_as(GpuCluster, g) for g in self.simulator.list_gpu_clusters(project_id)]

    # ---- simulator-only operations (what the recipes on the local cloud create; not part of the port)

    def create_cluster(
        self,
        project_id: str,
        name: str,
        subnet_id: str,
        k8s_version: str = "",
        public_endpoint: bool = True,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Cluster:
        record = self.simulator.create_cluster(
            project_id,
            name,
            subnet_id,
            k8s_version=k8s_version,
            public_endpoint=public_endpoint,
            labels=labels,
            idempotency_key=idempotency_key,
            timeout_s=timeout_s,
        )
        return _as(Cluster, record)

    def create_node_group(
        self,
        cluster_id: str,
        name: str,
        node_count: int,
        platform: str,
        preset: str = "",
        *,
        disk_type: str = "NETWORK_SSD",
        disk_size_gib: int = 128,
        preemptible: bool = False,
        reservation_policy: str | None = None,
        reservation_ids: list[str] | None = None,
        gpu_cluster_id: str | None = None,
        filesystems: list[dict[str, str]] | None = None,
        labels: dict[str, str] | None = None,
        idempotency_key: str | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> NodeGroup:
        """Accepted even when its instances exceed quota: it then stays PROVISIONING with a
        QuotaFailure condition, as on the real service."""
        record = self.simulator.create_node_group(
            cluster_id,
            name,
            node_count,
            platform,
            preset,
            disk_type=disk_type,
            disk_size_gib=disk_size_gib,
            preemptible=preemptible,
            reservation_policy=reservation_policy,
            reservation_ids=reservation_ids,
            gpu_cluster_id=gpu_cluster_id,
            filesystems=filesystems,
            labels=labels,
            idempotency_key=idempotency_key,
            timeout_s=timeout_s,
        )
        return _node_group(record)

    def create_filesystem(
        self,
        project_id: str,
        name: str,
        size_bytes: int,
        disk_type: str = "NETWORK_SSD",
        idempotency_key: str | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Filesystem:
        record = self.simulator.create_filesystem(
            project_id, name, size_bytes, disk_type, idempotency_key=idempotency_key, timeout_s=timeout_s
        )
        return _as(Filesystem, record)

    def get_filesystem(self, filesystem_id: str) -> Filesystem:
        return _as(Filesystem, self.simulator.get_filesystem(filesystem_id))

    def delete_filesystem(self, filesystem_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_filesystem(filesystem_id, timeout_s=timeout_s)

    def create_gpu_cluster(
        self,
        project_id: str,
        name: str,
        fabric: str,
        idempotency_key: str | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> GpuCluster:
        record = self.simulator.create_gpu_cluster(
            project_id, name, fabric, idempotency_key=idempotency_key, timeout_s=timeout_s
        )
        return _as(GpuCluster, record)

    def get_gpu_cluster(self, gpu_cluster_id: str) -> GpuCluster:
        return _as(GpuCluster, self.simulator.get_gpu_cluster(gpu_cluster_id))

    def delete_gpu_cluster(self, gpu_cluster_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        self.simulator.delete_gpu_cluster(gpu_cluster_id, timeout_s=timeout_s)


def _retrying(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
    """`method` with `Unavailable` retried where that is safe (see `npa_pulumi.cloud.retry`): always for a
    read; for a create only when it carries an idempotency key, so a retried create cannot create twice."""
    read = name == "principal" or name.startswith(("get_", "list_", "find_", "count_"))

    @functools.wraps(method)
    def wrapper(self: LocalCloud, *args: Any, **kwargs: Any) -> Any:
        safe = read or kwargs.get("idempotency_key") is not None
        return call_with_retry(lambda: method(self, *args, **kwargs), what=f"local cloud {name}", safe=safe)

    return wrapper


# Every read and every create of the adapter goes through the retry rule (the dynamic providers and the
# engine's live checks reach the simulator only through here). Deletes and probes are not repeated.
for _name in list(vars(LocalCloud)):
    if _name == "principal" or _name.startswith(("get_", "list_", "find_", "create_", "count_")):
        setattr(LocalCloud, _name, _retrying(_name, getattr(LocalCloud, _name)))


def as_port(cloud: LocalCloud) -> CloudPort:
    """Typed view of a LocalCloud as the port; mypy checks here that it implements `CloudPort` exactly."""
    return cloud
