"""The repair ladder's pure judgement (engine/health/remediation.py): incidents, one rung at a time after
the last failed its gate, guards, validated return, breakers, and the numbers."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from npa_pulumi.engine.backends.soperator import SLURM
from npa_pulumi.engine.health import remediation as r
from npa_pulumi.spec import parse_spec
from npa_pulumi.spec.constants import FaultReason, Rung
from npa_pulumi.spec.remediation import FleetRemediation, resolve

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: fleet
projects:
  - name: research
    clusters:
      - name: train
        gpu_nodes: {count: 10, preset: 1gpu-16vcpu-200gb, platform: gpu-l40s-a}
"""
CLUSTER = "research/train"


def policy(extra: str = "") -> FleetRemediation:
    return resolve(parse_spec(SPEC + extra))


def node(name: str = "n1", *reasons: FaultReason, **kw: object) -> r.NodeFacts:
    return r.NodeFacts(cluster=CLUSTER, node=name, uid=f"uid-{name}", reasons=tuple(reasons), **kw)  # type: ignore[arg-type]


def step(
    incidents: list[r.Incident],
    facts: list[r.NodeFacts],
    at: datetime,
    pol: FleetRemediation | None = None,
    breakers: dict[str, r.Breaker] | None = None,
    unavailable: dict[Rung, str] | None = None,
) -> tuple[list[r.Incident], list[r.Decision]]:
    """One watch read: track, decide, act on every ACT (as the executor records it)."""
    pol = pol or policy()
    ledger = r.track(incidents, facts, pol, at)
    decisions = r.decide(facts, ledger, breakers or {}, pol, at, unavailable)
    for decision in decisions:
        if decision.status is r.Status.ACT and not decision.drain:  # a drain takes no rung
            ledger = r.record_action(ledger, decision, at)
    return ledger, decisions


def test_a_fault_opens_an_incident_and_the_first_rung_is_the_gate() -> None:
    ledger, decisions = step([], [node("n1", FaultReason.GPU_ERROR), node("n2")], T0)
    assert [(i.node, i.reason, i.open) for i in ledger] == [("n1", FaultReason.GPU_ERROR, True)]
    assert [(d.node, d.status, d.rung) for d in decisions] == [("n1", r.Status.ACT, Rung.REQUALIFY)]


def test_each_rung_only_after_the_last_one_failed_its_gate() -> None:
    ledger, _ = step([], [node("n1", FaultReason.GPU_ERROR)], T0)
    # the requalification has not spoken: wait, no second rung
    ledger, decisions = step(ledger, [node("n1", FaultReason.GPU_ERROR)], T0 + timedelta(minutes=1))
    assert decisions[0].status is r.Status.WAIT and decisions[0].rung is Rung.REQUALIFY
    failed = node(
        "n1", FaultReason.GPU_ERROR, requalified_at=T0 + timedelta(minutes=2), requalify_passed=False
    )
    ledger, decisions = step(ledger, [failed], T0 + timedelta(minutes=3))
    assert (decisions[0].status, decisions[0].rung) == (r.Status.ACT, Rung.CORDON_AND_REPORT)
    assert decisions[0].why == "requalify failed"
    # the fault outlives escalate_after (30m): the cordon failed, the next rung is due
    ledger, decisions = step(ledger, [failed], T0 + timedelta(minutes=20))
    assert decisions[0].status is r.Status.WAIT
    ledger, decisions = step(
        ledger, [failed], T0 + timedelta(minutes=34), unavailable={Rung.CLOUD_RECOVERY: "no"}
    )
    assert (decisions[0].rung, decisions[0].skipped) == (Rung.REMOVE_FROM_GROUP, ("cloud-recovery: no",))
    outcomes = [(a.rung, a.outcome) for a in ledger[0].attempts]
    assert outcomes == [
        (Rung.REQUALIFY, r.Outcome.FAILED),
        (Rung.CORDON_AND_REPORT, r.Outcome.FAILED),
        (Rung.CLOUD_RECOVERY, r.Outcome.SKIPPED),
        (Rung.REMOVE_FROM_GROUP, r.Outcome.PENDING),
    ]


def test_removal_closes_the_incident_as_replaced_when_the_node_object_is_gone() -> None:
    incident = r.Incident(CLUSTER, "n1", "uid-n1", FaultReason.NOT_READY, T0)
    ledger = r.track([incident], [r.NodeFacts(CLUSTER, "n1", "uid-new")], policy(), T0 + timedelta(minutes=9))
    closed = ledger[0]
    assert (closed.closed, closed.closed_at) == (r.Closed.REPLACED, T0 + timedelta(minutes=9))


