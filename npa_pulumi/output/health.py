"""`health`'s document: each selected cluster's nodes as Nebius and Kubernetes report them now (Ready,
Nebius' conditions, cordon and taints, GPUs against the preset, qualified by the last gate pass or not),
each project's active maintenance events, and the GPU totals per cluster, project and fleet.

A node's GPUs fall into exactly one bucket, judged in this order:

    degraded      not Ready, cordoned or tainted NoSchedule/NoExecute beyond the GPU pool's own taint, or a
                  NebiusGPUError / NebiusBootDiskIOError condition; also a node's GPUs missing against its
                  preset (8 in the preset, 7 allocatable: 1 degraded)
    maintenance   NebiusMaintenanceScheduled, or an active maintenance event on the node's instance
    unqualified   healthy, but the node joined after the last gate pass (a replaced node is a new node)
                  and no requalification passed on it since
    usable        the rest: Ready, schedulable, no error condition, qualified

`missing` is what the node group's preset asks for on nodes that are not registered at all. Names of
clusters, nodes and reason codes are shown (this is the user's own read of the fleet); nothing secret.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

USABLE = "usable"
DEGRADED = "degraded"
MAINTENANCE = "maintenance"
UNQUALIFIED = "unqualified"
CPU = "cpu"  # a node without GPUs: reported, never counted


class Maintenance(BaseModel):
    """One active maintenance event of an instance, as the compute MaintenanceService lists it."""

    id: str
    reason: str
    planned: bool = False
    instance_id: str = ""
    instance_name: str = ""
    node: str | None = None  # the fleet's node it was matched to, if any
    cluster: str | None = None  # that node's cluster stack
    created_at: str = ""
    sla_deadline: str = ""  # RFC 3339: when Nebius acts on its own ("" unknown)
    # The cluster's maintenance windows (spec `maintenance:`): when the next one opens (None: the cluster
    # declares none, or the event matches no cluster), and whether the deadline comes first: Nebius acts
    # before the fleet's own window, so plan the drain now.
    next_window: str | None = None
    before_window: bool | None = None


class NodeCondition(BaseModel):
    type: str
    status: str
    reason: str = ""
    message: str = ""


class GpuTotals(BaseModel):
    requested: int = 0
    usable: int = 0
    degraded: int = 0
    maintenance: int = 0
    unqualified: int = 0
    missing: int = 0

    def add(self, other: GpuTotals) -> None:
        for name in GpuTotals.model_fields:
            setattr(self, name, getattr(self, name) + getattr(other, name))

    @property
    def usable_fraction(self) -> float:
        return 1.0 if self.requested == 0 else self.usable / self.requested


class NodeHealth(BaseModel):
    name: str
    node_group: str = ""
    gpu: bool = False
    state: str  # usable | degraded | maintenance | unqualified | cpu
    ready: bool
    cordoned: bool = False
    taints: list[str] = Field(default_factory=list)
    conditions: list[NodeCondition] = Field(default_factory=list)  # Nebius' conditions that are True
    gpus_expected: int = 0  # the node group's preset
    gpus_allocatable: int = 0
    qualification: str = ""  # gate | requalified | unqualified | not-gated (GPU nodes)
    requalification: dict[str, Any] | None = None  # the last `health --requalify` on this node
    maintenance: list[Maintenance] = Field(default_factory=list)
    boot_id: str = ""
    joined_at: str = ""  # metadata.creationTimestamp
    uid: str = ""  # the node object's uid: a node re-created under its name is another node
    # Its open remediation incident's reason (the ladder's ledger): usable only once its gate passes again
    incident: str | None = None
    # Pods holding its GPUs (namespace/name), read for `--remediate`; None: not read
    gpu_workloads: list[str] | None = None
    # Its other conditions that are True (type -> reason): what a workload manager reports on it (its drain)
    workload_conditions: dict[str, str] = Field(default_factory=dict)
    problems: list[str] = Field(default_factory=list)


class HealthStatus(StrEnum):
    """A cluster's `health` outcome (JSON carries the value)."""

    OK = "ok"
    BELOW_MIN_USABLE = "below-min-usable"  # fewer usable GPUs than --min-usable asks
    FAILED = "failed"  # not deployed, no usable kubeconfig, or its API could not be read


