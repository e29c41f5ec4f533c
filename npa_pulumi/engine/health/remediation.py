"""The repair ladder's judgement, pure: what each impaired GPU node gets next, whether a circuit breaker
trips, and the numbers an SRE reads (incidents, MTBI, MTTR, repeat offenders). No I/O here: the operation
reads the fleet (engine/operations/health.py) and keeps the ledger (engine/health/ledger.py); this module
decides, and unit tests check it with plain values.

The rules (docs/health-and-verifiers.md, "Remediation"):

* An **incident** opens when a GPU node shows a fault (`FaultReason`, judged from the health read) and has
  none open; it closes `returned` only once the node's gate passed after it opened (validated return: a
  node whose fault cleared stays out of `usable` until then), or `replaced` when the node object is gone
  (another uid under the name, or no node).
* Each incident climbs its reason's **ladder** one rung at a time: a rung is taken only after the one
  before failed its gate. A rung's gate is the per-node requalification: it passed when a requalification
  of that very node (uid) passed after the rung was taken, failed when one failed, and a rung whose fault
  persists `escalate_after` later failed too. When the fault clears on its own, the next action is the
  gate (`requalify`) whatever the ladder says. A rung the cloud does not offer is skipped, with why.
* A **repeat offender** (`repeat_incidents` faults within `repeat_window_s`) is never requalified
  automatically: its ladder skips `requalify`, and its validated return waits for a person.
* **Guards**, in order: an open breaker of any scope the node is in (0 actions there); an active GPU
  workload on the node (unless the cluster's policy allows it), or its workloads not read; where a
  workload manager owns the nodes (named by the backend: engine/backends), its node state not read, or a
  state that says a job still runs (never touched: DRAIN+ALLOC). A node it owns and has not drained is
  drained through it first (with the ladder's reason), and the rung is taken once it reports the node
  drained (unless the cluster's policy allows active GPU workloads).
* A **breaker** of a scope (a cluster, a capacity block group, the fleet) trips when more than its percent
  of the scope's GPU nodes are impaired within one window (now, or an incident opened within the window);
  it stays open until reset by a person (engine/health/breakers.py).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from npa_pulumi.spec.constants import FaultReason, Rung
from npa_pulumi.spec.remediation import ClusterRemediation, FleetRemediation

FLEET_SCOPE = "fleet"
DRAIN_REASON_PREFIX = "npa-remediation"  # the reason the ladder gives a workload manager's drain


class Outcome(StrEnum):
    """Where one rung taken on a node stands."""

    PENDING = "pending"  # taken; its gate has not spoken
    PASSED = "passed"  # the node's gate passed after it
    FAILED = "failed"  # the gate failed, or the fault outlived escalate_after
    CLEARED = "cleared"  # the fault went away: the gate is due (validated return)
    SKIPPED = "skipped"  # not offered by this cloud


class Closed(StrEnum):
    RETURNED = "returned"  # the gate passed on the node
    REPLACED = "replaced"  # the node object is gone


class Status(StrEnum):
    """What the ladder does on a node now."""

    ACT = "act"  # take `rung` now
    WAIT = "wait"  # the last rung's gate has not spoken
    HOLD = "hold"  # a rung is due but a guard forbids it (`why`)
    QUARANTINED = "quarantined"  # flagged for hardware: nothing more is automatic


@dataclass(frozen=True)
class WorkloadManager:
    """A workload manager that owns a backend's nodes above Kubernetes, as its backend describes it
    (ClusterBackend.workload_manager): the ladder drains a node through it (with the ladder's reason) before
    any rung, takes a rung only once it reports the node drained, and never touches one it reports
    running a job. It takes and reports a drain through a node condition (`condition`: set True with
    `request` as its reason and the ladder's reason as its message; its reason then says how far the
    drain got: `states`)."""

    name: str  # as its users call it
    drain: str  # how a rung takes a node out of service; `{reason}` is the ladder's reason
    busy_states: tuple[frozenset[str], ...]  # flag sets of a node state that mean a job still runs
    condition: str = ""  # the node condition of its drain
    request: str = ""  # the condition's reason that asks it to drain the node
    states: Mapping[str, str] = field(default_factory=dict)  # the condition's reason (True) -> its state
    undrained: str = "UNDRAINED"  # its state of a node it was not asked to drain
    released: str = ""  # the condition's reason once a drain is released (set False)
    drained_states: tuple[frozenset[str], ...] = ()  # flag sets that mean drained, nothing runs
    # A label selector of the Kubernetes nodes whose jobs it runs: those a disruptive change drains through
    # it first (engine/operations/up.py); "" when it names none.
    workers: str = ""

    def busy(self, state: str) -> bool:
        return _matches(state, self.busy_states)

    def drained(self, state: str) -> bool:
        return _matches(state, self.drained_states)

    def state_of(self, conditions: Mapping[str, str]) -> str:
        """Its state of a node from the node's True conditions (type -> reason)."""
        reason = conditions.get(self.condition)
        if reason is None:
            return self.undrained
        return self.states.get(reason, self.states.get(self.request, self.undrained))


def _matches(state: str, sets: tuple[frozenset[str], ...]) -> bool:
    flags = set(state.upper().replace("+", " ").split())
    return any(wanted <= flags for wanted in sets)


@dataclass(frozen=True)
class NodeFacts:
    """One GPU node as the health read saw it, with what the ladder needs to know about it."""

    cluster: str  # project-key/cluster-name
    node: str
    uid: str
    reasons: tuple[FaultReason, ...] = ()  # its faults now, most serious first; () healthy
    capacity_block: str = ""  # its capacity block group, masked ("" none)
    gpu_workloads: tuple[str, ...] | None = ()  # namespace/pod holding its GPUs; None: not read
    manager: WorkloadManager | None = None  # the workload manager owning the node, if any
    manager_state: str | None = None  # its state of the node (e.g. IDLE, DRAIN+ALLOC); None: not read
    requalified_at: datetime | None = None  # the last requalification of this very node (uid)
    requalify_passed: bool = False


@dataclass(frozen=True)
class Attempt:
    rung: Rung
    at: datetime
    outcome: Outcome = Outcome.PENDING
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "rung": self.rung.value,
            "at": _iso(self.at),
            "outcome": self.outcome.value,
            "note": self.note,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Attempt:
        return cls(
            Rung(data["rung"]), _parse(data["at"]), Outcome(data["outcome"]), str(data.get("note", ""))
        )


@dataclass(frozen=True)
class Incident:
    cluster: str
    node: str
    uid: str
    reason: FaultReason
    opened_at: datetime
    closed_at: datetime | None = None
    closed: Closed | None = None
    attempts: tuple[Attempt, ...] = ()

    @property
    def open(self) -> bool:
        return self.closed_at is None

    @property
    def fault(self) -> bool:
        """A fault of the node (a node that merely joined after the gate pass is no failure)."""
        return self.reason is not FaultReason.UNQUALIFIED

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "node": self.node,
            "uid": self.uid,
            "reason": self.reason.value,
            "opened_at": _iso(self.opened_at),
            "closed_at": _iso(self.closed_at) if self.closed_at else None,
            "closed": self.closed.value if self.closed else None,
            "attempts": [a.to_json() for a in self.attempts],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Incident:
        return cls(
            cluster=str(data["cluster"]),
            node=str(data["node"]),
            uid=str(data.get("uid", "")),
            reason=FaultReason(data["reason"]),
            opened_at=_parse(data["opened_at"]),
            closed_at=_parse(data["closed_at"]) if data.get("closed_at") else None,
            closed=Closed(data["closed"]) if data.get("closed") else None,
            attempts=tuple(Attempt.from_json(a) for a in data.get("attempts") or []),
        )


@dataclass(frozen=True)
class Decision:
    cluster: str
    node: str
    reason: FaultReason
    status: Status
    rung: Rung | None = None  # ACT: the rung to take; HOLD: the one that is due
    via: str = ""  # how the rung acts (through the node's workload manager, with its reason)
    why: str = ""
    skipped: tuple[str, ...] = ()  # rungs passed over (not offered by this cloud), with why
    drain: str = ""  # ACT: first drain the node through its workload manager, with this reason (no rung yet)

    def to_json(self) -> dict[str, Any]:
        return {
            "cluster": self.cluster,
            "node": self.node,
            "reason": self.reason.value,
            "status": self.status.value,
            "rung": self.rung.value if self.rung else None,
            "via": self.via,
            "why": self.why,
            "skipped": list(self.skipped),
            "drain": self.drain,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Decision:
        return cls(
            cluster=str(data["cluster"]),
            node=str(data["node"]),
            reason=FaultReason(data["reason"]),
            status=Status(data["status"]),
            rung=Rung(data["rung"]) if data.get("rung") else None,
            via=str(data.get("via", "")),
            why=str(data.get("why", "")),
            skipped=tuple(data.get("skipped") or ()),
            drain=str(data.get("drain") or ""),
        )


@dataclass(frozen=True)
class Breaker:
    """One scope's circuit breaker as it stands (open: no action in the scope until a person resets it)."""

    scope: str  # fleet | cluster:<project/cluster> | capacity-block:<masked id>
    threshold_percent: int
    impaired: int
    total: int
    opened_at: datetime | None = None
    opened_by: str = ""  # the watcher's identity that tripped it

    @property
    def open(self) -> bool:
        return self.opened_at is not None

    @property
    def percent(self) -> float:
        return 0.0 if self.total <= 0 else round(100.0 * self.impaired / self.total, 1)

    def to_json(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "open": self.open,
            "threshold_percent": self.threshold_percent,
            "impaired": self.impaired,
            "total": self.total,
            "percent": self.percent,
            "opened_at": _iso(self.opened_at) if self.opened_at else None,
            "opened_by": self.opened_by,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Breaker:
        return cls(
            scope=str(data["scope"]),
            threshold_percent=int(data.get("threshold_percent", 20)),
            impaired=int(data.get("impaired", 0)),
            total=int(data.get("total", 0)),
            opened_at=_parse(data["opened_at"]) if data.get("opened_at") else None,
            opened_by=str(data.get("opened_by", "")),
        )


def _iso(at: datetime) -> str:
    return at.isoformat(timespec="seconds")


def _parse(text: str) -> datetime:
    return datetime.fromisoformat(str(text))


def cluster_scope(cluster: str) -> str:
    return f"cluster:{cluster}"


def block_scope(block: str) -> str:
    return f"capacity-block:{block}"


def scopes_of(facts: NodeFacts) -> list[str]:
    found = [FLEET_SCOPE, cluster_scope(facts.cluster)]
    return found + ([block_scope(facts.capacity_block)] if facts.capacity_block else [])


# ------------------------------------------------------------------------------------- the ledger


def track(
    incidents: Sequence[Incident],
    facts: Sequence[NodeFacts],
    policy: FleetRemediation,
    now: datetime,
    read_clusters: Iterable[str] | None = None,
) -> list[Incident]:
    """The ledger after one read: attempts settled by what the read saw, incidents closed (returned after
    a passing gate, replaced when the node object is gone) and opened (a fault on a node with none
    open). `read_clusters`: the clusters this read saw (None: all of those in `facts`); an incident of a
    cluster that could not be read stays as it was."""
    seen = {(f.cluster, f.node): f for f in facts}
    readable = set(read_clusters) if read_clusters is not None else {f.cluster for f in facts}
    found: list[Incident] = []
    open_nodes: set[tuple[str, str]] = set()
    for incident in incidents:
        if not incident.open or incident.cluster not in readable:
            found.append(incident)
            continue
        now_facts = seen.get((incident.cluster, incident.node))
        if now_facts is None or (incident.uid and now_facts.uid != incident.uid):
            found.append(replace(incident, closed_at=now, closed=Closed.REPLACED))
            continue
        settled = _settle(incident, now_facts, policy.cluster(incident.cluster), now)
        if any(a.outcome is Outcome.PASSED for a in settled.attempts) and not now_facts.reasons:
            settled = replace(settled, closed_at=now, closed=Closed.RETURNED)
        elif (
            not settled.attempts
            and _gate_passed_since(now_facts, settled.opened_at)
            and not now_facts.reasons
        ):
            settled = replace(settled, closed_at=now, closed=Closed.RETURNED)  # requalified by hand
        else:
            open_nodes.add((incident.cluster, incident.node))
        found.append(settled)
    for f in facts:
        if f.reasons and (f.cluster, f.node) not in open_nodes:
            found.append(Incident(f.cluster, f.node, f.uid, f.reasons[0], opened_at=now))
    return found


def _gate_passed_since(facts: NodeFacts, since: datetime) -> bool:
    return facts.requalify_passed and facts.requalified_at is not None and facts.requalified_at >= since


def _settle(incident: Incident, facts: NodeFacts, policy: ClusterRemediation, now: datetime) -> Incident:
    """The pending attempts' outcomes as this read shows them."""
    attempts = []
    for attempt in incident.attempts:
        if attempt.outcome is not Outcome.PENDING or attempt.rung is Rung.FLAG_HARDWARE:
            attempts.append(attempt)
            continue
        if facts.requalified_at is not None and facts.requalified_at >= attempt.at:
            outcome = Outcome.PASSED if facts.requalify_passed else Outcome.FAILED
            attempts.append(_settled(attempt, outcome, "the node's gate " + outcome.value))
        elif not _faults(facts, attempt.at) and attempt.rung is not Rung.REQUALIFY:
            attempts.append(_settled(attempt, Outcome.CLEARED, "the fault cleared: its gate is due"))
        elif now - attempt.at >= timedelta(seconds=policy.escalate_after_s):
            faults = _faults(facts, attempt.at)
            what = faults[0].value if faults else "no gate pass"
            attempts.append(_settled(attempt, Outcome.FAILED, f"still {what} at escalate_after"))
        else:
            attempts.append(attempt)
    return replace(incident, attempts=tuple(attempts))


def _settled(attempt: Attempt, outcome: Outcome, why: str) -> Attempt:
    """The attempt with its outcome; what the action noted when it was taken stays first."""
    return replace(attempt, outcome=outcome, note=f"{attempt.note}; {why}" if attempt.note else why)


def _faults(facts: NodeFacts, since: datetime | None) -> tuple[FaultReason, ...]:
    """The node's faults, less a failed requalification older than `since`: a gate verdict from before
    the last rung says nothing about the node since (the gate failed while the fault was there)."""
    if since is None or facts.requalified_at is None or facts.requalified_at >= since:
        return facts.reasons
    return tuple(r for r in facts.reasons if r is not FaultReason.FAILED_REQUALIFICATION)


def record_action(
    incidents: Sequence[Incident], decision: Decision, now: datetime, note: str = ""
) -> list[Incident]:
    """The ledger once `decision` was acted on (its rung pending, with `note`; the rungs it skipped
    recorded)."""
    found = []
    for incident in incidents:
        if incident.open and (incident.cluster, incident.node) == (decision.cluster, decision.node):
            skipped = tuple(
                Attempt(Rung(s.split(":", 1)[0]), now, Outcome.SKIPPED, s.split(": ", 1)[-1])
                for s in decision.skipped
            )
            taken = (Attempt(decision.rung, now, note=note),) if decision.rung else ()
            incident = replace(incident, attempts=(*incident.attempts, *skipped, *taken))
        found.append(incident)
    return found


# ------------------------------------------------------------------------------------- the ladder


def is_repeat_offender(
    incidents: Sequence[Incident], cluster: str, node: str, policy: FleetRemediation, now: datetime
) -> bool:
    since = now - timedelta(seconds=policy.repeat_window_s)
    mine = [
        i for i in incidents if (i.cluster, i.node) == (cluster, node) and i.fault and i.opened_at >= since
    ]
    return len(mine) >= policy.repeat_incidents


def decide(
    facts: Sequence[NodeFacts],
    incidents: Sequence[Incident],
    breakers: Mapping[str, Breaker],
    policy: FleetRemediation,
    now: datetime,
    unavailable: Mapping[Rung, str] | None = None,
) -> list[Decision]:
    """Each node with an open incident: what the ladder does now (an ACT at most one rung a node)."""
    by_node = {(i.cluster, i.node): i for i in incidents if i.open}
    found = []
    for f in facts:
        incident = by_node.get((f.cluster, f.node))
        if incident is None:
            continue
        repeat = incident.fault and is_repeat_offender(incidents, f.cluster, f.node, policy, now)
        found.append(
            _decide_node(f, incident, policy.cluster(f.cluster), repeat, breakers, unavailable or {})
        )
    return found


def _decide_node(
    f: NodeFacts,
    incident: Incident,
    policy: ClusterRemediation,
    repeat: bool,
    breakers: Mapping[str, Breaker],
    unavailable: Mapping[Rung, str],
) -> Decision:
    base = Decision(f.cluster, f.node, incident.reason, Status.WAIT)
    if any(a.rung is Rung.FLAG_HARDWARE and a.outcome is not Outcome.SKIPPED for a in incident.attempts):
        return replace(base, status=Status.QUARANTINED, why="flagged for hardware replacement")
    last = incident.attempts[-1] if incident.attempts else None
    if last is not None and last.outcome is Outcome.PENDING:
        return replace(base, rung=last.rung, why=f"waiting on {last.rung.value}'s gate since {_iso(last.at)}")
    rung, skipped, why = _next_rung(f, incident, policy, repeat, unavailable)
    if rung is None:
        return replace(base, status=Status.HOLD, why=why, skipped=skipped)
    held = _guard(f, policy, breakers)
    if held:
        return replace(base, status=Status.HOLD, rung=rung, why=held, skipped=skipped)
    manager = None if policy.allow_active_gpu_workloads else f.manager
    if manager is not None and f.manager_state is not None and not manager.drained(f.manager_state):
        # Drained first, whatever the rung: jobs finish, nothing new lands; the rung once it is drained.
        reason = f"{DRAIN_REASON_PREFIX} {incident.reason.value}"
        via = manager.drain.format(reason=reason)
        why = f"{manager.name} {f.manager_state}: drained first, then {rung.value}"
        return replace(base, status=Status.ACT, rung=rung, via=via, why=why, skipped=skipped, drain=reason)
    return replace(base, status=Status.ACT, rung=rung, why=why, skipped=skipped)


def _next_rung(
    f: NodeFacts,
    incident: Incident,
    policy: ClusterRemediation,
    repeat: bool,
    unavailable: Mapping[Rung, str],
) -> tuple[Rung | None, tuple[str, ...], str]:
    """(the rung due, the rungs passed over, why) — no rung: why none."""
    taken = [a for a in incident.attempts if a.outcome is not Outcome.SKIPPED]
    if not _faults(f, taken[-1].at if taken else None):  # cleared: the gate decides (validated return)
        if repeat:
            return None, (), "repeat offender: its gate is not run automatically (health --requalify --yes)"
        return Rung.REQUALIFY, (), "the fault cleared: the gate must pass before it is usable"
    tried = {a.rung for a in incident.attempts if a.outcome is not Outcome.PENDING}
    skipped: list[str] = []
    for rung in policy.ladder(incident.reason):
        if rung in tried:
            continue
        if rung is Rung.REQUALIFY and repeat:
            skipped.append(f"{rung.value}: repeat offender, not requalified automatically")
            continue
        if rung in unavailable:
            skipped.append(f"{rung.value}: {unavailable[rung]}")
            continue
        done = [a for a in incident.attempts if a.outcome is not Outcome.SKIPPED]
        why = (
            f"{done[-1].rung.value} {done[-1].outcome.value}"
            if done
            else f"{incident.reason.value}: first rung"
        )
        return rung, tuple(skipped), why
    return None, tuple(skipped), "the ladder is exhausted: a person decides"


def _guard(f: NodeFacts, policy: ClusterRemediation, breakers: Mapping[str, Breaker]) -> str:
    """Why no rung may act on this node now ('' when one may)."""
    tripped = [s for s in scopes_of(f) if (b := breakers.get(s)) is not None and b.open]
    if tripped:
        return f"breaker {', '.join(tripped)} open: no action in its scope until reset"
    if not policy.allow_active_gpu_workloads and f.manager is None:  # a manager's nodes: its state says
        if f.gpu_workloads is None:
            return "its GPU workloads could not be read"
        if f.gpu_workloads:
            return f"an active GPU workload holds it: {', '.join(f.gpu_workloads[:3])}"
    if f.manager is not None and not policy.allow_active_gpu_workloads:
        if f.manager_state is None:
            return f"its {f.manager.name} state could not be read"
        if f.manager.busy(f.manager_state):
            return f"{f.manager.name} {f.manager_state}: a job still runs on it (draining)"
    return ""


# ------------------------------------------------------------------------------------ the breakers


@dataclass(frozen=True)
class Scopes:
    """Each scope's GPU node count (what the spec asks for, or what is there when more)."""

    totals: Mapping[str, int] = field(default_factory=dict)
    thresholds: Mapping[str, int] = field(default_factory=dict)


def scope_totals(facts: Sequence[NodeFacts], expected: Mapping[str, int], policy: FleetRemediation) -> Scopes:
    """`expected`: GPU nodes each cluster's spec asks for."""
    totals: dict[str, int] = {}
    thresholds: dict[str, int] = {FLEET_SCOPE: policy.fleet_percent}
    present: dict[str, int] = {}
    for f in facts:
        for scope in scopes_of(f):
            present[scope] = present.get(scope, 0) + 1
    for cluster, count in expected.items():
        scope = cluster_scope(cluster)
        totals[scope] = max(count, present.get(scope, 0))
        thresholds[scope] = policy.cluster(cluster).breaker_percent
    totals[FLEET_SCOPE] = max(sum(totals.values()), present.get(FLEET_SCOPE, 0))
    for scope, count in present.items():
        if scope.startswith("capacity-block:"):
            totals[scope] = count
            thresholds[scope] = policy.capacity_block_percent
        totals.setdefault(scope, count)
        thresholds.setdefault(scope, policy.fleet_percent)
    return Scopes(totals, thresholds)


def evaluate_breakers(
    facts: Sequence[NodeFacts],
    incidents: Sequence[Incident],
    scopes: Scopes,
    current: Mapping[str, Breaker],
    window_s: float,
    now: datetime,
    watcher: str,
) -> dict[str, Breaker]:
    """Every scope's breaker after this read: an open one stays open (only a reset closes it); a closed
    one trips when more than its threshold of the scope's GPU nodes are impaired within the window (a
    fault now, or a fault incident opened within it)."""
    since = now - timedelta(seconds=window_s)
    where = {(f.cluster, f.node): scopes_of(f) for f in facts}
    impaired: dict[str, set[tuple[str, str]]] = {}
    for f in facts:
        if any(r is not FaultReason.UNQUALIFIED for r in f.reasons):
            for scope in scopes_of(f):
                impaired.setdefault(scope, set()).add((f.cluster, f.node))
    for i in incidents:
        if i.fault and i.opened_at >= since:
            for scope in where.get((i.cluster, i.node), [FLEET_SCOPE, cluster_scope(i.cluster)]):
                impaired.setdefault(scope, set()).add((i.cluster, i.node))
    found: dict[str, Breaker] = {}
    for scope in sorted(set(scopes.totals) | set(current)):
        total = scopes.totals.get(scope, 0)
        threshold = scopes.thresholds.get(scope, 20)
        count = len(impaired.get(scope, set()))
        was = current.get(scope)
        breaker = Breaker(scope, threshold, count, total)
        if was is not None and was.open:
            breaker = replace(breaker, opened_at=was.opened_at, opened_by=was.opened_by)
        elif total > 0 and 100.0 * count > threshold * total:
            breaker = replace(breaker, opened_at=now, opened_by=watcher)
        found[scope] = breaker
    return found


# -------------------------------------------------------------------------------------- the numbers


@dataclass(frozen=True)
class Figures:
    incidents: int
    open: int
    mtbi_s: float | None  # mean time between the starts of consecutive incidents; None with fewer than 2
    mttr_s: float | None  # mean time from opening to closing; None with none closed

    def to_json(self) -> dict[str, Any]:
        return {
            "incidents": self.incidents,
            "open": self.open,
            "mtbi_s": None if self.mtbi_s is None else round(self.mtbi_s, 1),
            "mttr_s": None if self.mttr_s is None else round(self.mttr_s, 1),
        }


def figures(incidents: Sequence[Incident]) -> Figures:
    starts = sorted(i.opened_at for i in incidents)
    gaps = [(b - a).total_seconds() for a, b in itertools.pairwise(starts)]
    repairs = [(i.closed_at - i.opened_at).total_seconds() for i in incidents if i.closed_at is not None]
    return Figures(
        incidents=len(incidents),
        open=sum(1 for i in incidents if i.open),
        mtbi_s=sum(gaps) / len(gaps) if gaps else None,
        mttr_s=sum(repairs) / len(repairs) if repairs else None,
    )


def numbers(incidents: Sequence[Incident], policy: FleetRemediation, now: datetime) -> dict[str, Any]:
    """Per node and per reason the incidents (faults only), MTBI and MTTR; the repeat offenders."""
    faults = [i for i in incidents if i.fault]
    nodes: dict[tuple[str, str], list[Incident]] = {}
    reasons: dict[FaultReason, list[Incident]] = {}
    for i in faults:
        nodes.setdefault((i.cluster, i.node), []).append(i)
        reasons.setdefault(i.reason, []).append(i)
    offenders = sorted(k for k in nodes if is_repeat_offender(faults, k[0], k[1], policy, now))
    return {
        "fleet": figures(faults).to_json(),
        "nodes": [
            {"cluster": c, "node": n, **figures(found).to_json()} for (c, n), found in sorted(nodes.items())
        ],
        "reasons": [{"reason": r.value, **figures(found).to_json()} for r, found in sorted(reasons.items())],
        "repeat_offenders": [{"cluster": c, "node": n} for c, n in offenders],
    }