def test_validated_return_a_cleared_fault_needs_a_passing_gate() -> None:
    ledger, _ = step(
        [],
        [node("n1", FaultReason.GPU_ERROR)],
        T0,
        pol=policy("remediation:\n  ladders: {gpu-error: [cordon-and-report, flag-hardware]}\n"),
    )
    # the fault cleared (Nebius repaired it) but no gate ran since: still open, the gate is due
    ledger, decisions = step(ledger, [node("n1")], T0 + timedelta(minutes=5))
    assert ledger[0].open and ledger[0].attempts[0].outcome is r.Outcome.CLEARED
    assert (decisions[0].status, decisions[0].rung) == (r.Status.ACT, Rung.REQUALIFY)
    # a gate pass from BEFORE the requalify was taken does not count
    stale = node("n1", requalified_at=T0 + timedelta(minutes=4), requalify_passed=True)
    ledger, decisions = step(ledger, [stale], T0 + timedelta(minutes=6))
    assert ledger[0].open and decisions[0].status is r.Status.WAIT
    passed = node("n1", requalified_at=T0 + timedelta(minutes=7), requalify_passed=True)
    ledger, decisions = step(ledger, [passed], T0 + timedelta(minutes=8))
    assert ledger[0].closed is r.Closed.RETURNED and decisions == []


def test_never_on_a_node_with_an_active_gpu_workload_unless_the_policy_says_so() -> None:
    busy = node("n1", FaultReason.GPUS_MISSING, gpu_workloads=("team/job-0",))
    _, decisions = step([], [busy], T0)
    assert (decisions[0].status, decisions[0].rung) == (r.Status.HOLD, Rung.REQUALIFY)
    assert "team/job-0" in decisions[0].why
    unread = node("n1", FaultReason.GPUS_MISSING, gpu_workloads=None)
    assert step([], [unread], T0)[1][0].status is r.Status.HOLD
    allowed = policy("remediation:\n  allow_active_gpu_workloads: true\n")
    assert step([], [busy], T0, pol=allowed)[1][0].status is r.Status.ACT


def test_soperator_drains_through_slurm_first_and_never_acts_on_drain_alloc() -> None:
    slurm = dict(manager=SLURM)
    undrained = node("w1", FaultReason.GPU_ERROR, manager_state="UNDRAINED", **slurm)
    ledger, [first] = step([], [undrained], T0)
    assert (first.status, first.rung, first.drain) == (
        r.Status.ACT,
        Rung.REQUALIFY,
        "npa-remediation gpu-error",
    )
    assert first.via == "slurm drain (reason: npa-remediation gpu-error)" and not ledger[0].attempts
    for state in ("DRAINING", "DRAIN+ALLOC"):  # asked, or jobs still run: never touched
        held = node("w1", FaultReason.GPU_ERROR, manager_state=state, **slurm)
        _, [decision] = step(ledger, [held], T0 + timedelta(minutes=1))
        assert decision.status is r.Status.HOLD and f"Slurm {state}: a job still runs" in decision.why
    drained = node("w1", FaultReason.GPU_ERROR, manager_state="DRAIN+IDLE", **slurm)
    ledger, [decision] = step(ledger, [drained], T0 + timedelta(minutes=2))
    assert (decision.status, decision.rung, decision.drain) == (r.Status.ACT, Rung.REQUALIFY, "")
    assert [a.rung for a in ledger[0].attempts] == [Rung.REQUALIFY]
    unknown = node("w1", FaultReason.GPU_ERROR, **slurm)  # its Slurm state not read
    assert step([], [unknown], T0)[1][0].status is r.Status.HOLD
    # its slurmd worker pods hold its GPUs: the Slurm state is what says whether a job runs
    worker = node(
        "w2", FaultReason.GPU_ERROR, manager_state="DRAIN+IDLE", gpu_workloads=("soperator/w",), **slurm
    )
    assert step([], [worker], T0)[1][0].status is r.Status.ACT
    allowed = policy("remediation:\n  allow_active_gpu_workloads: true\n")
    [direct] = step([], [undrained], T0, pol=allowed)[1]
    assert (direct.status, direct.drain) == (r.Status.ACT, "")


