"""SDK messages -> the port's normalised records.

The API reports states as enums, some with `STATE_` / `USAGE_STATE_` prefixes, percentages as decimal
strings and sizes in several units; the port wants plain words, floats and bytes. Messages are handled
duck-typed (attribute access only) so this module does not import the SDK.
"""

from __future__ import annotations

from typing import Any

from ..port import (
    AccessKey,
    Bucket,
    CapacityBlockGroup,
    Cluster,
    Disk,
    Filesystem,
    GpuCluster,
    IamGroup,
    Instance,
    Network,
    NodeGroup,
    NodeGroupCondition,
    Project,
    QuotaAllowance,
    Registry,
    SecurityGroup,
    ServiceAccount,
    Subnet,
)

GIB = 1024**3
_SIZE_UNITS = {"size_bytes": 1, "size_kibibytes": 1024, "size_mebibytes": 1024**2, "size_gibibytes": GIB}

# IAM reports a dozen lifecycle states; the port speaks of four.
_PROJECT_STATES = {
    "SCHEDULING_FOR_DELETION": "DELETING",
    "SCHEDULED_FOR_DELETION": "DELETING",
    "SCHEDULING_FOR_DELETION_BY_PARENT": "DELETING",
    "SCHEDULED_FOR_DELETION_BY_PARENT": "DELETING",
    "PURGING": "DELETING",
    "PURGED": "DELETED",
}


def word(enum_value: Any, *prefixes: str) -> str:
    """Enum -> its name without the given prefixes; UNSPECIFIED -> ""."""
    name = getattr(enum_value, "name", None)
    if not isinstance(name, str):
        return str(enum_value) if enum_value not in (None, 0) else ""
    for prefix in prefixes:
        if name.startswith(prefix):
            name = name[len(prefix) :]
            break
    return "" if name in ("UNSPECIFIED", "STATE_UNSPECIFIED") or name.endswith("_UNSPECIFIED") else name


def labels(metadata: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(metadata.labels).items()}


def percentage(text: str) -> float | None:
    """The API's `usage_percentage` is a decimal string, a fraction of the limit ("0.25", "1.5")."""
    text = (text or "").strip()
    if not text:
        return None
    try:
        if text.endswith("%"):
            return float(text[:-1]) / 100.0
        return float(text)
    except ValueError:
        return None


def _usage(status: Any, state: str) -> int | None:
    """Exact usage when the service vouches for it; None when it says it does not know."""
    if state in ("UNKNOWN", "NOT_APPLICABLE"):
        return None
    if state == "NOT_USED":
        return int(status.usage)
    usage = int(status.usage)
    # proto3 cannot tell "0" from "absent"; a zero next to a non-zero percentage is the latter.
    if usage == 0 and (percentage(status.usage_percentage) or 0) > 0:
        return None
    return usage


def _usage_state(value: Any) -> str:
    state = word(value, "USAGE_STATE_")
    return "" if state == "UNKNOWN" else state


def project(c: Any) -> Project:
    state = word(c.status.container_state, "STATE_")
    suspension = word(c.status.suspension_state, "SUSPENSION_STATE_") or "NONE"
    return Project(
        id=c.metadata.id,
        name=c.metadata.name,
        tenant_id=c.metadata.parent_id,
        region=c.spec.region or c.status.region,
        state=_PROJECT_STATES.get(state, state),
        suspension_state=suspension,
        labels=labels(c.metadata),
    )


def network(n: Any) -> Network:
    return Network(
        id=n.metadata.id,
        project_id=n.metadata.parent_id,
        name=n.metadata.name,
        state=word(n.status.state, "STATE_"),
        labels=labels(n.metadata),
    )


def subnet(s: Any) -> Subnet:
    cidrs = list(s.status.ipv4_private_cidrs)
    return Subnet(
        id=s.metadata.id,
        project_id=s.metadata.parent_id,
        network_id=s.spec.network_id,
        name=s.metadata.name,
        cidr=cidrs[0] if cidrs else "",
        state=word(s.status.state, "STATE_"),
        labels=labels(s.metadata),
    )


def security_group(g: Any) -> SecurityGroup:
    return SecurityGroup(
        id=g.metadata.id,
        project_id=g.metadata.parent_id,
        network_id=g.spec.network_id,
        name=g.metadata.name,
        default=bool(g.status.default),
        state=word(g.status.state, "STATE_"),
        labels=labels(g.metadata),
    )


