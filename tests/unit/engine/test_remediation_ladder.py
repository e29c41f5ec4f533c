"""The repair ladder over a health read (engine/health/ladder.py), its ledger and breaker reset
(engine/health/ledger.py), and the validated return in the health model (engine/health/model.py)."""

from __future__ import annotations

import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from npa_pulumi.engine.audit import Who
from npa_pulumi.engine.health import ladder, ledger
from npa_pulumi.engine.health import remediation as core
from npa_pulumi.engine.health.model import Qualification, judge_node
from npa_pulumi.errors import NpaError, UserInputError
from npa_pulumi.kube.gpu_health.config import GateConfig
from npa_pulumi.output.health import (
    ClusterHealth,
    FleetHealth,
    HealthStatus,
    NodeCondition,
    NodeHealth,
    render_text,
)
from npa_pulumi.spec import parse_spec
from npa_pulumi.spec.constants import FaultReason, Rung
from npa_pulumi.spec.remediation import resolve

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: fleet
projects:
  - name: research
    clusters:
      - name: train
        gpu_nodes: {count: 4, preset: 1gpu-16vcpu-200gb, platform: gpu-l40s-a}
"""
CONFIG = GateConfig(
    expected_nodes=1,
    expected_gpu_nodes=1,
    gpus_per_node=8,
    gpu_platform="gpu-h100-sxm",
    driver_mode="managed-image",
    nvswitch=False,
    stabilization_s=0,
    timeout_s=60,
    cuda_smoke=True,
    smoke_image="cuda",
)
GATE = Qualification(gate_passed=True, gate_nodes=frozenset({"gpu-0"}))


def node(name: str, uid: str = "") -> dict[str, object]:
    """A healthy 8-GPU node object as the API returns it."""
    resources = {"nvidia.com/gpu": "8"}
    return {
        "metadata": {
            "name": name,
            "uid": uid or f"uid-{name}",
            "labels": {
                "node.kubernetes.io/instance-type": "gpu-h100-sxm",
                "nebius.com/node-group-name": "gpu",
            },
        },
        "spec": {"taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]},
        "status": {
            "conditions": [{"type": "Ready", "status": "True"}],
            "allocatable": resources,
            "capacity": resources,
            "nodeInfo": {"bootID": "boot"},
        },
    }


INFO = {"fleet-research-train": ladder.ClusterInfo("research/train", "capacityblockgroup-…a1b2", None, 4)}


def gpu(name: str, **kw: object) -> NodeHealth:
    fields: dict[str, object] = dict(
        name=name,
        gpu=True,
        state="usable",
        ready=True,
        gpus_expected=1,
        gpus_allocatable=1,
        uid=f"uid-{name}",
    )
    fields |= {"qualification": "gate", "gpu_workloads": []} | kw
    return NodeHealth.model_validate(fields)


def report(*nodes: NodeHealth, status: HealthStatus = HealthStatus.OK) -> FleetHealth:
    cluster = ClusterHealth(
        stack="fleet-research-train",
        project_key="research",
        cluster_name="train",
        kube_context="ctx",
        status=status,
        nodes=list(nodes),
    )
    return FleetHealth(fleet="fleet", cloud="local", min_usable=1.0, clusters=[cluster])


def test_the_reasons_of_a_node_come_from_the_health_read() -> None:
    error = NodeCondition(type="NebiusGPUError", status="True")
    sick = gpu("n1", ready=False, conditions=[error], gpus_allocatable=0, state="degraded")
    assert ladder.reasons(sick) == (FaultReason.GPU_ERROR, FaultReason.NOT_READY, FaultReason.GPUS_MISSING)
    failed = gpu("n2", qualification="unqualified", requalification={"passed": False, "at": "x"})
    assert ladder.reasons(failed) == (FaultReason.FAILED_REQUALIFICATION,)
    assert ladder.reasons(gpu("n3", qualification="unqualified")) == (FaultReason.UNQUALIFIED,)
    # awaiting its validated return: unqualified because of its open incident, no new reason
    assert ladder.reasons(gpu("n4", qualification="unqualified", incident="gpu-error")) == ()
    assert ladder.reasons(gpu("n5")) == ()


def _advance(found: FleetHealth, state: ledger.Ledger, at: datetime, dry_run: bool = True) -> tuple:  # type: ignore[type-arg]
    calls: list[str] = []

    def watcher() -> str:
        calls.append("asked")
        return "sa-watcher"

    view, moved = ladder.advance(
        found, INFO, resolve(parse_spec(SPEC)), state, at, 60.0, watcher, dry_run, watching=True
    )
    return view, moved, calls


def test_a_dry_run_shows_the_plan_and_every_rung_is_offered() -> None:
    error = NodeCondition(type="NebiusGPUError", status="True")
    healthy = [gpu(f"n{i}") for i in range(2, 6)]
    found = report(gpu("n1", conditions=[error], state="degraded"), *healthy)
    view, moved, calls = _advance(found, ledger.Ledger(), T0)
    assert view.decisions == [
        {
            "cluster": "research/train",
            "node": "n1",
            "reason": "gpu-error",
            "status": "act",
            "rung": "requalify",
            "via": "",
            "why": "gpu-error: first rung",
            "skipped": [],
            "drain": "",
        }
    ]
    assert view.unavailable == {}  # both clouds offer every rung (the port's recover_node, remove_node)
    assert not view.open_breakers and calls == []  # 1 of 5 GPU nodes: 20 % is not more than 20 %
    assert [i.node for i in moved.incidents] == ["n1"]


def test_a_breaker_trips_with_the_watchers_identity_and_holds_every_action_in_its_scope() -> None:
    error = NodeCondition(type="NebiusGPUError", status="True")
    sick = [gpu(f"n{i}", conditions=[error], state="degraded") for i in range(2)]
    view, _moved, calls = _advance(report(*sick, gpu("n2"), gpu("n3")), ledger.Ledger(), T0)
    opened = {b["scope"]: b for b in view.open_breakers}
    assert set(opened) == {"fleet", "cluster:research/train", "capacity-block:capacityblockgroup-…a1b2"}
    assert opened["fleet"]["opened_by"] == "sa-watcher" and calls == ["asked"]
    assert view.decisions and all(d["status"] == "hold" and "breaker" in d["why"] for d in view.decisions)
    text = render_text(report().model_copy(update={"remediation": view}))
    assert "breaker OPEN fleet: 2/4 GPU nodes impaired (> 20%)" in text
    assert "another identity than 'sa-watcher'" in text


def test_an_unreadable_cluster_leaves_its_incidents_as_they_were() -> None:
    open_one = core.Incident("research/train", "n1", "uid-n1", FaultReason.NOT_READY, T0)
    _, moved, _ = _advance(
        report(status=HealthStatus.FAILED), ledger.Ledger([open_one]), T0 + timedelta(hours=1)
    )
    assert moved.incidents == [open_one]


def test_the_ledger_is_private_and_survives_a_round_trip(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path))
    state = ledger.Ledger(
        incidents=[
            core.Incident(
                "research/train",
                "n1",
                "u",
                FaultReason.GPU_ERROR,
                T0,
                attempts=(core.Attempt(Rung.REQUALIFY, T0),),
            )
        ],
        breakers={"fleet": core.Breaker("fleet", 20, 3, 10, T0, "sa-watcher")},
    )
    path = ledger.save("fleet", state)
    assert (
        stat.S_IMODE(path.stat().st_mode) == 0o600
        and path == tmp_path / "health" / "remediation" / "fleet.json"
    )
    assert ledger.load("fleet") == state
    assert ledger.load("other") == ledger.Ledger()


def test_a_breaker_reset_by_the_watchers_own_identity_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path))
    ledger.save(
        "fleet", ledger.Ledger(breakers={"fleet": core.Breaker("fleet", 20, 3, 10, T0, "sa-watcher")})
    )
    with pytest.raises(ledger.ResetRefused, match="cannot be reset by that same identity"):
        ledger.reset_breaker("fleet", "fleet", "sa-watcher")
    assert ledger.load("fleet").breakers["fleet"].open
    with pytest.raises(UserInputError, match=r"no open breaker for scope 'cluster:x/y'.*open: fleet"):
        ledger.reset_breaker("fleet", "cluster:x/y", "alice")
    opened_by, closed = ledger.reset_breaker("fleet", "fleet", "alice", now=T0)
    assert (opened_by, closed.open) == ("sa-watcher", False)
    saved = ledger.load("fleet")
    assert not saved.breakers["fleet"].open
    assert saved.resets == [
        {"scope": "fleet", "by": "alice", "at": T0.isoformat(), "opened_by": "sa-watcher"}
    ]


def test_each_shards_watcher_keeps_its_own_ledger_and_a_whole_fleet_read_merges_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path))

    def incident(node: str) -> core.Incident:
        return core.Incident("research/train", node, f"u-{node}", FaultReason.GPU_ERROR, T0)

    watcher = core.Breaker("fleet", 20, 3, 10, T0, "sa-watcher")
    closed = core.Breaker("fleet", 20, 0, 10)
    one = ledger.save("fleet", ledger.Ledger([incident("n1")], {"fleet": watcher}), "1/2")
    two = ledger.save("fleet", ledger.Ledger([incident("n2")], {"fleet": closed}), "2/2")
    assert (one.name, two.name) == ("fleet.shard-1-of-2.json", "fleet.shard-2-of-2.json")
    assert stat.S_IMODE(one.stat().st_mode) == 0o600
    assert ledger.shards("fleet") == ["1/2", "2/2"] and ledger.shards("fleet-other") == []
    assert [i.node for i in ledger.load("fleet", "2/2").incidents] == ["n2"]
    assert ledger.load("fleet") == ledger.Ledger()  # the unsharded watcher's: none yet
    merged = ledger.load_all("fleet")
    assert sorted(i.node for i in merged.incidents) == ["n1", "n2"]
    assert merged.breakers["fleet"].open  # open in one shard: open for a read of the whole fleet
    # a reset: refused to the watcher, in its shard only with --shard, else wherever it is open
    with pytest.raises(UserInputError, match=r"no open breaker .* shard 2/2"):
        ledger.reset_breaker("fleet", "fleet", "alice", now=T0, shard="2/2")
    with pytest.raises(ledger.ResetRefused):
        ledger.reset_breaker("fleet", "fleet", "sa-watcher", now=T0)
    opened_by, _ = ledger.reset_breaker("fleet", "fleet", "alice", now=T0)
    assert opened_by == "sa-watcher" and not ledger.load_all("fleet").breakers["fleet"].open
    assert ledger.load("fleet", "1/2").resets[0]["by"] == "alice" and ledger.load("fleet", "2/2").resets == []


def test_a_damaged_ledger_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NPA_PULUMI_HOME", str(tmp_path))
    ledger.ledger_path("fleet").parent.mkdir(parents=True)
    ledger.ledger_path("fleet").write_text("{not json")
    with pytest.raises(NpaError, match=r"damaged.*move it aside"):
        ledger.load("fleet")


def test_the_identity_is_the_principal_else_the_os_user_at_the_host() -> None:
    assert Who(principal="serviceaccount-e00x", os_user="ci").identity == "serviceaccount-e00x"
    assert Who(os_user="alice", host="laptop").identity == "alice@laptop"


def test_validated_return_a_node_with_an_open_incident_is_not_usable_until_its_gate_passes() -> None:
    opened = "2026-12-01T12:00:00+00:00"
    incidents = {"gpu-0": ("uid-gpu-0", "gpu-error", opened)}
    waiting = Qualification(gate_passed=True, gate_nodes=GATE.gate_nodes, incidents=incidents)
    judged = judge_node(node("gpu-0"), CONFIG, waiting, [])
    assert (judged.state, judged.qualification, judged.incident) == (
        "unqualified",
        "unqualified",
        "gpu-error",
    )
    assert any("open gpu-error incident since" in p and "--requalify" in p for p in judged.problems)
    before = {"gpu-0": {"uid": "uid-gpu-0", "passed": True, "at": "2026-12-01T11:59:00+00:00"}}
    stale = Qualification(
        gate_passed=True, gate_nodes=GATE.gate_nodes, requalified=before, incidents=incidents
    )
    assert judge_node(node("gpu-0"), CONFIG, stale, []).state == "unqualified"
    after = {"gpu-0": {"uid": "uid-gpu-0", "passed": True, "at": "2026-12-01T12:05:00+00:00"}}
    passed = Qualification(
        gate_passed=True, gate_nodes=GATE.gate_nodes, requalified=after, incidents=incidents
    )
    assert judge_node(node("gpu-0"), CONFIG, passed, []).state == "usable"
    # an incident of an earlier node object under that name does not hold the new one
    assert judge_node(node("gpu-0", uid="uid-new"), CONFIG, waiting, []).state == "usable"


def test_the_metrics_carry_breakers_incidents_mtbi_mttr_and_repeat_offenders() -> None:
    from npa_pulumi.engine.health.watch import HealthMetrics

    def closed(start_h: float, hours: float) -> core.Incident:
        opened = T0 - timedelta(hours=start_h)
        return core.Incident(
            "research/train",
            "n1",
            "uid-n1",
            FaultReason.GPU_ERROR,
            opened,
            opened + timedelta(hours=hours),
            core.Closed.RETURNED,
        )

    state = ledger.Ledger(incidents=[closed(50, 1), closed(30, 3), closed(10, 2)])
    error = NodeCondition(type="NebiusGPUError", status="True")
    found = report(gpu("n1", conditions=[error], state="degraded"), gpu("n2"), gpu("n3"), gpu("n4"))
    found.remediation, _moved, _calls = _advance(found, state, T0)
    metrics = HealthMetrics()
    metrics.update(found, T0)
    text = metrics.exposition().decode()
    node = 'fleet="fleet",node="n1",project="research"'
    assert 'npa_health_breaker_open{fleet="fleet",scope="cluster:research/train"} 1.0' in text
    assert f'npa_health_node_incidents{{cluster="train",{node}}} 4.0' in text
    assert f'npa_health_node_mtbi_seconds{{cluster="train",{node}}} {50 * 3600 / 3:.1f}' in text
    assert f'npa_health_node_mttr_seconds{{cluster="train",{node}}} {2 * 3600:.1f}' in text
    assert 'npa_health_reason_incidents{fleet="fleet",reason="gpu-error"} 4.0' in text
    assert f'npa_health_repeat_offender{{cluster="train",{node}}} 1.0' in text
    # a read without the ladder's view has none of its series
    metrics.update(report(gpu("n2")), T0)
    assert "npa_health_node_incidents{" not in metrics.exposition().decode()


def test_a_gate_pass_after_the_incident_opened_returns_the_node_too() -> None:
    incidents = {"gpu-0": ("uid-gpu-0", "gpu-error", "2026-12-01T12:00:00+00:00")}
    again = Qualification(
        gate_passed=True, gate_nodes=GATE.gate_nodes, incidents=incidents, gate_at="2026-12-01T13:00:00+00:00"
    )
    assert judge_node(node("gpu-0"), CONFIG, again, []).qualification == "gate"
    earlier = Qualification(
        gate_passed=True, gate_nodes=GATE.gate_nodes, incidents=incidents, gate_at="2026-12-01T11:00:00+00:00"
    )
    assert judge_node(node("gpu-0"), CONFIG, earlier, []).qualification == "unqualified"
    # the ledger closes it: the cluster's gate pass is the node's gate verdict
    open_one = core.Incident("research/train", "n1", "uid-n1", FaultReason.GPU_ERROR, T0)
    found = report(gpu("n1"))
    found.clusters[0].last_gate_passed_at = (T0 + timedelta(minutes=5)).isoformat()
    _view, moved, _calls = _advance(found, ledger.Ledger([open_one]), T0 + timedelta(minutes=6))
    assert moved.incidents[0].closed is core.Closed.RETURNED


def test_the_fleet_breaker_counts_the_gpu_nodes_of_clusters_this_read_did_not_select() -> None:
    error = NodeCondition(type="NebiusGPUError", status="True")
    found = report(gpu("n1", conditions=[error], state="degraded"), gpu("n2"), gpu("n3"), gpu("n4"))
    other = {"unread:fleet-research-eval": ladder.ClusterInfo("research/eval", "", None, 16)}
    view, _moved = ladder.advance(
        found, INFO | other, resolve(parse_spec(SPEC)), ledger.Ledger(), T0, 60.0, lambda: "w", watching=True
    )
    breakers = {b["scope"]: b for b in view.breakers}
    assert (breakers["fleet"]["impaired"], breakers["fleet"]["total"], breakers["fleet"]["open"]) == (
        1,
        20,
        False,
    )
    assert breakers["cluster:research/train"]["open"]  # 1 of its 4
    assert not breakers["cluster:research/eval"]["open"]


def test_a_remediating_read_is_audited_in_counts_without_node_names() -> None:
    from npa_pulumi.engine.audit import remediation_record
    from npa_pulumi.output.health import RemediationView

    found = report(gpu("n1"))
    assert remediation_record(found, Who(os_user="w"), T0, {}, None) is None  # no view: nothing done
    found.remediation = RemediationView(actions=[])
    assert remediation_record(found, Who(os_user="w"), T0, {}, None) is None
    cluster = "research/train"
    found.remediation.actions = [
        {
            "cluster": cluster,
            "node": "n1",
            "rung": "cordon-and-report",
            "outcome": "done",
            "detail": "cordoned",
        },
        {"cluster": cluster, "node": "n2", "rung": "requalify", "outcome": "done", "detail": "passed"},
        {"cluster": cluster, "node": "n3", "rung": "cordon-and-report", "outcome": "skipped", "detail": "x"},
    ]
    entry = remediation_record(found, Who(os_user="w"), T0, {"projects": []}, "sha256:x")
    assert entry is not None and entry.repair == "remediate" and entry.outcome == "ok"
    assert entry.totals == {"done": 2, "skipped": 1, "failed": 0}
    [stack] = entry.stacks
    assert (stack.stack, stack.status) == ("fleet-research-train", "remediated")
    assert stack.detail == "cordon-and-report done: 1, cordon-and-report skipped: 1, requalify done: 1"
    assert "n1" not in json.dumps(entry.to_json())


def test_a_plain_read_trips_no_breaker_and_a_dry_run_plans_as_the_watch_would_without_a_name() -> None:
    error = NodeCondition(type="NebiusGPUError", status="True")
    found = report(
        *[gpu(f"n{i}", conditions=[error], state="degraded") for i in range(2)], gpu("n2"), gpu("n3")
    )
    asked: list[str] = []
    policy = resolve(parse_spec(SPEC))

    def watcher() -> str:
        asked.append("asked")
        return "w"

    plain, _ = ladder.advance(found, INFO, policy, ledger.Ledger(), T0, 60.0, watcher)
    assert not plain.open_breakers and plain.decisions is None
    fleet = {b["scope"]: b for b in plain.breakers}["fleet"]
    assert (fleet["impaired"], fleet["total"]) == (2, 4)  # the figures are shown all the same
    planned, _ = ladder.advance(found, INFO, policy, ledger.Ledger(), T0, 60.0, watcher, dry_run=True)
    assert {b["opened_by"] for b in planned.open_breakers} == {""} and asked == []
    assert planned.decisions and all(d["status"] == "hold" for d in planned.decisions)
    # a breaker the watch opened stays open in a plain read
    tripped = core.Breaker("fleet", 20, 2, 4, T0, "w")
    kept, _ = ladder.advance(
        report(gpu("n0")), INFO, policy, ledger.Ledger(breakers={"fleet": tripped}), T0, 60.0, watcher
    )
    assert [b["scope"] for b in kept.open_breakers] == ["fleet"]


def test_faults_now_leaves_out_what_the_gate_says() -> None:
    error = NodeCondition(type="NebiusGPUError", status="True")
    failed = {"passed": False, "at": "x"}
    both = gpu(
        "n1", conditions=[error], qualification="unqualified", requalification=failed, incident="gpu-error"
    )
    assert ladder.faults_now(both) == (FaultReason.GPU_ERROR,)
    assert ladder.faults_now(gpu("n2", qualification="unqualified", requalification=failed)) == ()