def test_slurms_state_of_a_node_is_read_from_soperators_drain_condition() -> None:
    assert SLURM.state_of({}) == "UNDRAINED" and not SLURM.busy("UNDRAINED")
    assert SLURM.state_of({"NebiusGPUError": "x"}) == "UNDRAINED"
    assert SLURM.state_of({"SlurmNodeDrain": "NodeNeedDrain"}) == "DRAINING"
    assert SLURM.state_of({"SlurmNodeDrain": "NodeDraining"}) == "DRAIN+ALLOC"
    assert SLURM.state_of({"SlurmNodeDrain": "NodeDrained"}) == "DRAIN+IDLE"
    assert SLURM.busy("DRAIN+ALLOC") and SLURM.busy("DRAINING") and not SLURM.busy("DRAIN+IDLE")
    assert SLURM.drained("DRAIN+IDLE") and not SLURM.drained("DRAIN+ALLOC")


def test_a_repeat_offender_is_not_requalified_automatically() -> None:
    old = [
        r.Incident(
            CLUSTER,
            "n1",
            "uid-n1",
            FaultReason.GPU_ERROR,
            T0 - timedelta(days=d),
            T0 - timedelta(days=d, hours=-1),
            r.Closed.RETURNED,
        )
        for d in (5, 2)
    ]
    ledger, decisions = step(old, [node("n1", FaultReason.GPU_ERROR)], T0)
    assert r.is_repeat_offender(ledger, CLUSTER, "n1", policy(), T0)
    assert decisions[0].rung is Rung.CORDON_AND_REPORT
    assert decisions[0].skipped == ("requalify: repeat offender, not requalified automatically",)
    # its fault cleared: the gate waits for a person
    _, decisions = step(ledger, [node("n1")], T0 + timedelta(hours=1))
    assert decisions[0].status is r.Status.HOLD and "repeat offender" in decisions[0].why
    # 8 days later the oldest incident is out of the 7-day window: 2 incidents, no repeat offender
    assert not r.is_repeat_offender(ledger, CLUSTER, "n1", policy(), T0 + timedelta(days=3))


def test_flag_hardware_ends_the_ladder_as_quarantined() -> None:
    pol = policy("remediation:\n  ladders: {boot-disk-io-error: [flag-hardware]}\n")
    ledger, decisions = step([], [node("n1", FaultReason.BOOT_DISK_IO_ERROR)], T0, pol=pol)
    assert decisions[0].rung is Rung.FLAG_HARDWARE
    _, decisions = step(
        ledger, [node("n1", FaultReason.BOOT_DISK_IO_ERROR)], T0 + timedelta(hours=2), pol=pol
    )
    assert decisions[0].status is r.Status.QUARANTINED


def _breakers(
    facts: list[r.NodeFacts],
    incidents: list[r.Incident],
    at: datetime,
    current: dict[str, r.Breaker] | None = None,
) -> dict[str, r.Breaker]:
    pol = policy()
    scopes = r.scope_totals(facts, {CLUSTER: 10}, pol)
    return r.evaluate_breakers(facts, incidents, scopes, current or {}, 60.0, at, "watcher@host")


def test_a_breaker_trips_in_the_read_that_crosses_its_threshold_and_then_nothing_acts() -> None:
    healthy = [node(f"n{i}", capacity_block="capacityblockgroup-…a1b2") for i in range(10)]
    two = [node(f"n{i}", FaultReason.GPU_ERROR, capacity_block="capacityblockgroup-…a1b2") for i in range(2)]
    facts = two + healthy[2:]
    ledger = r.track([], facts, policy(), T0)
    breakers = _breakers(facts, ledger, T0)
    assert not any(b.open for b in breakers.values())  # 20 % is not more than 20 %
    three = [
        node(f"n{i}", FaultReason.GPU_ERROR, capacity_block="capacityblockgroup-…a1b2") for i in range(3)
    ]
    facts = three + healthy[3:]
    at = T0 + timedelta(seconds=60)
    ledger = r.track(ledger, facts, policy(), at)
    breakers = _breakers(facts, ledger, at, breakers)
    tripped = {s for s, b in breakers.items() if b.open}
    assert tripped == {"fleet", "cluster:research/train", "capacity-block:capacityblockgroup-…a1b2"}
    assert breakers["fleet"].opened_at == at and breakers["fleet"].opened_by == "watcher@host"
    decisions = r.decide(facts, ledger, breakers, policy(), at)
    assert decisions and all(d.status is r.Status.HOLD and "breaker" in d.why for d in decisions)
    # an open breaker stays open when the nodes recover: only a reset closes it
    later = _breakers(
        healthy,
        r.track(ledger, healthy, policy(), at + timedelta(hours=1)),
        at + timedelta(hours=1),
        breakers,
    )
    assert later["fleet"].open


