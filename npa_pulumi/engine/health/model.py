"""`health`'s judgement, pure: a cluster's node objects, its gate's settings, what its last gate pass and
requalifications qualified, and the active maintenance events of its project in; each node's state and the
cluster's GPU totals out (the buckets are described in npa_pulumi/output/health.py). No I/O here: the
operation (engine/operations/health.py) reads, this module decides, unit tests check it with plain dicts.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from npa_pulumi.cloud.port import MaintenanceEvent
from npa_pulumi.kube.gpu_health.checks import is_gpu_node
from npa_pulumi.kube.gpu_health.config import GateConfig, quantity
from npa_pulumi.kube.gpu_health.mig import node_mig_errors
from npa_pulumi.output.health import (
    CPU,
    DEGRADED,
    MAINTENANCE,
    UNQUALIFIED,
    USABLE,
    ClusterHealth,
    GpuTotals,
    Maintenance,
    NodeCondition,
    NodeHealth,
)
from npa_pulumi.output.stack_outputs import ClusterOutputs
from npa_pulumi.plan.windows import MaintenancePolicy

JSON = dict[str, Any]
GPU_ERROR = "NebiusGPUError"
BOOT_DISK_IO_ERROR = "NebiusBootDiskIOError"
MAINTENANCE_SCHEDULED = "NebiusMaintenanceScheduled"
NEBIUS_CONDITIONS = (GPU_ERROR, MAINTENANCE_SCHEDULED, BOOT_DISK_IO_ERROR)
ERROR_CONDITIONS = (GPU_ERROR, BOOT_DISK_IO_ERROR)
# The GPU pool's own taint: every GPU workload tolerates it, so it does not make a node unschedulable.
POOL_TAINT = ("nvidia.com/gpu", "true", "NoSchedule")
NODE_GROUP_LABELS = (
    "nebius.com/node-group-name",
    "mk8s.nebius.ai/node-group-name",
    "nebius.com/node-group-id",
)


@dataclass(frozen=True)
class Qualification:
    """What qualified a cluster's GPU nodes: the nodes its last gate pass saw (`gate_passed` False: no pass
    recorded, so no node is qualified by the gate; `gated` False: the gate was skipped on purpose, so nothing
    is judged), and the requalification record (node name -> {uid, passed, ...})."""

    gated: bool = True
    gate_passed: bool = False
    gate_nodes: frozenset[str] = frozenset()
    requalified: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    # Open remediation incidents by node name: (uid, reason, opened_at ISO). Validated return: such a
    # node is qualified again only by a requalification that passed after its incident opened.
    incidents: Mapping[str, tuple[str, str, str]] = field(default_factory=dict)
    gate_at: str = ""  # when the last gate pass decided (ISO; "" unknown)

    @classmethod
    def from_outputs(
        cls,
        outputs: Mapping[str, Any],
        record: Mapping[str, Any] | None,
        incidents: Mapping[str, tuple[str, str, str]] | None = None,
    ) -> Qualification:
        recorded = ClusterOutputs.read(outputs)
        evidence = recorded.health_evidence
        nodes = (record or {}).get("nodes") or {}
        open_ = dict(incidents or {})
        if recorded.validation == "skipped":
            return cls(gated=False, requalified=nodes, incidents=open_)
        if evidence is None:
            return cls(requalified=nodes, incidents=open_)
        passed = bool(evidence.get("passed"))
        seen = frozenset((evidence.get("nodes") or {}).keys()) if passed else frozenset()
        at = str(evidence.get("finished_at") or "")
        return cls(gate_passed=passed, gate_nodes=seen, requalified=nodes, incidents=open_, gate_at=at)

    def of(self, node: JSON) -> tuple[str, Mapping[str, Any] | None]:
        """(qualification, the requalification record of this very node object)."""
        meta = node["metadata"]
        record = self.requalified.get(meta["name"])
        if record is not None and record.get("uid") != meta.get("uid"):
            record = None  # a record of an earlier node of that name
        if not self.gated:
            return "not-gated", record
        incident = self.incident_of(node)

        def since_incident(at: str) -> bool:  # validated return: only a verdict after it opened counts
            return incident is None or _not_before(at, incident[2])

        if record is not None and record.get("passed") and since_incident(str(record.get("at") or "")):
            return "requalified", record
        if self.gate_passed and meta["name"] in self.gate_nodes and since_incident(self.gate_at):
            return "gate", record
        return UNQUALIFIED, record

    def incident_of(self, node: JSON) -> tuple[str, str, str] | None:
        """The open incident of this very node object (its uid), if any."""
        meta = node["metadata"]
        found = self.incidents.get(meta["name"])
        return found if found is not None and found[0] == meta.get("uid", "") else None


def _not_before(stamp: str, since: str) -> bool:
    """Whether ISO time `stamp` is at or after `since` (an unreadable one is not)."""
    try:
        at, start = datetime.fromisoformat(stamp), datetime.fromisoformat(since)
    except ValueError:
        return False
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    if start.tzinfo is None:
        start = start.replace(tzinfo=UTC)
    return at >= start


def condition(node: JSON, kind: str) -> JSON | None:
    for found in (node.get("status") or {}).get("conditions") or []:
        if found.get("type") == kind:
            return dict(found)
    return None


def _taint_text(taint: Mapping[str, Any]) -> str:
    value = f"={taint['value']}" if taint.get("value") else ""
    return f"{taint.get('key')}{value}:{taint.get('effect')}"


def _blocking_taints(taints: Sequence[Mapping[str, Any]]) -> list[str]:
    return [
        _taint_text(t)
        for t in taints
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and (t.get("key"), t.get("value"), t.get("effect")) != POOL_TAINT
        and t.get("key") != "node.kubernetes.io/unschedulable"  # the cordon itself, reported as such
    ]


def events_for(node: JSON, events: Sequence[MaintenanceEvent]) -> list[MaintenanceEvent]:
    """The maintenance events of the node's instance: mk8s names a node after its instance, and its
    providerID ends with the instance's id."""
    name = node["metadata"]["name"]
    provider = str((node.get("spec") or {}).get("providerID") or "")
    return [
        e
        for e in events
        if name in (e.instance_name, e.instance_id) or (e.instance_id and provider.endswith(e.instance_id))
    ]


