"""The cloud port: the one typed interface through which npa-pulumi reads and changes Nebius.

Two adapters implement it: `nebius` (the official SDK against the real API) and `local` (the embedded
SQLite simulator). Nothing above this layer may tell them apart, so every record here is normalised:

* states and enums are upper-case words without the API's `STATE_` / `USAGE_STATE_` prefixes
  (`ACTIVE`, `PROVISIONING`, `NOT_USED`, ...);
* sizes are integers in bytes unless the field name says otherwise;
* secrets (access-key secrets, tokens) are `pydantic.SecretStr`, so a stray `repr` or log line never
  shows them.

Mutations block until the long-running operation has finished (or `timeout_s` passed, which raises
`OperationTimeout`). List calls are paged to completion inside the adapter.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from npa_pulumi.kube.kubeconfig import ClusterAccess

DEFAULT_OPERATION_TIMEOUT_S = 600.0
# The one role the fleet's storage identity gets, on exactly its bucket (docs.nebius.com/iam/authorization/
# roles: Object Storage roles): objects written, read and deleted, nothing else; never the editors group.
BUCKET_OBJECT_ROLE = "storage.object-editor"


class CloudRecord(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Project(CloudRecord):
    id: str
    name: str
    tenant_id: str
    region: str
    state: str = "ACTIVE"  # ACTIVE | CREATING | DELETING | DELETED
    suspension_state: str = "NONE"  # NONE | SUSPENDED | SUSPENDING
    labels: dict[str, str] = Field(default_factory=dict)


class Network(CloudRecord):
    id: str
    project_id: str
    name: str
    state: str = "READY"
    labels: dict[str, str] = Field(default_factory=dict)


class Subnet(CloudRecord):
    id: str
    project_id: str
    network_id: str
    name: str
    cidr: str = ""
    state: str = "READY"
    labels: dict[str, str] = Field(default_factory=dict)


class SecurityGroup(CloudRecord):
    """A VPC security group. `default`: the provider made it with its network (one per network, used on an
    interface that names no other); it goes with that network."""

    id: str
    project_id: str
    network_id: str
    name: str
    default: bool = False
    state: str = "READY"
    labels: dict[str, str] = Field(default_factory=dict)


class QuotaAllowance(CloudRecord):
    """One allowance record as the quotas service reports it. `limit=None` means unlimited."""

    id: str = ""
    name: str
    region: str
    limit: int | None = None
    usage: int | None = None
    usage_percentage: float | None = None  # a fraction; values above 1 mean over the limit
    usage_state: str = ""  # USED | NOT_USED | "" (unknown)
    unit: str = "count"
    state: str = "ACTIVE"
    parent_id: str = ""  # the scope: a tenant id, a project id, or "" when unscoped
    container_id: str = ""


class CapacityBlockGroup(CloudRecord):
    id: str
    parent_id: str  # tenant id
    region: str
    platform: str
    fabric: str = ""
    state: str = "ACTIVE"
    limit: int  # GPUs currently reserved by the block
    usage: int | None = None
    usage_percentage: float | None = None
    usage_state: str = ""


class Bucket(CloudRecord):
    id: str
    project_id: str
    name: str
    region: str
    storage_class: str  # standard | enhanced_throughput | intelligent
    max_size_bytes: int
    state: str = "ACTIVE"
    suspension_state: str = "NOT_SUSPENDED"
    labels: dict[str, str] = Field(default_factory=dict)

    def mismatches(
        self, *, project_id: str, name: str, region: str, storage_class: str, max_size_bytes: int
    ) -> list[str]:
        """How this bucket differs from the one a spec declares, active and unsuspended (empty: it is that
        bucket): the original's rule for reusing an existing bucket."""
        expected = {
            "project_id": project_id,
            "name": name,
            "region": region,
            "storage_class": storage_class,
            "max_size_bytes": max_size_bytes,
            "state": "ACTIVE",
            "suspension_state": "NOT_SUSPENDED",
        }
        return [
            f"{key} is {getattr(self, key)!r}, expected {want!r}"
            for key, want in expected.items()
            if getattr(self, key) != want
        ]


class ServiceAccount(CloudRecord):
    id: str
    project_id: str
    name: str
    labels: dict[str, str] = Field(default_factory=dict)


