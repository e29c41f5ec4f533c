"""The repair ladder over one health read: each GPU node's facts taken from the report, the ledger moved on
by what the read saw (written only by `health --watch`), the breakers evaluated, and with `--remediate
--dry-run` what the ladder would do now. The judgement itself is engine/health/remediation.py; the state
engine/health/ledger.py.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from npa_pulumi.engine.health import ledger as store
from npa_pulumi.engine.health import remediation as core
from npa_pulumi.engine.health.remediation import NodeFacts
from npa_pulumi.output.health import UNQUALIFIED, FleetHealth, NodeHealth, RemediationView
from npa_pulumi.spec.constants import FaultReason, Rung
from npa_pulumi.spec.remediation import FleetRemediation

# Rungs the cloud port does not offer, with why: the ladder passes over them. Both clouds offer every rung
# now (the port's recover_node and remove_node); kept for a cloud or cluster that cannot.
UNAVAILABLE: Mapping[Rung, str] = {}
_CONDITION_REASONS = {
    "NebiusGPUError": FaultReason.GPU_ERROR,
    "NebiusBootDiskIOError": FaultReason.BOOT_DISK_IO_ERROR,
}


@dataclass(frozen=True)
class ClusterInfo:
    """What the ladder needs of a cluster beyond its read: its `project/cluster` key, its capacity block
    group (masked: never the id), its backend's workload manager, and how many GPU nodes the spec asks for."""

    key: str
    capacity_block: str = ""
    manager: core.WorkloadManager | None = None  # the workload manager owning its nodes (its backend's)
    expected_gpu_nodes: int = 0


def reasons(node: NodeHealth) -> tuple[FaultReason, ...]:
    """The node's faults now, in FaultReason's order (most serious first)."""
    found = {_CONDITION_REASONS[c.type] for c in node.conditions if c.type in _CONDITION_REASONS}
    if not node.ready:
        found.add(FaultReason.NOT_READY)
    if node.gpus_allocatable < node.gpus_expected:
        found.add(FaultReason.GPUS_MISSING)
    if node.qualification == UNQUALIFIED:
        record = node.requalification
        if record is not None and not record.get("passed"):
            found.add(FaultReason.FAILED_REQUALIFICATION)
        elif node.incident is None:  # a node merely awaiting its validated return has no new reason
            found.add(FaultReason.UNQUALIFIED)
    return tuple(r for r in FaultReason if r in found)


def faults_now(node: NodeHealth) -> tuple[FaultReason, ...]:
    """The node's own faults (its conditions, Ready, its GPUs), leaving out what the gate says of it."""
    gate = (FaultReason.FAILED_REQUALIFICATION, FaultReason.UNQUALIFIED)
    return tuple(r for r in reasons(node) if r not in gate)


def _parsed(stamp: Any) -> datetime | None:
    try:
        at = datetime.fromisoformat(str(stamp or ""))
    except ValueError:
        return None
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)


def _requalified(node: NodeHealth, gate_passed_at: str | None) -> tuple[datetime | None, bool]:
    """The node's last gate verdict and when: its requalification, or the cluster's gate pass when that
    qualifies it (a gate run again by `up` after the incident opened passes it too)."""
    record = node.requalification or {}
    at, passed = _parsed(record.get("at")), bool(record.get("passed"))
    gate = _parsed(gate_passed_at) if node.qualification == "gate" else None
    if gate is not None and (at is None or gate > at):
        return gate, True
    return at, passed and at is not None


def facts(report: FleetHealth, clusters: Mapping[str, ClusterInfo]) -> list[NodeFacts]:
    """Each GPU node of the clusters that could be read (by stack in `clusters`)."""
    found = []
    for cluster in report.clusters:
        info = clusters.get(cluster.stack)
        if info is None or cluster.status == "failed":
            continue
        for node in (n for n in cluster.nodes if n.gpu):
            at, passed = _requalified(node, cluster.last_gate_passed_at)
            found.append(
                NodeFacts(
                    cluster=info.key,
                    node=node.name,
                    uid=node.uid,
                    reasons=reasons(node),
                    capacity_block=info.capacity_block,
                    gpu_workloads=None if node.gpu_workloads is None else tuple(node.gpu_workloads),
                    manager=info.manager,
                    manager_state=None
                    if info.manager is None
                    else info.manager.state_of(node.workload_conditions),
                    requalified_at=at,
                    requalify_passed=passed,
                )
            )
    return found


def open_incidents(ledger: store.Ledger, key: str) -> dict[str, tuple[str, str, str]]:
    """A cluster's open incidents for its qualification: node -> (uid, reason, opened_at)."""
    return {
        i.node: (i.uid, i.reason.value, i.opened_at.isoformat(timespec="seconds"))
        for i in ledger.incidents
        if i.open and i.cluster == key
    }


def advance(
    report: FleetHealth,
    clusters: Mapping[str, ClusterInfo],
    policy: FleetRemediation,
    ledger: store.Ledger,
    now: datetime,
    interval_s: float,
    watcher: Callable[[], str],
    dry_run: bool = False,
    watching: bool = False,
) -> tuple[RemediationView, store.Ledger]:
    """The ledger moved on by this read and the view of it; the caller saves the ledger (the watch) or
    drops it (a single read, a dry run: nothing is recorded). `dry_run`: the decisions too. Breakers trip
    for the watch (`watching`: with the watcher's identity) and, as it would, in a dry run's plan (no
    identity: nothing tripped for real); a plain read shows them as the watch left them."""
    seen = facts(report, clusters)
    readable = [
        c.key
        for s, c in clusters.items()
        if any(x.stack == s and x.status != "failed" for x in report.clusters)
    ]
    incidents = core.track(ledger.incidents, seen, policy, now, readable)
    expected = {c.key: c.expected_gpu_nodes for c in clusters.values()}
    scopes = core.scope_totals(seen, expected, policy)
    window = policy.window_s if policy.window_s is not None else interval_s
    breakers = core.evaluate_breakers(seen, incidents, scopes, ledger.breakers, window, now, "")
    tripped = [s for s, b in breakers.items() if b.open and not b.opened_by]
    if tripped and watching:
        who = watcher()
        breakers |= {s: replace(breakers[s], opened_by=who) for s in tripped}
    elif tripped and not dry_run:
        breakers |= {s: replace(breakers[s], opened_at=None) for s in tripped}
    view = RemediationView(
        ledger=str(store.ledger_path(report.fleet)),
        breakers=[b.to_json() for _, b in sorted(breakers.items())],
        numbers=core.numbers(incidents, policy, now),
        unavailable={r.value: why for r, why in UNAVAILABLE.items()},
    )
    if dry_run:
        decisions = core.decide(seen, incidents, breakers, policy, now, UNAVAILABLE)
        view.decisions = [d.to_json() for d in decisions]
    moved = store.Ledger(incidents=list(incidents), breakers=breakers, resets=list(ledger.resets))
    return view, moved.pruned(now)


def summary(view: RemediationView) -> dict[str, Any]:
    """The counts a notification or an audit line carries."""
    decisions: Sequence[dict[str, Any]] = view.decisions or []
    return {
        "open_breakers": [b["scope"] for b in view.open_breakers],
        "actions": sum(1 for d in decisions if d["status"] == core.Status.ACT),
        "held": sum(1 for d in decisions if d["status"] == core.Status.HOLD),
    }
