"""The state behind the loopback Nebius fake: an in-memory tenant, stored as the SDK's own messages.

Resources are kept as the very message classes the API returns (`nebius.iam.v1.Container`,
`nebius.vpc.v1.Subnet`, ...), so what the servicers send is byte-for-byte what a real server could
send. The model is seeded from the same tenant-fixture shape as the `local` adapter (issue 4:
`tenant_id`, `regions`, `quotas`, `capacity_block_groups`, `projects`), so one scenario can run against
both.

It also holds the test controls: fault injection (fail the next N calls of a method with a code, before
or after the effect), slow operations (N polls before done), operation-level failures, latency, a
maximum page size, and a log of every call with its metadata.
"""

from __future__ import annotations

import secrets
import string
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import grpc
from nebius.api.google.rpc import Status
from nebius.api.nebius.capacity import v1 as capacity
from nebius.api.nebius.common import v1 as common
from nebius.api.nebius.compute import v1 as compute
from nebius.api.nebius.iam import v1 as iam
from nebius.api.nebius.iam import v2 as iam2
from nebius.api.nebius.mk8s import v1 as mk8s
from nebius.api.nebius.quotas import v1 as quotas
from nebius.api.nebius.registry import v1 as registry
from nebius.api.nebius.storage import v1 as storage
from nebius.api.nebius.vpc import v1 as vpc
from nebius.base.protos.dynamic import REGISTRY

_ALPHABET = string.ascii_lowercase + string.digits


# What the fake reports as every cluster's CA (a PEM-shaped placeholder: nothing verifies it here).
FAKE_CLUSTER_CA = "-----BEGIN CERTIFICATE-----\nZmFrZS1jbHVzdGVyLWNh\n-----END CERTIFICATE-----\n"


def new_id(prefix: str) -> str:
    """Nebius-style ids: `<kind>-e00<random>`."""
    return f"{prefix}-e00{''.join(secrets.choice(_ALPHABET) for _ in range(14))}"


def _usage_default(record: Mapping[str, Any]) -> dict[str, Any]:
    """Fixture rule shared with the local simulator: a record giving only a percentage has no usage."""
    out = dict(record)
    if "usage" not in out and out.get("usage_percentage") is not None:
        out["usage"] = None
    return out


def _usage_state(usage: int | None, usage_percentage: float | None) -> str:
    """What the API reports: USED with a figure, or USED with only a percentage, or UNKNOWN."""
    if usage is None:
        return "USED" if usage_percentage else "UNKNOWN"
    return "USED" if usage or usage_percentage else "NOT_USED"


def copy(message: Any) -> Any:
    return type(message).FromString(message.SerializeToString())


class FakeError(Exception):
    """Raised inside a handler; becomes the call's gRPC status (with rich details when given)."""

    def __init__(self, code: grpc.StatusCode, message: str, details: list[Any] | None = None) -> None:
        super().__init__(message)
        self.code, self.message, self.details = code, message, details or []


def quota_failure(quota: str, limit: int, requested: int, message: str) -> Any:
    """A `nebius.common.v1.ServiceError` carrying a QuotaFailure, as the API attaches to refusals."""
    return common.ServiceError(
        service="fake",
        code="QuotaFailure",
        quota_failure=common.QuotaFailure(
            violations=[
                common.QuotaFailure.Violation(
                    quota=quota, message=message, limit=str(limit), requested=str(requested)
                )
            ]
        ),
    )


def member(enum: Any, name: str) -> Any:
    """`Enum[name]`, spelled so the SDK's enum stubs type-check."""
    return getattr(enum, name)


def rpc_status(code: grpc.StatusCode, message: str, details: list[Any]) -> Any:
    packed: list[Any] = [REGISTRY.pack_any(d) for d in details]
    return Status(code=code.value[0], message=message, details=packed)