def allocatable_gpus(node: JSON, config: GateConfig) -> int:
    """Whole GPUs the node offers: `nvidia.com/gpu`, or on MIG clusters the preset's GPUs when the exact
    MIG layout is advertised (none otherwise)."""
    if config.mig:
        return config.gpus_per_node if not node_mig_errors(node, config) else 0
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    return min(quantity(allocatable.get("nvidia.com/gpu")), config.gpus_per_node)


def judge_node(
    node: JSON, config: GateConfig, qualification: Qualification, events: Sequence[MaintenanceEvent]
) -> NodeHealth:
    meta, spec, status = node["metadata"], node.get("spec") or {}, node.get("status") or {}
    labels = meta.get("labels") or {}
    ready_condition = condition(node, "Ready")
    ready = ready_condition is not None and ready_condition.get("status") == "True"
    taints = list(spec.get("taints") or [])
    cordoned = bool(spec.get("unschedulable"))
    conditions = [
        NodeCondition(
            type=kind,
            status="True",
            reason=str(found.get("reason") or ""),
            message=str(found.get("message") or ""),
        )
        for kind in NEBIUS_CONDITIONS
        if (found := condition(node, kind)) is not None and found.get("status") == "True"
    ]
    mine = events_for(node, events)
    gpu = config.expected_gpu_nodes > 0 and is_gpu_node(node, config)
    view = NodeHealth(
        name=meta["name"],
        node_group=next((str(labels[k]) for k in NODE_GROUP_LABELS if labels.get(k)), ""),
        gpu=gpu,
        state=CPU,
        ready=ready,
        cordoned=cordoned,
        taints=[_taint_text(t) for t in taints],
        conditions=conditions,
        maintenance=[_maintenance(e, meta["name"]) for e in mine],
        boot_id=str((status.get("nodeInfo") or {}).get("bootID") or ""),
        joined_at=str(meta.get("creationTimestamp") or ""),
        uid=str(meta.get("uid") or ""),
        # what a workload manager reports on the node, e.g. its drain (its backend reads it: engine/backends)
        workload_conditions={
            str(c.get("type")): str(c.get("reason") or "")
            for c in status.get("conditions") or []
            if c.get("status") == "True" and c.get("type") not in ("Ready", *NEBIUS_CONDITIONS)
        },
    )
    problems = view.problems
    if not ready:
        problems.append(f"not Ready ({(ready_condition or {}).get('reason') or 'no Ready condition'})")
    if cordoned:
        problems.append("cordoned")
    blocking = _blocking_taints(taints)
    if blocking:
        problems.append(f"tainted {', '.join(blocking)}")
    errors = [c for c in conditions if c.type in ERROR_CONDITIONS]
    problems += [f"{c.type}: {c.message or c.reason}" for c in errors]
    scheduled = [c for c in conditions if c.type == MAINTENANCE_SCHEDULED]
    problems += [f"{c.type}: {c.message or c.reason}" for c in scheduled]
    problems += [f"maintenance {e.reason or 'event'} ({e.id})" for e in mine]
    if not gpu:
        return view
    view.gpus_expected = config.gpus_per_node
    view.gpus_allocatable = allocatable_gpus(node, config)
    if view.gpus_allocatable < view.gpus_expected:
        problems.append(f"{view.gpus_allocatable} of {view.gpus_expected} GPUs allocatable")
    view.qualification, record = qualification.of(node)
    if record is not None:
        view.requalification = dict(record)
    incident = qualification.incident_of(node)
    if incident is not None:
        view.incident = incident[1]
    if view.qualification == UNQUALIFIED:
        failed = record is not None and not record.get("passed")
        problems.append(
            "failed requalification: " + "; ".join(record.get("errors") or ["see its evidence"])
            if failed and record is not None
            else f"open {incident[1]} incident since {incident[2]}: usable only once its gate passes again "
            "(`health --requalify --yes`)"
            if incident is not None
            else "joined after the last gate pass: run `health --requalify --yes`"
            if qualification.gate_passed
            else "no gate pass recorded: run `up` or `health --requalify --yes`"
        )
    if not ready or cordoned or blocking or errors:
        view.state = DEGRADED
    elif scheduled or mine:
        view.state = MAINTENANCE
    elif view.qualification == UNQUALIFIED:
        view.state = UNQUALIFIED
    else:
        view.state = USABLE
    return view