class AccessKey(CloudRecord):
    id: str
    service_account_id: str
    project_id: str
    aws_access_key_id: str
    state: str = "ACTIVE"  # ACTIVE | INACTIVE | EXPIRED | DELETING
    expires_at: datetime | None = None  # None: the key never expires


class AccessKeySecret(CloudRecord):
    """Returned once, at creation. The secret is never readable again."""

    key: AccessKey
    secret: SecretStr


class BucketGrant(CloudRecord):
    """A bucket-scoped grant: the service account is a member of `group_id`, which holds one access permit
    with `role` on exactly `bucket_id` (Nebius grants roles to groups through access permits)."""

    group_id: str
    membership_id: str
    permit_id: str
    bucket_id: str
    service_account_id: str
    role: str
    created: bool = False  # anything of it was created by this call (else all of it existed)


class Filesystem(CloudRecord):
    id: str
    project_id: str
    name: str
    size_bytes: int
    state: str = "READY"
    labels: dict[str, str] = Field(default_factory=dict)


class Instance(CloudRecord):
    """A compute virtual machine of the project. The fleet creates none itself; a cluster's nodes may be
    listed among them, so a teardown judges a project's instances once its clusters are gone."""

    id: str
    project_id: str
    name: str
    platform: str = ""
    state: str = "RUNNING"  # CREATING | STARTING | RUNNING | STOPPING | STOPPED | DELETING | ERROR
    labels: dict[str, str] = Field(default_factory=dict)


class MaintenanceEvent(CloudRecord):
    """An unfinished maintenance event of one of the project's compute instances (a cluster node's VM), as
    the compute MaintenanceService lists it (`nebius compute maintenance list-active --parent-id`). The
    adapter joins each event to the instance whose `maintenance_event_id` names it; `instance_name` is the
    node's name in the cluster (mk8s names a node after its instance)."""

    id: str
    project_id: str
    instance_id: str = ""
    instance_name: str = ""
    maintenance_id: str = ""
    reason: str = ""  # e.g. HW_GPU_XID_79, HW_GPU_PCI_FALLEN_OFF_BUS, HW_IB_LINK_DOWN
    planned: bool = False
    created_at: str = ""  # RFC 3339, "" when unknown
    sla_deadline: str = ""


class NodeRepair(CloudRecord):
    """What the cloud did to a cluster node's instance for the repair ladder (`recover_node`,
    `remove_node`). mk8s names a node after its instance, so the node's name finds it in its project."""

    instance_id: str
    instance_name: str
    action: str  # RECOVERED (stopped and started again) | DELETED (its node group replaces it)
    state: str = ""  # the instance's state once the call returned (RUNNING, DELETING, ...)


class Disk(CloudRecord):
    id: str
    project_id: str
    name: str
    size_bytes: int = 0
    state: str = "READY"
    labels: dict[str, str] = Field(default_factory=dict)


class Registry(CloudRecord):
    """A container registry."""

    id: str
    project_id: str
    name: str
    state: str = "READY"
    labels: dict[str, str] = Field(default_factory=dict)


class IamGroup(CloudRecord):
    """An IAM group of the project (a bucket grant's group is one: `grant_bucket_access`)."""

    id: str
    project_id: str
    name: str
    state: str = "ACTIVE"
    labels: dict[str, str] = Field(default_factory=dict)


class GpuCluster(CloudRecord):
    id: str
    project_id: str
    name: str
    fabric: str
    state: str = "READY"


class Cluster(CloudRecord):
    """A Managed Kubernetes (mk8s) cluster."""

    id: str
    project_id: str
    name: str
    state: str  # PROVISIONING | RUNNING | DELETING | ERROR
    endpoint: str = ""
    k8s_version: str = ""
    subnet_id: str = ""
    labels: dict[str, str] = Field(default_factory=dict)


class NodeGroupCondition(CloudRecord):
    """An event on a node group, e.g. a QuotaFailure that keeps it PROVISIONING."""

    kind: str
    message: str
    quota: str = ""
    limit: int | None = None
    requested: int | None = None