class ClusterHealth(BaseModel):
    stack: str
    project_key: str
    cluster_name: str
    kube_context: str
    cluster_id: str | None = None
    status: HealthStatus
    error: str | None = None
    totals: GpuTotals = Field(default_factory=GpuTotals)
    usable_fraction: float = 1.0
    last_gate: str = ""  # passed | failed | skipped | none: what the stack recorded
    # When the last gate that passed decided (UTC, ISO 8601); None: no pass recorded, or recorded by a
    # version that did not note the time
    last_gate_passed_at: str | None = None
    nodes: list[NodeHealth] = Field(default_factory=list)
    # `--requalify`: what ran ({nodes, passed, failed, refused, record}); None when not asked
    requalify: dict[str, Any] | None = None

    @property
    def failed(self) -> bool:
        return self.status != HealthStatus.OK


class RemediationView(BaseModel):
    """The repair ladder's side of a read (engine/health/remediation.py): the breakers as they stand, the
    numbers (incidents, MTBI, MTTR per node and reason, repeat offenders), and with `--remediate
    --dry-run` what the ladder would do now on each node with an open incident."""

    ledger: str = ""  # where the ladder keeps its state
    breakers: list[dict[str, Any]] = Field(default_factory=list)
    numbers: dict[str, Any] = Field(default_factory=dict)
    decisions: list[dict[str, Any]] | None = None  # --remediate (--dry-run, or the watch's)
    actions: list[dict[str, Any]] | None = None  # --watch --remediate: what this read did
    unavailable: dict[str, str] = Field(default_factory=dict)  # rungs this cloud does not offer, and why

    @property
    def open_breakers(self) -> list[dict[str, Any]]:
        return [b for b in self.breakers if b.get("open")]


class ProjectHealth(BaseModel):
    project_key: str
    project_id: str | None = None
    maintenance: list[Maintenance] = Field(default_factory=list)
    totals: GpuTotals = Field(default_factory=GpuTotals)
    error: str | None = None


class FleetHealth(BaseModel):
    command: str = "health"
    fleet: str
    cloud: str
    min_usable: float
    clusters: list[ClusterHealth] = Field(default_factory=list)
    projects: list[ProjectHealth] = Field(default_factory=list)
    totals: GpuTotals = Field(default_factory=GpuTotals)
    remediation: RemediationView | None = None
    warnings: list[str] = Field(default_factory=list)

    @property
    def failed_count(self) -> int:
        return sum(1 for c in self.clusters if c.failed)

    def to_json(self) -> dict[str, Any]:
        document = self.model_dump(mode="json")
        document["failed_count"] = self.failed_count
        document["totals"]["usable_fraction"] = round(self.totals.usable_fraction, 4)
        return document


def _totals_text(totals: GpuTotals) -> str:
    parts = [f"{totals.usable}/{totals.requested} GPUs usable"]
    parts += [
        f"{getattr(totals, name)} {name}"
        for name in ("degraded", "maintenance", "unqualified", "missing")
        if getattr(totals, name)
    ]
    return ", ".join(parts)


def _against_window(event: Maintenance) -> str:
    """`, deadline D: BEFORE (or after) the cluster's next maintenance window (W)`."""
    if not event.sla_deadline:
        return ""
    text = f", deadline {event.sla_deadline}"
    if event.next_window is None:
        return text
    order = "BEFORE" if event.before_window else "after"
    return f"{text}: {order} the cluster's next maintenance window ({event.next_window})"