@dataclass
class Fault:
    method: str  # "ProjectService/Create" or the full "nebius.iam.v1.ProjectService/Create"
    code: grpc.StatusCode
    times: int = 1
    message: str = "injected fault"
    after_effect: bool = False  # apply the call, then fail: the client never sees the answer
    skip: int = 0  # let this many matching calls through first (e.g. fail the third page)

    def matches(self, full_method: str) -> bool:
        return full_method == self.method or full_method.endswith("." + self.method)


@dataclass
class Call:
    method: str  # "nebius.iam.v1.ProjectService/Create"
    request: Any
    metadata: dict[str, str]
    code: str = "OK"
    replayed: bool = False  # answered from the idempotency cache
    peer: str = ""  # the client's connection (`ipv4:127.0.0.1:PORT`): one process's channel
    at: float = 0.0  # time.time() when it arrived


@dataclass
class TokenInfo:
    subject: str
    tenants: set[str]
    kind: str = "user"  # user | service_account
    project_id: str = ""  # a service account's home project
    expires_at: float | None = None  # time.time() after which the API refuses it (None: never)
    via: str = ""  # how it was minted: "key" (a service account's key) or "federated"


@dataclass
class OpState:
    message: Any  # common.v1.Operation
    polls_left: int
    on_done: Callable[[], None] | None = None
    failure: tuple[grpc.StatusCode, str, list[Any]] | None = None


# Roles that let a key write, read and delete a bucket's objects (docs.nebius.com/iam/authorization/roles).
BUCKET_ROLES = frozenset({"storage.object-editor", "storage.editor", "editor", "admin"})


@dataclass
class AccessKeyState:
    key: Any  # iam.v2.AccessKey
    secret: str
    secret_fetched: bool = False