def quota_allowance(q: Any, container_id: str) -> QuotaAllowance:
    has_status = q.HasField("status")
    status = q.status
    usage_state = _usage_state(status.usage_state) if has_status else ""
    raw_usage_state = word(status.usage_state, "USAGE_STATE_") if has_status else "UNKNOWN"
    return QuotaAllowance(
        id=q.metadata.id,
        name=q.metadata.name,
        region=q.spec.region,
        limit=int(q.spec.limit) if q.spec.HasField("limit") else None,
        usage=_usage(status, raw_usage_state) if has_status else None,
        usage_percentage=percentage(status.usage_percentage) if has_status else None,
        usage_state=usage_state,
        unit=status.unit if has_status else "",
        state=word(status.state, "STATE_") if has_status else "",
        parent_id=q.metadata.parent_id,
        container_id=container_id,
    )


def capacity_block_group(b: Any) -> CapacityBlockGroup:
    status = b.status
    affinity = status.resource_affinity.compute_v1
    raw_usage_state = word(status.usage_state, "USAGE_STATE_")
    return CapacityBlockGroup(
        id=b.metadata.id,
        parent_id=b.metadata.parent_id,
        region=status.region,
        platform=affinity.platform,
        fabric=affinity.fabric,
        state=word(status.state, "STATE_"),
        limit=int(status.current_limit),
        usage=_usage(status, raw_usage_state),
        usage_percentage=percentage(status.usage_percentage),
        usage_state=_usage_state(status.usage_state),
    )


def storage_class_word(value: Any) -> str:
    """STANDARD -> standard, ENHANCED_THROUGHPUT -> enhanced_throughput (the port's spelling)."""
    return word(value, "STORAGE_CLASS_").lower()


def bucket(b: Any) -> Bucket:
    return Bucket(
        id=b.metadata.id,
        project_id=b.metadata.parent_id,
        name=b.metadata.name,
        region=b.status.region,
        storage_class=storage_class_word(b.spec.default_storage_class),
        max_size_bytes=int(b.spec.max_size_bytes),
        state=word(b.status.state, "STATE_"),
        suspension_state=word(b.status.suspension_state, "SUSPENSION_STATE_") or "NOT_SUSPENDED",
        labels=labels(b.metadata),
    )


def bucket_object_count(b: Any) -> int:
    """Everything a bucket still holds, summed over its per-storage-class counters."""
    total = 0
    for entry in getattr(b.status, "counters", None) or []:
        current = getattr(entry, "counters", None)
        previous = getattr(entry, "non_current_counters", None)
        for counters in (current, previous):
            if counters is None:
                continue
            for name in (
                "simple_objects_quantity",
                "multipart_objects_quantity",
                "multipart_uploads_quantity",
            ):
                total += int(getattr(counters, name, 0) or 0)
    return total


def service_account(sa: Any) -> ServiceAccount:
    return ServiceAccount(
        id=sa.metadata.id, project_id=sa.metadata.parent_id, name=sa.metadata.name, labels=labels(sa.metadata)
    )


def access_key(k: Any) -> AccessKey:
    return AccessKey(
        id=k.metadata.id,
        service_account_id=getattr(k.spec.account.service_account, "id", "") or "",
        project_id=k.metadata.parent_id,
        aws_access_key_id=k.status.aws_access_key_id,
        state=word(k.status.state, "STATE_"),
        expires_at=k.spec.expires_at if k.spec.HasField("expires_at") else None,  # the SDK's datetime
    )


def cluster(c: Any) -> Cluster:
    endpoints = c.status.control_plane.endpoints
    return Cluster(
        id=c.metadata.id,
        project_id=c.metadata.parent_id,
        name=c.metadata.name,
        state=word(c.status.state, "STATE_"),
        endpoint=endpoints.public_endpoint or endpoints.private_endpoint,
        k8s_version=c.status.control_plane.version or c.spec.control_plane.version,
        subnet_id=c.spec.control_plane.subnet_id,
        labels=labels(c.metadata),
    )