class NodeGroup(CloudRecord):
    id: str
    cluster_id: str
    name: str
    state: str  # PROVISIONING | RUNNING | DELETING | ERROR
    target_node_count: int
    ready_node_count: int = 0
    platform: str = ""
    preset: str = ""
    preemptible: bool = False
    reservation_policy: str = ""  # "" | AUTO | FORBID | STRICT
    reservation_ids: tuple[str, ...] = ()
    disk_size_gib: int = 0
    conditions: tuple[NodeGroupCondition, ...] = ()
    # The Kubernetes version its nodes run (`upgrade run` checks the skew against the control plane's);
    # "" when the cloud does not say.
    version: str = ""


class Principal(CloudRecord):
    """Who the adapter authenticates as, and the tenant that principal belongs to."""

    tenant_id: str
    profile: str = ""
    subject: str = ""
    project_id: str = ""  # a service account's own project ("" for a user account)


@runtime_checkable
class CloudPort(Protocol):
    """Everything the fleet needs from Nebius. See the module docstring for the conventions."""

    name: str  # "local" | "nebius"

    # identity
    def principal(self) -> Principal: ...
    def default_region(self) -> str:
        """The region the profile's configuration points at, for specs that leave `region` empty: the
        region of a Nebius profile's `parent-id` project (the local cloud: its tenant's first region);
        "" when the configuration names none."""
        ...

    def access_token(self) -> SecretStr:
        """A short-lived IAM token for the recipe's `TF_VAR_iam_token`; never stored."""
        ...

    # IAM projects
    def list_projects(self, tenant_id: str) -> list[Project]: ...
    def get_project(self, project_id: str) -> Project: ...
    def create_project(
        self,
        tenant_id: str,
        name: str,
        region: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Project: ...

    def delete_project(self, project_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        """Delete an empty project (the cloud refuses one that still holds anything)."""
        ...

    # VPC
    def list_networks(self, project_id: str) -> list[Network]: ...
    def get_network(self, network_id: str) -> Network: ...
    def create_network(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Network: ...
    def delete_network(self, network_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None: ...
    def list_subnets(self, project_id: str) -> list[Subnet]: ...
    def get_subnet(self, subnet_id: str) -> Subnet: ...
    def create_subnet(
        self,
        project_id: str,
        network_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Subnet: ...
    def delete_subnet(self, subnet_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None: ...
    def list_security_groups(self, project_id: str) -> list[SecurityGroup]:
        """The project's security groups, each network's provider-made default one included."""
        ...

    def delete_security_group(
        self, security_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None: ...

    # quotas and reserved capacity
    def list_quota_allowances(self, tenant_id: str) -> list[QuotaAllowance]: ...
    def list_capacity_block_groups(self, tenant_id: str) -> list[CapacityBlockGroup]: ...
    def get_capacity_block_group(self, block_id: str) -> CapacityBlockGroup: ...

    # object storage
    def get_bucket(self, bucket_id: str) -> Bucket: ...
    def find_bucket(self, project_id: str, name: str) -> Bucket | None: ...
    def list_buckets(self, project_id: str) -> list[Bucket]: ...
    def count_bucket_objects(self, bucket_id: str) -> int:
        """How many objects the bucket holds (0: empty); a teardown refuses a non-empty bucket."""
        ...

    def create_bucket(
        self,
        project_id: str,
        name: str,
        storage_class: str,
        max_size_bytes: int,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> Bucket: ...
    def delete_bucket(self, bucket_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None: ...
    def probe_bucket(self, bucket: Bucket, credentials: AccessKeySecret) -> None:
        """Write, read back and delete one object with the given key; raise on any mismatch."""
        ...

    # IAM service accounts and access keys
    def find_service_account(self, project_id: str, name: str) -> ServiceAccount | None: ...
    def list_service_accounts(self, project_id: str) -> list[ServiceAccount]: ...
    def list_access_keys(self, project_id: str, service_account_id: str) -> list[AccessKey]:
        """The account's access keys (never a secret: those are shown once, at creation)."""
        ...

    def create_service_account(
        self,
        project_id: str,
        name: str,
        labels: dict[str, str] | None = None,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> ServiceAccount: ...
    def delete_service_account(
        self, service_account_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None: ...
    def create_access_key(
        self,
        project_id: str,
        service_account_id: str,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
        expires_at: datetime | None = None,
    ) -> AccessKeySecret:
        """A new access key of the account (a child of `project_id`, the account's project); with
        `expires_at` (timezone-aware) a temporary one that the cloud refuses from then on."""
        ...

    def delete_access_key(
        self, access_key_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None: ...
    def grant_bucket_access(
        self,
        project_id: str,
        bucket_id: str,
        service_account_id: str,
        group_name: str,
        timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S,
    ) -> BucketGrant:
        """Let the service account use exactly this bucket, idempotently: group `group_name` in the
        project (created if missing, with the account's labels: whoever owns the account owns its grant's
        group), the account its member, and one access permit of the group on the bucket with
        `BUCKET_OBJECT_ROLE`. Without it, a key of the account cannot touch the bucket."""
        ...

    def list_groups(self, project_id: str) -> list[IamGroup]:
        """The project's IAM groups (not the tenant's)."""
        ...

    def delete_group(self, group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None:
        """Delete an IAM group with its memberships and access permits."""
        ...

    # Managed Kubernetes and what hangs off it
    def get_cluster(self, cluster_id: str) -> Cluster: ...
    def list_clusters(self, project_id: str) -> list[Cluster]: ...
    def kubernetes_api_available(self) -> bool:
        """Whether clusters of this cloud have a Kubernetes API to reach (the local cloud can run
        without API servers, for tests that never look inside a cluster)."""
        ...

    def object_storage_endpoint(self, region: str) -> str:
        """The S3 endpoint that serves this cloud's buckets in `region` (the local cloud starts its own
        server first when it does not run), for `backend init`."""
        ...

    def cluster_access(self, cluster_id: str) -> ClusterAccess:
        """How to reach a RUNNING cluster's API: its address, CA and a credential (Nebius: the `nebius`
        CLI as an exec plugin pinned to the profile, never a stored token)."""
        ...

    def delete_cluster(self, cluster_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S) -> None: ...
    def get_node_group(self, node_group_id: str) -> NodeGroup: ...
    def list_node_groups(self, cluster_id: str) -> list[NodeGroup]: ...
    def list_project_node_groups(self, project_id: str, cluster_ids: Sequence[str]) -> list[NodeGroup]:
        """The node groups of these clusters of the project (its clusters as just listed), for fleet-wide
        reads (cloud/project_reads.py): one query where the cloud can answer it so (the local cloud); on
        Nebius, whose node groups are listed per cluster, one list per cluster."""
        ...

    def delete_node_group(
        self, node_group_id: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> None: ...
    def list_filesystems(self, project_id: str) -> list[Filesystem]: ...
    def list_gpu_clusters(self, project_id: str) -> list[GpuCluster]: ...

    # what else a project can hold (read before a project is deleted: it must hold none of it)
    def list_instances(self, project_id: str) -> list[Instance]: ...
    def list_disks(self, project_id: str) -> list[Disk]: ...
    def list_registries(self, project_id: str) -> list[Registry]: ...

    # day two: what Nebius itself is doing to the project's nodes
    def list_active_maintenance(self, project_id: str) -> list[MaintenanceEvent]:
        """The project's unfinished maintenance events, each joined to its instance: one list of events
        and one of instances per project, never a call per node."""
        ...

    # day two: the repair ladder's calls on one node's instance (engine/health/actions.py)
    def recover_node(
        self, project_id: str, node: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> NodeRepair:
        """Nebius' recovery of a cluster node: its instance (named as the node) stopped and started again
        (compute v1 InstanceService Stop, then Start), as Nebius recovers a node with NebiusGPUError
        itself ("stop the node for recovery"): it keeps its id and name, and comes back with a new boot
        id. NotFound when the project has no instance of that name."""
        ...

    def remove_node(
        self, project_id: str, node: str, timeout_s: float = DEFAULT_OPERATION_TIMEOUT_S
    ) -> NodeRepair:
        """Remove a cluster node from its node group: its instance (named as the node) deleted (compute v1
        InstanceService Delete; mk8s has no per-node call), so that the group, which keeps its target
        node count, creates another in its place (a new node, a new name). NotFound as recover_node."""
        ...