@dataclass
class FakeNebius:
    tenant_id: str = "tenant-e00wire"
    max_page_size: int = 2
    operation_polls: int = 1  # Get polls before an operation reports done (0 = done at once)
    latency_s: float = 0.0
    lock: threading.RLock = field(default_factory=threading.RLock)
    calls: list[Call] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    operation_failures: dict[str, tuple[grpc.StatusCode, str]] = field(default_factory=dict)
    tokens: dict[str, TokenInfo] = field(default_factory=dict)
    sa_public_keys: dict[str, tuple[str, bytes]] = field(default_factory=dict)  # kid -> (sa id, PEM)
    # iam.v1.FederatedCredentials by id: an OIDC issuer (with its JWKS in `jwk_set_json`) and the `sub`
    # it trusts, for the service account the exchange then acts as.
    federated_credentials: dict[str, Any] = field(default_factory=dict)
    # The audience the token service accepts in a federated OIDC token (None: any). Nebius's own rule is
    # not documented; the fake models one accepted value so the refusal path can be exercised.
    federated_audience: str | None = None
    exchanged_token_life_s: int = 3600  # expires_in of every token the exchange mints
    tenants: dict[str, Any] = field(default_factory=dict)
    projects: dict[str, Any] = field(default_factory=dict)
    networks: dict[str, Any] = field(default_factory=dict)
    subnets: dict[str, Any] = field(default_factory=dict)
    quota_allowances: dict[str, list[Any]] = field(default_factory=dict)  # tenant -> records
    capacity_blocks: dict[str, Any] = field(default_factory=dict)
    buckets: dict[str, Any] = field(default_factory=dict)
    service_accounts: dict[str, Any] = field(default_factory=dict)
    access_keys: dict[str, AccessKeyState] = field(default_factory=dict)
    groups: dict[str, Any] = field(default_factory=dict)  # iam.v1.Group by id
    memberships: dict[str, Any] = field(default_factory=dict)  # iam.v1.GroupMembership by id (parent: group)
    permits: dict[str, Any] = field(default_factory=dict)  # iam.v1.AccessPermit by id (parent: group)
    clusters: dict[str, Any] = field(default_factory=dict)
    node_groups: dict[str, Any] = field(default_factory=dict)
    filesystems: dict[str, Any] = field(default_factory=dict)
    gpu_clusters: dict[str, Any] = field(default_factory=dict)
    instances: dict[str, Any] = field(default_factory=dict)  # compute.v1.Instance by id
    disks: dict[str, Any] = field(default_factory=dict)  # compute.v1.Disk by id
    registries: dict[str, Any] = field(default_factory=dict)  # registry.v1.Registry by id
    security_groups: dict[str, Any] = field(default_factory=dict)  # vpc.v1.SecurityGroup by id
    # compute.v1.MaintenanceEvent by id, with the project it belongs to (an event names no parent)
    maintenance_events: dict[str, tuple[str, Any]] = field(default_factory=dict)
    # NodeService.SetUnhealthy: the health-check records of the hosts under instances, by instance id;
    # `set_unhealthy_denied`: the principal lacks compute.node.setUnhealthy (Nebius grants it to the VM's own
    # service account)
    unhealthy_hosts: dict[str, list[Any]] = field(default_factory=dict)
    set_unhealthy_denied: bool = False
    operations: dict[str, OpState] = field(default_factory=dict)
    idempotency: dict[tuple[str, str], Any] = field(default_factory=dict)
    objects: dict[str, dict[str, bytes]] = field(default_factory=dict)  # bucket name -> key -> body
    subnet_counter: int = 0
    s3_ignore_deletes: bool = False  # answer 204 to DELETE but keep the object (a broken store)
    s3_corrupt_reads: bool = False  # answer GET with other bytes than were written
    # As Nebius does: a key touches a bucket only when its service account is in a group that holds an
    # access permit with a storage role on that bucket (or on its project or tenant).
    s3_require_grants: bool = True
    # Service accounts allowed to create access keys, each only for itself (what `backend init
    # --ci-repository` prints: an `admin` access permit on a project holding no other account). Nebius
    # documents creating access keys as an admin's act; a service account not named here is refused.
    access_key_creators: set[str] = field(default_factory=set)
    # Where a new key's AWS id and secret come from (the service account's id in): random by default; a
    # test points it at a real S3 server's identities (SeaweedFS's, s3_support.py) so that server accepts it.
    access_key_material: Callable[[str], tuple[str, str]] | None = None
    access_key_deleted: Callable[[str], None] | None = None  # told each deleted key's AWS id

    # ------------------------------------------------------------------ seeding

    @classmethod
    def from_fixture(cls, fixture: Mapping[str, Any], **kwargs: Any) -> FakeNebius:
        fake = cls(tenant_id=fixture["tenant_id"], **kwargs)
        fake.add_tenant(fixture["tenant_id"])
        for q in fixture.get("quotas", []):
            fake.add_quota(**_usage_default(q))
        for b in fixture.get("capacity_block_groups", []):
            fake.add_capacity_block(**_usage_default(b))
        for p in fixture.get("projects", []):
            fake.add_project(p["name"], p["region"], project_id=p.get("id"))
        return fake

    def add_tenant(self, tenant_id: str) -> None:
        self.tenants[tenant_id] = iam.Container(
            metadata=common.ResourceMetadata(id=tenant_id, name=tenant_id),
            status=iam.ContainerStatus(container_state=iam.State.ACTIVE),
        )
        self.quota_allowances.setdefault(tenant_id, [])

    def add_token(
        self,
        token: str,
        subject: str,
        tenants: set[str],
        kind: str = "user",
        project_id: str = "",
        expires_at: float | None = None,
        via: str = "",
    ) -> None:
        self.tokens[token] = TokenInfo(subject, set(tenants), kind, project_id, expires_at, via)

    def add_federated_credentials(
        self, service_account_id: str, issuer_url: str, subject: str, jwk_set_json: str
    ) -> str:
        """Trust `subject` of the OIDC issuer (verified with its JWKS) to act as the service account."""
        fid = new_id("federatedcredentials")
        account = self.service_accounts[service_account_id]
        self.federated_credentials[fid] = iam.FederatedCredentials(
            metadata=common.ResourceMetadata(id=fid, parent_id=account.metadata.parent_id, name=subject),
            spec=iam.FederatedCredentialsSpec(
                oidc_provider=iam.OidcCredentialsProvider(issuer_url=issuer_url, jwk_set_json=jwk_set_json),
                federated_subject_id=subject,
                subject_id=service_account_id,
            ),
        )
        return fid

    def add_service_account(self, project_id: str, name: str) -> str:
        sa_id = new_id("serviceaccount")
        self.service_accounts[sa_id] = iam.ServiceAccount(
            metadata=common.ResourceMetadata(id=sa_id, parent_id=project_id, name=name),
            status=iam.ServiceAccountStatus(active=True),
        )
        return sa_id

    def add_project(
        self,
        name: str,
        region: str,
        *,
        project_id: str | None = None,
        tenant_id: str | None = None,
        state: Any = iam.State.ACTIVE,
        suspension: Any = iam.SuspensionState.NONE,
    ) -> str:
        pid = project_id or new_id("project")
        self.projects[pid] = iam.Container(
            metadata=common.ResourceMetadata(id=pid, parent_id=tenant_id or self.tenant_id, name=name),
            spec=iam.ContainerSpec(region=region),
            status=iam.ContainerStatus(container_state=state, suspension_state=suspension, region=region),
        )
        return pid

    def add_quota(
        self,
        name: str,
        region: str,
        limit: int | None = None,
        usage: int | None = 0,
        unit: str = "count",
        usage_percentage: float | None = None,
        usage_state: str | None = None,
        state: str = "ACTIVE",
        scope: str = "tenant",
        parent_id: str = "",
        tenant_id: str | None = None,
        id: str | None = None,
    ) -> Any:
        tenant = tenant_id or self.tenant_id
        owner = {"tenant": tenant, "project": parent_id, "unscoped": ""}[scope]
        spec = quotas.QuotaAllowanceSpec(region=region)
        if limit is not None:
            spec.limit = limit
        if usage_state is None:
            usage_state = _usage_state(usage, usage_percentage)
        record = quotas.QuotaAllowance(
            metadata=common.ResourceMetadata(id=id or new_id("quotaallowance"), parent_id=owner, name=name),
            spec=spec,
            status=quotas.QuotaAllowanceStatus(
                state=member(quotas.QuotaAllowanceStatus.State, "STATE_" + state),
                usage=usage or 0,
                unit=unit,
                usage_percentage="" if usage_percentage is None else repr(usage_percentage),
                usage_state=member(quotas.QuotaAllowanceStatus.UsageState, "USAGE_STATE_" + usage_state),
            ),
        )
        self.quota_allowances.setdefault(tenant, []).append(record)
        return record

    def add_capacity_block(
        self,
        id: str,
        region: str,
        platform: str,
        limit: int,
        fabric: str = "",
        usage: int | None = 0,
        usage_percentage: float | None = None,
        state: str = "ACTIVE",
        tenant_id: str | None = None,
    ) -> None:
        status = capacity.CapacityBlockGroupStatus(
            region=region,
            resource_affinity=capacity.ResourceAffinity(
                compute_v1=capacity.ResourceAffinityComputeV1(platform=platform, fabric=fabric)
            ),
            service="compute",
            state=member(capacity.CapacityBlockGroupStatus.State, "STATE_" + state),
            current_limit=limit,
            usage=usage or 0,
            usage_percentage="" if usage_percentage is None else repr(usage_percentage),
            usage_state=member(
                capacity.CapacityBlockGroupStatus.UsageState,
                "USAGE_STATE_" + _usage_state(usage, usage_percentage),
            ),
        )
        self.capacity_blocks[id] = capacity.CapacityBlockGroup(
            metadata=common.ResourceMetadata(id=id, parent_id=tenant_id or self.tenant_id, name=id),
            status=status,
        )

    def add_cluster(
        self,
        project_id: str,
        name: str,
        *,
        state: str = "RUNNING",
        version: str = "1.31",
        subnet_id: str = "",
    ) -> str:
        cid = new_id("mk8scluster")
        self.clusters[cid] = mk8s.Cluster(
            metadata=common.ResourceMetadata(id=cid, parent_id=project_id, name=name),
            spec=mk8s.ClusterSpec(control_plane=mk8s.ControlPlaneSpec(version=version, subnet_id=subnet_id)),
            status=mk8s.ClusterStatus(
                state=member(mk8s.ClusterStatus.State, state),
                control_plane=mk8s.ControlPlaneStatus(
                    version=version,
                    endpoints=mk8s.ControlPlaneStatusEndpoints(
                        public_endpoint=f"https://{cid}.mk8s.test:443"
                    ),
                    auth=mk8s.ControlPlaneStatusAuth(cluster_ca_certificate=FAKE_CLUSTER_CA),
                ),
            ),
        )
        return cid

    def add_node_group(
        self,
        cluster_id: str,
        name: str,
        *,
        target: int,
        ready: int,
        state: str = "RUNNING",
        platform: str = "cpu-d3",
        preset: str = "4vcpu-16gb",
        disk_gib: int = 128,
        preemptible: bool = False,
        reservation: tuple[str, list[str]] | None = None,
        quota_failure_on: tuple[str, int, int] | None = None,
    ) -> str:
        nid = new_id("mk8snodegroup")
        template = mk8s.NodeTemplate(
            resources=mk8s.ResourcesSpec(platform=platform, preset=preset),
            boot_disk=mk8s.DiskSpec(size_gibibytes=disk_gib, type=mk8s.DiskSpec.DiskType.NETWORK_SSD),
        )
        if preemptible:
            template.preemptible = mk8s.PreemptibleSpec()
        if reservation is not None:
            template.reservation_policy = mk8s.ReservationPolicy(
                policy=member(mk8s.ReservationPolicy.Policy, reservation[0]), reservation_ids=reservation[1]
            )
        events = []
        if quota_failure_on is not None:
            quota, limit, requested = quota_failure_on
            message = f"quota {quota} exceeded: limit {limit}, requested {requested}"
            events.append(
                common.RecurrentResourceEvent(
                    occurrence_count=7,
                    last_occurrence=common.ResourceEvent(
                        level=common.ResourceEvent.Level.WARN,
                        code="QuotaFailure",
                        message=message,
                        error=rpc_status(
                            grpc.StatusCode.RESOURCE_EXHAUSTED,
                            message,
                            [quota_failure(quota, limit, requested, message)],
                        ),
                    ),
                )
            )
        self.node_groups[nid] = mk8s.NodeGroup(
            metadata=common.ResourceMetadata(id=nid, parent_id=cluster_id, name=name),
            spec=mk8s.NodeGroupSpec(fixed_node_count=target, template=template),
            status=mk8s.NodeGroupStatus(
                state=member(mk8s.NodeGroupStatus.State, state),
                target_node_count=target,
                node_count=ready,
                ready_node_count=ready,
                events=events,
            ),
        )
        return nid

    def add_filesystem(self, project_id: str, name: str, size_gib: int) -> str:
        fid = new_id("computefilesystem")
        self.filesystems[fid] = compute.Filesystem(
            metadata=common.ResourceMetadata(id=fid, parent_id=project_id, name=name),
            spec=compute.FilesystemSpec(
                size_gibibytes=size_gib, type=compute.FilesystemSpec.FilesystemType.NETWORK_SSD
            ),
            status=compute.FilesystemStatus(
                state=compute.FilesystemStatus.State.READY, size_bytes=size_gib * 1024**3
            ),
        )
        return fid

    def add_gpu_cluster(self, project_id: str, name: str, fabric: str) -> str:
        gid = new_id("computegpucluster")
        self.gpu_clusters[gid] = compute.GpuCluster(
            metadata=common.ResourceMetadata(id=gid, parent_id=project_id, name=name),
            spec=compute.GpuClusterSpec(infiniband_fabric=fabric),
        )
        return gid

    def add_instance(self, project_id: str, name: str, platform: str = "cpu-d3") -> str:
        iid = new_id("computeinstance")
        self.instances[iid] = compute.Instance(
            metadata=common.ResourceMetadata(id=iid, parent_id=project_id, name=name),
            spec=compute.InstanceSpec(
                resources=compute.ResourcesSpec(platform=platform, preset="4vcpu-16gb")
            ),
            status=compute.InstanceStatus(state=compute.InstanceStatus.InstanceState.RUNNING),
        )
        return iid

    def add_maintenance(self, instance_id: str, reason: str, *, planned: bool = False) -> str:
        """An unfinished maintenance event on an instance: the instance's `maintenance_event_id` names it,
        as Nebius sets it."""
        eid = new_id("computemaintenance")
        instance = self.instances[instance_id]
        self.maintenance_events[eid] = (
            instance.metadata.parent_id,
            compute.MaintenanceEvent(
                id=eid,
                spec=compute.MaintenanceEventSpec(is_planned=planned),
                status=compute.MaintenanceEventStatus(
                    maintenance_id=f"m-{eid[-6:]}", maintenance_reason=reason
                ),
            ),
        )
        instance.status.maintenance_event_id = eid
        return eid

    def finish_maintenance(self, event_id: str) -> None:
        self.maintenance_events.pop(event_id)
        for instance in self.instances.values():
            if instance.status.maintenance_event_id == event_id:
                instance.status.maintenance_event_id = ""

    def add_disk(self, project_id: str, name: str, size_gib: int) -> str:
        did = new_id("computedisk")
        self.disks[did] = compute.Disk(
            metadata=common.ResourceMetadata(id=did, parent_id=project_id, name=name),
            spec=compute.DiskSpec(size_gibibytes=size_gib, type=compute.DiskSpec.DiskType.NETWORK_SSD),
            status=compute.DiskStatus(state=compute.DiskStatus.State.READY),
        )
        return did

    def add_registry(self, project_id: str, name: str) -> str:
        rid = new_id("registry")
        self.registries[rid] = registry.Registry(
            metadata=common.ResourceMetadata(id=rid, parent_id=project_id, name=name),
            spec=registry.RegistrySpec(),
            status=registry.RegistryStatus(state=registry.RegistryStatus.State.ACTIVE),
        )
        return rid

    def add_group(self, project_id: str, name: str, labels: dict[str, str] | None = None) -> str:
        gid = new_id("group")
        self.groups[gid] = iam.Group(
            metadata=common.ResourceMetadata(id=gid, parent_id=project_id, name=name, labels=labels or {}),
            spec=iam.GroupSpec(),
            status=iam.GroupStatus(state=iam.GroupStatus.State.ACTIVE),
        )
        return gid

    def add_security_group(
        self, project_id: str, network_id: str, name: str, *, default: bool = False
    ) -> str:
        sid = new_id("vpcsecuritygroup")
        self.security_groups[sid] = vpc.SecurityGroup(
            metadata=common.ResourceMetadata(id=sid, parent_id=project_id, name=name),
            spec=vpc.SecurityGroupSpec(network_id=network_id),
            status=vpc.SecurityGroupStatus(state=vpc.SecurityGroupStatus.State.READY, default=default),
        )
        return sid

    # ------------------------------------------------------------------ test controls

    def fail_next(
        self,
        method: str,
        code: grpc.StatusCode,
        times: int = 1,
        *,
        after_effect: bool = False,
        skip: int = 0,
        message: str = "injected fault",
    ) -> None:
        with self.lock:
            self.faults.append(Fault(method, code, times, message, after_effect, skip))

    def fail_operations_of(self, method: str, code: grpc.StatusCode, message: str) -> None:
        """Operations started by `method` finish with this error instead of OK."""
        with self.lock:
            self.operation_failures[method] = (code, message)

    def calls_to(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method or c.method.endswith("." + method)]

    def take_fault(self, full_method: str, *, after_effect: bool) -> Fault | None:
        with self.lock:
            for fault in self.faults:
                if fault.after_effect == after_effect and fault.times > 0 and fault.matches(full_method):
                    if fault.skip > 0:
                        fault.skip -= 1
                        continue
                    fault.times -= 1
                    return fault
        return None

    # ------------------------------------------------------------------ ownership and access

    def tenant_of(self, resource_id: str) -> str | None:
        """The tenant a resource lives in, walking parents; None when unknown."""
        if resource_id in self.tenants:
            return resource_id
        for table in (
            self.projects,
            self.networks,
            self.subnets,
            self.buckets,
            self.service_accounts,
            self.groups,
            self.memberships,
            self.permits,
            self.clusters,
            self.node_groups,
            self.filesystems,
            self.gpu_clusters,
            self.instances,
            self.disks,
            self.registries,
            self.security_groups,
            self.capacity_blocks,
        ):
            if resource_id in table:
                return self.tenant_of(table[resource_id].metadata.parent_id)
        if resource_id in self.access_keys:
            return self.tenant_of(self.access_keys[resource_id].key.metadata.parent_id)
        return None

    def check_access(self, token: TokenInfo, resource_id: str) -> None:
        tenant = self.tenant_of(resource_id)
        if tenant is None:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"resource {resource_id} not found")
        if tenant not in token.tenants:
            raise FakeError(
                grpc.StatusCode.PERMISSION_DENIED,
                f"{token.subject} has no access to {resource_id} (resource ID: {tenant})",
            )

    # ------------------------------------------------------------------ operations

    def start_operation(
        self, method: str, resource_id: str, description: str, on_done: Callable[[], None] | None = None
    ) -> Any:
        op = common.Operation(id=new_id("operation"), description=description, resource_id=resource_id)
        failure = self.operation_failures.get(method)
        state = OpState(op, self.operation_polls, on_done, None if failure is None else (*failure, []))
        self.operations[op.id] = state
        if state.polls_left <= 0:
            self._finish(state)
        return copy(op)

    def poll_operation(self, op_id: str) -> Any:
        state = self.operations.get(op_id)
        if state is None:
            raise FakeError(grpc.StatusCode.NOT_FOUND, f"operation {op_id} not found")
        if not state.message.HasField("status"):
            state.polls_left -= 1
            if state.polls_left <= 0:
                self._finish(state)
        return copy(state.message)

    def _finish(self, state: OpState) -> None:
        if state.failure is None:
            if state.on_done is not None:
                state.on_done()
            state.message.status = Status(code=0)
        else:
            code, message, details = state.failure
            state.message.status = rpc_status(code, message, details)

    # ------------------------------------------------------------------ usage accounting

    def allowance(self, tenant: str, name: str, region: str) -> Any | None:
        for q in self.quota_allowances.get(tenant, []):
            if q.metadata.name == name and q.spec.region == region and q.metadata.parent_id == tenant:
                return q
        return None

    def consume(self, tenant: str, name: str, region: str, amount: int) -> None:
        """Grow usage; RESOURCE_EXHAUSTED (with a QuotaFailure) when a finite limit would be passed."""
        q = self.allowance(tenant, name, region)
        if q is None:
            return
        if q.spec.HasField("limit") and q.status.usage + amount > q.spec.limit:
            message = f"quota {name} in {region} exhausted"
            raise FakeError(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                message,
                [quota_failure(name, int(q.spec.limit), int(q.status.usage) + amount, message)],
            )
        q.status.usage = max(0, int(q.status.usage) + amount)
        q.status.usage_state = (
            quotas.QuotaAllowanceStatus.UsageState.USAGE_STATE_USED
            if q.status.usage
            else quotas.QuotaAllowanceStatus.UsageState.USAGE_STATE_NOT_USED
        )

    # ------------------------------------------------------------------ access keys (shared with S3)

    def new_access_key(self, project_id: str, sa_id: str, spec: Any) -> AccessKeyState:
        kid = new_id("accesskey")
        if self.access_key_material is not None:
            aws_id, secret = self.access_key_material(sa_id)
        else:
            aws_id = "NAKI" + "".join(
                secrets.choice(string.ascii_uppercase + string.digits) for _ in range(16)
            )
            secret = secrets.token_urlsafe(30)
        key = iam2.AccessKey(
            metadata=common.ResourceMetadata(id=kid, parent_id=project_id),
            spec=spec,
            status=iam2.AccessKeyStatus(state=iam2.AccessKeyStatus.State.ACTIVE, aws_access_key_id=aws_id),
        )
        state = AccessKeyState(key, secret)
        self.access_keys[kid] = state
        return state

    def drop_access_key(self, key_id: str) -> None:
        state = self.access_keys.pop(key_id, None)
        if state is not None and self.access_key_deleted is not None:
            self.access_key_deleted(state.key.status.aws_access_key_id)

    @staticmethod
    def key_expired(state: AccessKeyState, now: float | None = None) -> bool:
        spec = state.key.spec
        if not spec.HasField("expires_at"):
            return False
        expires: float = spec.expires_at.timestamp()
        return (time.time() if now is None else now) >= expires

    def key_view(self, state: AccessKeyState) -> Any:
        """The key as the API reports it: EXPIRED once a temporary key is past its `expires_at`."""
        key = copy(state.key)
        if self.key_expired(state):
            key.status.state = iam2.AccessKeyStatus.State.EXPIRED
        return key

    def secret_for(self, aws_access_key_id: str) -> str | None:
        """The secret of a live key (an expired temporary key is refused as unknown)."""
        with self.lock:
            for state in self.access_keys.values():
                if state.key.status.aws_access_key_id == aws_access_key_id and not self.key_expired(state):
                    return state.secret
        return None

    def key_may_use_bucket(self, aws_access_key_id: str, bucket: Any) -> bool:
        """Whether the key's service account holds, through a group, a storage role on `bucket`."""
        with self.lock:
            accounts = {
                s.key.spec.account.service_account.id
                for s in self.access_keys.values()
                if s.key.status.aws_access_key_id == aws_access_key_id
            }
            groups = {m.metadata.parent_id for m in self.memberships.values() if m.spec.member_id in accounts}
            scopes = {bucket.metadata.id, bucket.metadata.parent_id, self.tenant_of(bucket.metadata.id)}
            held = [p.spec for p in self.permits.values() if p.metadata.parent_id in groups]
            return any(spec.resource_id in scopes and spec.role in BUCKET_ROLES for spec in held)

    def bucket_by_name(self, name: str) -> Any | None:
        with self.lock:
            for b in self.buckets.values():
                if b.metadata.name == name and b.status.state == storage.BucketStatus.State.ACTIVE:
                    return b
        return None

    def next_cidr(self) -> str:
        self.subnet_counter += 1
        return f"10.{self.subnet_counter}.0.0/16"


__all__ = [
    "AccessKeyState",
    "Call",
    "FakeError",
    "FakeNebius",
    "Fault",
    "TokenInfo",
    "capacity",
    "common",
    "compute",
    "copy",
    "iam",
    "iam2",
    "mk8s",
    "new_id",
    "quotas",
    "registry",
    "rpc_status",
    "storage",
    "vpc",
]