def test_an_incident_opened_within_the_window_counts_even_when_the_node_recovered() -> None:
    facts = [node(f"n{i}") for i in range(10)]
    recent = [
        r.Incident(CLUSTER, f"n{i}", f"uid-n{i}", FaultReason.NOT_READY, T0 - timedelta(seconds=30))
        for i in range(3)
    ]
    assert _breakers(facts, recent, T0)["fleet"].open
    old = [replace(i, opened_at=T0 - timedelta(seconds=120)) for i in recent]
    assert not _breakers(facts, old, T0)["fleet"].open


def test_mtbi_mttr_and_repeat_offenders() -> None:
    def done(
        name: str, start_h: float, hours: float, reason: FaultReason = FaultReason.GPU_ERROR
    ) -> r.Incident:
        opened = T0 + timedelta(hours=start_h)
        return r.Incident(
            CLUSTER, name, "u", reason, opened, opened + timedelta(hours=hours), r.Closed.RETURNED
        )

    ledger = [done("n1", 0, 1), done("n1", 10, 3), done("n1", 30, 2), done("n2", 5, 4, FaultReason.NOT_READY)]
    ledger.append(r.Incident(CLUSTER, "n3", "u", FaultReason.UNQUALIFIED, T0))  # no fault: not counted
    found = r.numbers(ledger, policy(), T0 + timedelta(hours=40))
    n1 = next(n for n in found["nodes"] if n["node"] == "n1")
    assert (n1["incidents"], n1["mtbi_s"], n1["mttr_s"]) == (3, 15 * 3600.0, 2 * 3600.0)
    assert found["fleet"]["incidents"] == 4
    by_reason = {x["reason"]: x for x in found["reasons"]}
    assert by_reason["not-ready"]["mtbi_s"] is None and by_reason["not-ready"]["mttr_s"] == 4 * 3600.0
    assert found["repeat_offenders"] == [{"cluster": CLUSTER, "node": "n1"}]


def test_the_ledger_round_trips_through_json() -> None:
    incident = r.Incident(
        CLUSTER, "n1", "u", FaultReason.GPU_ERROR, T0, attempts=(r.Attempt(Rung.REQUALIFY, T0),)
    )
    assert r.Incident.from_json(incident.to_json()) == incident
    breaker = r.Breaker("fleet", 20, 3, 10, T0, "me")
    assert r.Breaker.from_json(breaker.to_json()) == breaker


def test_a_failed_gate_from_before_the_cordon_does_not_hide_that_the_fault_cleared() -> None:
    ledger, _ = step([], [node("n1", FaultReason.GPU_ERROR)], T0)
    failed_at = T0 + timedelta(seconds=20)
    failing = dict(requalified_at=failed_at, requalify_passed=False)
    gpu_and_gate = node("n1", FaultReason.GPU_ERROR, FaultReason.FAILED_REQUALIFICATION, **failing)
    ledger, decisions = step(ledger, [gpu_and_gate], T0 + timedelta(minutes=1))
    assert decisions[0].rung is Rung.CORDON_AND_REPORT
    ledger = [
        replace(i, attempts=(i.attempts[0], replace(i.attempts[1], note="cordoned by the ladder")))
        for i in ledger
    ]
    # the GPU error is gone; the only fault left is the gate's verdict from before the cordon
    gate_only = node("n1", FaultReason.FAILED_REQUALIFICATION, **failing)
    ledger, decisions = step(ledger, [gate_only], T0 + timedelta(minutes=2))
    assert (decisions[0].status, decisions[0].rung) == (r.Status.ACT, Rung.REQUALIFY)
    cordon = ledger[0].attempts[1]
    assert cordon.outcome is r.Outcome.CLEARED
    assert cordon.note == "cordoned by the ladder; the fault cleared: its gate is due"  # its own note kept
    # that gate fails again (a verdict after the last rung): the ladder goes on
    again = node("n1", FaultReason.FAILED_REQUALIFICATION, requalified_at=T0 + timedelta(minutes=3))
    _, decisions = step(
        ledger,
        [again],
        T0 + timedelta(minutes=4),
        unavailable={Rung.CLOUD_RECOVERY: "no", Rung.REMOVE_FROM_GROUP: "no"},
    )
    assert decisions[0].rung is Rung.FLAG_HARDWARE