def _size_bytes(spec: Any) -> int:
    which = spec.WhichOneof("size")
    if which in _SIZE_UNITS:
        return int(getattr(spec, which)) * _SIZE_UNITS[which]
    return 0


def _int_or_none(text: str) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def condition(event: Any) -> NodeGroupCondition:
    """One node-group event. A QuotaFailure names the quota in its structured error details."""
    last = event.last_occurrence
    quota, limit, requested = "", None, None
    # The SDK surfaces a google.rpc.Status field as its RequestStatus, ServiceErrors already unpacked.
    error = last.error if last.HasField("error") else None
    for err in getattr(error, "service_errors", None) or []:
        details = err.details
        if details is not None and details.field == "quota_failure" and details.value.violations:
            v = details.value.violations[0]
            quota, limit, requested = v.quota, _int_or_none(v.limit), _int_or_none(v.requested)
            break
    kind = last.code or ("QuotaFailure" if quota else word(last.level))
    return NodeGroupCondition(
        kind=kind,
        message=last.message or (getattr(error, "message", None) or ""),
        quota=quota,
        limit=limit,
        requested=requested,
    )


def node_group(ng: Any) -> NodeGroup:
    spec, status, template = ng.spec, ng.status, ng.spec.template
    # `fixed_node_count`, `autoscaling` and `preset` sit in oneofs: an unset member reads as None.
    fixed = spec.fixed_node_count
    autoscaling = spec.autoscaling
    planned = fixed if fixed is not None else (autoscaling.min_node_count if autoscaling is not None else 0)
    target = int(status.target_node_count) or int(planned or 0)
    policy = template.reservation_policy
    return NodeGroup(
        id=ng.metadata.id,
        cluster_id=ng.metadata.parent_id,
        name=ng.metadata.name,
        state=word(status.state, "STATE_"),
        target_node_count=target,
        ready_node_count=int(status.ready_node_count),
        platform=template.resources.platform,
        preset=template.resources.preset or "",
        preemptible=template.HasField("preemptible"),
        reservation_policy=policy.policy.name if template.HasField("reservation_policy") else "",
        reservation_ids=tuple(policy.reservation_ids),
        disk_size_gib=_size_bytes(template.boot_disk) // GIB if template.HasField("boot_disk") else 0,
        conditions=tuple(condition(e) for e in status.events),
        version=str(getattr(status, "version", "") or getattr(spec, "version", "") or ""),
    )


def filesystem(fs: Any) -> Filesystem:
    return Filesystem(
        id=fs.metadata.id,
        project_id=fs.metadata.parent_id,
        name=fs.metadata.name,
        size_bytes=int(fs.status.size_bytes) or _size_bytes(fs.spec),
        state=word(fs.status.state, "STATE_"),
        labels=labels(fs.metadata),
    )


def gpu_cluster(g: Any) -> GpuCluster:
    # GPU clusters have no lifecycle state in the API; "reconciling" is the only signal of change.
    return GpuCluster(
        id=g.metadata.id,
        project_id=g.metadata.parent_id,
        name=g.metadata.name,
        fabric=g.spec.infiniband_fabric,
        state="RECONCILING" if g.status.reconciling else "READY",
    )


def instance(i: Any) -> Instance:
    return Instance(
        id=i.metadata.id,
        project_id=i.metadata.parent_id,
        name=i.metadata.name,
        platform=i.spec.resources.platform,
        state=word(i.status.state, "STATE_"),
        labels=labels(i.metadata),
    )


def disk(d: Any) -> Disk:
    return Disk(
        id=d.metadata.id,
        project_id=d.metadata.parent_id,
        name=d.metadata.name,
        size_bytes=int(d.status.size_bytes) or _size_bytes(d.spec),
        state=word(d.status.state, "STATE_"),
        labels=labels(d.metadata),
    )


def registry(r: Any) -> Registry:
    return Registry(
        id=r.metadata.id,
        project_id=r.metadata.parent_id,
        name=r.metadata.name,
        state=word(r.status.state, "STATE_"),
        labels=labels(r.metadata),
    )


def iam_group(g: Any) -> IamGroup:
    return IamGroup(
        id=g.metadata.id,
        project_id=g.metadata.parent_id,
        name=g.metadata.name,
        state=word(g.status.state, "STATE_"),
        labels=labels(g.metadata),
    )