def _maintenance(event: MaintenanceEvent, node: str | None, cluster: str | None = None) -> Maintenance:
    return Maintenance(
        id=event.id,
        reason=event.reason,
        planned=event.planned,
        instance_id=event.instance_id,
        instance_name=event.instance_name,
        node=node,
        cluster=cluster,
        created_at=event.created_at,
        sla_deadline=event.sla_deadline,
    )


def maintenance_view(event: MaintenanceEvent, node: str | None, cluster: str | None) -> Maintenance:
    return _maintenance(event, node, cluster)


def totals(nodes: Sequence[NodeHealth], config: GateConfig) -> GpuTotals:
    """The cluster's GPU buckets: requested from the spec (its GPU nodes times the preset), each present
    GPU node's GPUs in its node's bucket (those missing against the preset degraded), and the GPUs of GPU
    nodes that are not registered at all `missing`."""
    found = GpuTotals(requested=config.expected_gpus)
    gpu_nodes = [n for n in nodes if n.gpu]
    for node in gpu_nodes:
        short = max(0, node.gpus_expected - node.gpus_allocatable)
        found.degraded += short
        have = node.gpus_allocatable
        if node.state == DEGRADED:
            found.degraded += have
        elif node.state == MAINTENANCE:
            found.maintenance += have
        elif node.state == UNQUALIFIED:
            found.unqualified += have
        else:
            found.usable += have
    absent = max(0, config.expected_gpu_nodes - len(gpu_nodes))
    found.missing = absent * config.gpus_per_node
    return found