def render_text(health: FleetHealth) -> str:
    """The report for a terminal: per project its maintenance, per cluster its totals and each node that
    is not simply usable, then the fleet's totals."""
    lines = [f"fleet {health.fleet} ({health.cloud}): health, --min-usable {health.min_usable:g}"]
    for project in health.projects:
        lines.append(f"project {project.project_key} ({project.project_id or 'not deployed'})")
        if project.error:
            lines.append(f"  ! {project.error}")
        for event in project.maintenance:
            where = (
                f"{event.cluster} node {event.node}" if event.node else event.instance_name or "an instance"
            )
            lines.append(
                f"  maintenance {event.reason or 'unknown reason'} on {where} ({event.id})"
                + _against_window(event)
            )
        for cluster in (c for c in health.clusters if c.project_key == project.project_key):
            mark = "ok" if cluster.status == "ok" else cluster.status.upper()
            lines.append(f"  {cluster.cluster_name}: {mark}: {_totals_text(cluster.totals)}")
            if cluster.error:
                lines.append(f"    ! {cluster.error}")
            for node in cluster.nodes:
                if node.state in (USABLE, CPU) and not node.problems:
                    continue
                why = "; ".join(node.problems) or node.state
                lines.append(f"    {node.name} [{node.state}]: {why}")
            if cluster.requalify is not None:
                done = cluster.requalify
                passed, failed = len(done.get("passed", [])), len(done.get("failed", []))
                lines.append(
                    f"    requalify: {passed} passed, {failed} failed"
                    + (f", refused: {done['refused']}" if done.get("refused") else "")
                )
                fabric = done.get("fabric")
                if fabric:
                    lines.append(f"    fabric check: {fabric.get('status')}: {fabric.get('reason')}")
    lines.append(f"fleet: {_totals_text(health.totals)}")
    if health.remediation is not None:
        lines += remediation_text(health.remediation)
    lines += [f"warning: {w}" for w in health.warnings]
    return "\n".join(lines)


def _seconds(value: Any) -> str:
    if value is None:
        return "-"
    whole = int(value)
    hours, rest = divmod(whole, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def remediation_text(view: RemediationView) -> list[str]:
    """Open breakers, the repeat offenders, the fleet's MTBI/MTTR, and the dry run's plan per node."""
    lines = []
    for breaker in view.open_breakers:
        by = f"another identity than {breaker['opened_by']!r}" if breaker["opened_by"] else "a person"
        lines.append(
            f"breaker OPEN {breaker['scope']}: {breaker['impaired']}/{breaker['total']} GPU nodes impaired "
            f"(> {breaker['threshold_percent']}%) since {breaker['opened_at']}: no action there until "
            f"`health breaker reset --scope {breaker['scope']}` by {by}"
        )
    fleet = view.numbers.get("fleet") or {}
    if fleet.get("incidents"):
        lines.append(
            f"incidents: {fleet['incidents']} ({fleet.get('open', 0)} open), "
            f"MTBI {_seconds(fleet.get('mtbi_s'))}, MTTR {_seconds(fleet.get('mttr_s'))}"
        )
    for offender in view.numbers.get("repeat_offenders") or []:
        lines.append(
            f"repeat offender: {offender['cluster']} node {offender['node']} (not requalified automatically)"
        )
    if view.decisions is None:
        return lines
    dry = " (dry run)" if view.actions is None else ""
    lines.append(f"remediation{dry}: {len(view.decisions)} node(s) with an open incident")
    for d in view.decisions:
        rung = f" {d['rung']}" if d.get("rung") else ""
        via = f" via {d['via']}" if d.get("via") else ""
        lines.append(f"  {d['cluster']} {d['node']} [{d['reason']}]: {d['status']}{rung}{via}: {d['why']}")
        lines += [f"    skipped {s}" for s in d.get("skipped") or []]
    for a in view.actions or []:
        lines.append(f"  action {a['cluster']} {a['node']} {a['rung']}: {a['outcome']}: {a['detail']}")
    return lines
