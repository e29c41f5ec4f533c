"""`status`: what each cluster stack says, checked against the live cloud.

absent        no stack for the target
failed        the stack exists but its last update failed or recorded no cluster, or the cloud reports
              the cluster / a node group in ERROR
provisioning  the cluster or a node group is still PROVISIONING (a QuotaFailure condition, the classic
              quota wall, is surfaced in `error`)
deployed      the cluster and every node group are RUNNING with their target node counts, and the stack
              recorded the health gate as passed (or skipped on purpose)
deployed-validation-failed / deployed-mig-not-ready / deployed-credentials-failed
              as the stack recorded it: the gate did not pass, or no credentials; everything is kept,
              `up` runs the gate again
provisioning / validating-gpu-health / validating-mig / validating-cluster-basics / validating-fabric
              while an `up` (on any machine) applies the cluster stack or runs its health gate: recorded
              beside the stack (engine/lifecycle.py) and shown only while that run lives
destroy-incomplete
              a destroy of the cluster stack failed: what is left stays until a destroy succeeds; the
              reason and the exact destroy command to retry are shown
destroyed     the stack records a cluster that the cloud no longer has (deleted outside the fleet); `up`
              re-creates it
drifted       an object the recipe made (node group, filesystem, GPU cluster) was deleted or resized
              outside the fleet (`drift` lists them); `up` re-creates each from the spec
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from npa_pulumi.cloud.errors import CloudError, NotFound
from npa_pulumi.engine import liveness
from npa_pulumi.engine.automation import StackOp
from npa_pulumi.engine.backends.base import NativeStatus
from npa_pulumi.engine.backends.registry import recorded_backend
from npa_pulumi.engine.health import requalification
from npa_pulumi.engine.lifecycle import DESTROY_INCOMPLETE, TAG_PENDING, TAG_PENDING_UNTIL, holding
from npa_pulumi.engine.requests import StatusRequest
from npa_pulumi.output.progress import headline
from npa_pulumi.output.results import StackResult
from npa_pulumi.output.stack_outputs import ClusterOutputs

if TYPE_CHECKING:
    from npa_pulumi.engine.context import FleetContext


LAST_UPDATE_FAILED = "the last update of this stack failed; run up again"


def _node_group_view(group: Any) -> dict[str, Any]:
    view = {
        "id": group.id,
        "name": group.name,
        "state": group.state,
        "target": group.target_node_count,
        "ready": group.ready_node_count,
    }
    if group.version:
        view["version"] = group.version
    if group.conditions:
        view["conditions"] = [c.model_dump(exclude_none=True) for c in group.conditions]
    return view


def _identity(outputs: ClusterOutputs) -> dict[str, Any]:
    """The cluster as a result names it: its project, its cluster (None when none is recorded) and its kube
    context."""
    return {**outputs.identity(), "cluster_id": outputs.cluster_id or None}


def _recorded(
    fleet: FleetContext, op: StackOp, outputs: dict[str, Any] | None, tags: dict[str, str] | None
) -> StackResult | None:
    """A run in progress (its state) or a failed destroy, as recorded beside the stack (its `tags`)."""
    recorded = holding(tags)
    if recorded is None:
        return None
    base = _identity(ClusterOutputs.read(outputs))
    fleet.progress.phase(op.stack, "done", recorded.state)
    if recorded.state == DESTROY_INCOMPLETE:
        return op.result(
            recorded.state,
            error=f"the last destroy did not finish: {recorded.reason}",
            retry_command=recorded.retry or None,
            **base,
        )
    return op.result(recorded.state, **base)


def cluster_status(fleet: FleetContext, op: StackOp) -> StackResult:
    fleet.progress.phase(op.stack, "checking")
    outputs = fleet.outputs_of(op)  # cached: the fleet's cost reads them again
    # The tags beside the stack, read once: its lifecycle record and what its last `up` left pending (on
    # an s3:// backend a read is a request to the server, per stack).
    tags = fleet.executor.read_tags(op) if outputs is not None else None
    if outputs is not None:
        running = _recorded(fleet, op, outputs, tags)
        if running is not None:
            return running
    if outputs is None:
        fleet.progress.phase(op.stack, "absent")
        return op.result("absent")
    recorded = ClusterOutputs.read(outputs)
    base = _identity(recorded)
    if recorded.validation:
        base["validation"] = recorded.validation
    elif fleet.plans().cluster(op.stack).has_gpus:
        base["validation"] = "skipped"  # deployed before the health gate existed: none ran
    if recorded.health_evidence is not None:
        base["health"] = recorded.health_evidence
    requalified = requalification.summary(recorded.kube_context or "", str(base["cluster_id"] or ""))
    if requalified:  # `health --requalify` since the gate (engine/health/requalification.py)
        base["health"] = {**(base.get("health") or {}), "requalified": requalified}
    if not base["cluster_id"]:
        status = "failed" if fleet.executor.last_update_failed(op) else "unknown"
        fleet.progress.phase(op.stack, "done", status)
        return op.result(status, error="the stack records no cluster; run up to converge", **base)
    if isinstance(fleet.request, StatusRequest) and not fleet.request.live:
        return _recorded_only(fleet, op, recorded, base)
    try:
        # The project's clusters, node groups, filesystems and GPU clusters are listed once for the
        # whole command (cloud/project_reads.py), not read per cluster.
        reads = liveness.live_reads(fleet, recorded)
        cluster = reads.get_cluster(base["cluster_id"])
        groups = reads.list_node_groups(cluster.id)
        drift = [d.as_dict() for d in liveness.drift(fleet, recorded, reads)]
    except NotFound:
        fleet.progress.phase(op.stack, "done", "destroyed")
        return op.result(
            "destroyed",
            error="the cluster was deleted outside the fleet; run up to recreate it",
            drift=liveness.deleted_cluster_drift(fleet, recorded),
            **base,
        )
    except CloudError as err:
        fleet.progress.phase(op.stack, "failed", headline(str(err)))
        return op.result("status-error", error=str(err), **base)
    views = [_node_group_view(g) for g in groups]
    states = {cluster.state, *(g.state for g in groups)}
    # Only a group short of its target waits on quota; a ready group's old QuotaFailure event is history.
    short = [g for g in groups if g.state == "PROVISIONING" or g.ready_node_count < g.target_node_count]
    quota_walls = [c for g in short for c in g.conditions if c.kind.lower().startswith("quota")]
    error = None
    if quota_walls:
        wall = quota_walls[0]
        error = f"node group waiting on quota {wall.quota}: requested {wall.requested}, limit {wall.limit}"
    if "ERROR" in states or "FAILED" in states:
        status = "failed"
    elif drift:
        status = "drifted"
        error = f"{liveness.describe_drift(drift)}; run up to bring it back to the spec"
    elif "PROVISIONING" in states or any(g.ready_node_count < g.target_node_count for g in groups):
        status = "provisioning"
    elif fleet.executor.last_update_failed(op):
        status, error = "failed", error or LAST_UPDATE_FAILED
    elif recorded.recorded_lifecycle != "deployed":
        status = recorded.recorded_lifecycle
        reason = (base.get("health") or {}).get("reason", "")
        error = f"the health gate did not pass: {reason}; run up to check again (Terraform is not re-applied)"
    else:
        status = "deployed"
    backend = recorded_backend(outputs)
    native = NativeStatus()
    if backend is not None:  # the backend's own view of its cluster (a KubeRay cluster's Ray, ...)
        native = backend.native_status(fleet.cloud, fleet.plans().cluster(op.stack), outputs)
    base.update(native.seen())
    base["versions"] = {
        "control_plane": cluster.k8s_version,
        "node_groups": {g.name: g.version for g in groups},
    }
    base["pending"] = _pending(tags)
    fleet.progress.phase(op.stack, "done", status)
    return op.result(status, node_groups=views, error=error, drift=drift, **base)


def _pending(tags: dict[str, str] | None) -> dict[str, Any] | None:
    """What the last `up` left pending for a maintenance window (tags beside the stack), or None."""
    tags = tags or {}
    if not tags.get(TAG_PENDING):
        return None
    return {"reason": tags[TAG_PENDING], "next_window": tags.get(TAG_PENDING_UNTIL) or None}


def _recorded_only(
    fleet: FleetContext, op: StackOp, outputs: ClusterOutputs, base: dict[str, Any]
) -> StackResult:
    """`status --no-live`: what the stack recorded — its last update failed, or the lifecycle its last
    run left (deployed, or the gate's verdict) — with no read of the live cloud."""
    if fleet.executor.last_update_failed(op):
        status, error = "failed", LAST_UPDATE_FAILED
    else:
        status, error = outputs.lifecycle or "deployed", None
    fleet.progress.phase(op.stack, "done", status)
    return op.result(status, error=error, **base)