def below_min_usable(found: GpuTotals, min_usable: float) -> bool:
    """Fewer usable GPUs than `min_usable` (a fraction) of those requested; a cluster without GPUs never."""
    return found.requested > 0 and found.usable < min_usable * found.requested - 1e-9


# ------------------------------------------------------------------------------------ staged rollouts

_MAX_NAMED = 3  # a reason names this many nodes, then counts the rest


def _bounded(items: Sequence[str]) -> str:
    named = "; ".join(items[:_MAX_NAMED])
    return named + (f"; and {len(items) - _MAX_NAMED} more" if len(items) > _MAX_NAMED else "")


def hold_reason(cluster: ClusterHealth) -> str | None:
    """Why a staged `up` does not start this cluster now (None: it may): an active maintenance event on a
    node's instance, a node Nebius marks NebiusMaintenanceScheduled or NebiusGPUError. A cluster whose
    health could not be read (not deployed yet, no registration) is not held: its own run decides."""
    if cluster.status == "failed":
        return None
    found: list[str] = []
    for node in cluster.nodes:
        found += [f"maintenance {e.reason or 'event'} on node {node.name} ({e.id})" for e in node.maintenance]
        found += [
            f"node {node.name}: {c.type}" + (f" ({c.message or c.reason})" if c.message or c.reason else "")
            for c in node.conditions
            if c.type in (GPU_ERROR, MAINTENANCE_SCHEDULED)
        ]
    return _bounded(found) if found else None


def _maintenance_only(problem: str) -> bool:
    """A node's problem that is its maintenance (an event on its instance, Nebius' scheduled condition)."""
    return problem.startswith(("maintenance ", f"{MAINTENANCE_SCHEDULED}:"))


def soak_problem(cluster: ClusterHealth, ignore_maintenance: bool = False) -> str | None:
    """What keeps a cluster from being clean during a wave's soak (None: clean): its health could not be
    read, a node is degraded, under maintenance or unqualified (a node replaced since the gate), a node
    without GPUs has a problem, or GPU nodes are missing. `ignore_maintenance` (`up --ignore-maintenance`,
    which took the cluster knowing of it): maintenance alone is no problem, anything beside it still is."""
    if cluster.status == "failed":
        return f"health not read: {cluster.error or 'unknown error'}"
    found = []
    for n in cluster.nodes:
        problems = [p for p in n.problems if not (ignore_maintenance and _maintenance_only(p))]
        if ignore_maintenance and n.state == MAINTENANCE:
            found += [f"node {n.name} {n.state}: {'; '.join(problems)}"] if problems else []
        elif n.state in (DEGRADED, MAINTENANCE, UNQUALIFIED) or (not n.gpu and problems):
            found.append(f"node {n.name} {n.state}: {'; '.join(problems) or n.state}")
    if cluster.totals.missing:
        found.append(f"{cluster.totals.missing} GPU(s) on nodes that are not registered")
    return _bounded(found) if found else None


def against_window(event: Maintenance, policy: MaintenancePolicy | None, now: datetime) -> None:
    """Set where the event's deadline falls against its cluster's maintenance windows: the next opening
    (now, if a window is open) and whether the deadline comes before it. Nothing without windows, or
    without a deadline the cloud gave."""
    if policy is None or not policy.windows:
        return
    opening = now if policy.inside(now) else policy.next_start(now)
    if opening is None:
        return
    event.next_window = opening.isoformat()
    deadline = _instant(event.sla_deadline)
    event.before_window = deadline < opening if deadline is not None else None


def by_deadline(events: Sequence[Maintenance]) -> list[Maintenance]:
    """Soonest deadline first; events without one after them, in the order listed."""
    far = datetime.max.replace(tzinfo=UTC)
    return sorted(events, key=lambda e: _instant(e.sla_deadline) or far)


def _instant(text: str) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
