"""`health --watch` (engine/health/watch.py): transitions between two reads as JSON lines, the Prometheus
series of the last read served over HTTP, and the loop's iterations."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Sequence
from pathlib import Path

from npa_pulumi.engine.health.watch import HealthMetrics, transitions, watch
from npa_pulumi.engine.requests import HealthWatch
from npa_pulumi.output.health import (
    ClusterHealth,
    FleetHealth,
    GpuTotals,
    Maintenance,
    NodeCondition,
    NodeHealth,
    ProjectHealth,
)


def _node(name: str, state: str = "usable", qualification: str = "gate", **extra: object) -> NodeHealth:
    return NodeHealth.model_validate(
        {"name": name, "node_group": "gpu", "gpu": True, "state": state, "ready": True,
         "qualification": qualification, "gpus_expected": 8, "gpus_allocatable": 8, **extra}
    )  # fmt: skip


def _report(nodes: list[NodeHealth], events: Sequence[Maintenance] = ()) -> FleetHealth:
    usable = sum(n.gpus_allocatable for n in nodes if n.state == "usable")
    cluster = ClusterHealth(
        stack="f.p.c",
        project_key="p",
        cluster_name="c",
        kube_context="f-p-c",
        status="ok",
        totals=GpuTotals(requested=8 * len(nodes), usable=usable),
        usable_fraction=usable / (8 * len(nodes)),
        nodes=nodes,
    )
    project = ProjectHealth(project_key="p", project_id="project-1", maintenance=list(events))
    return FleetHealth(fleet="f", cloud="local", min_usable=1.0, clusters=[cluster], projects=[project])


XID = Maintenance(id="ev-1", reason="HW_GPU_XID_79", node="b", cluster="f.p.c")


def test_transitions_name_what_changed_and_the_first_read_is_the_baseline() -> None:
    before = _report([_node("a"), _node("b"), _node("c"), _node("d", state="degraded")])
    error = [NodeCondition(type="NebiusGPUError", status="True", message="Xid 79")]
    after = _report(
        [
            _node("a", state="degraded", conditions=error, problems=["NebiusGPUError: Xid 79"]),
            _node("b", state="maintenance"),
            _node("c-r1", state="unqualified", qualification="unqualified"),
            _node("d"),
        ],
        [XID],
    )
    assert transitions(None, before, "t0") == []
    found = {(e["event"], e["node"]): e for e in transitions(before, after, "t1")}
    assert set(found) == {
        ("node-degraded", "a"),
        ("node-replaced", "c"),
        ("node-recovered", "d"),
        ("maintenance-scheduled", "b"),
    }
    assert found[("node-replaced", "c")]["by"] == "c-r1"
    assert found[("maintenance-scheduled", "b")]["reason"] == "HW_GPU_XID_79"
    requalified = _report([_node("c-r1", qualification="requalified")])
    later = {
        e["event"]
        for e in transitions(_report([_node("c-r1", "unqualified", "unqualified")], [XID]), requalified, "t2")
    }
    assert later == {"node-requalified", "maintenance-finished"}


def test_metrics_are_served_over_http_one_series_per_cluster_node_condition_and_reason() -> None:
    metrics = HealthMetrics()
    error = [NodeCondition(type="NebiusGPUError", status="True")]
    metrics.update(
        _report([_node("a", state="degraded", conditions=error), _node("b", maintenance=[XID])], [XID])
    )
    stop = metrics.serve(0)
    try:
        text = metrics.exposition().decode()
    finally:
        stop()
    assert 'npa_health_gpus{bucket="requested",cluster="c",fleet="f",project="p"} 16.0' in text
    assert (
        'npa_health_node_condition{cluster="c",condition="NebiusGPUError",fleet="f",node="a",project="p"} 1.0'
        in text
    )
    assert (
        'npa_health_maintenance_events{cluster="c",fleet="f",node="b",project="p",reason="HW_GPU_XID_79"} 1.0'
        in text
    )
    assert 'npa_health_node_state{cluster="c",fleet="f",node="a",project="p",state="degraded"} 1.0' in text
    metrics.update(_report([_node("b")]))  # a node that left has no series any more
    assert 'node="a"' not in metrics.exposition().decode()


def test_watch_reads_its_iterations_serves_metrics_and_appends_events(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reads = iter([_report([_node("a")]), _report([_node("a", state="degraded")])])
    served: list[str] = []

    def on_report(_report: FleetHealth) -> None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
            served.append(response.read().decode())

    events = tmp_path / "events.jsonl"
    options = HealthWatch(interval_s=0.01, iterations=2, metrics_port=port, events_path=events)
    last = watch(lambda: next(reads), options, on_report, sleep=lambda _s: None)
    assert last.clusters[0].nodes[0].state == "degraded"
    assert len(served) == 2 and 'state="degraded"' in served[1] and 'state="degraded"' not in served[0]
    [line] = events.read_text().splitlines()
    assert json.loads(line)["event"] == "node-degraded"


def test_the_text_report_names_each_node_that_is_not_simply_usable() -> None:
    from npa_pulumi.output.health import render_text

    error = ["NebiusGPUError: Xid 79"]
    text = render_text(_report([_node("a", state="degraded", problems=error), _node("b")], [XID]))
    assert "maintenance HW_GPU_XID_79 on f.p.c node b (ev-1)" in text
    assert "a [degraded]: NebiusGPUError: Xid 79" in text and "b [" not in text


def test_the_seconds_since_the_last_gate_pass_per_cluster() -> None:
    from datetime import UTC, datetime

    report = _report([_node("a")])
    report.clusters[0].last_gate_passed_at = "2026-12-01T10:00:00+00:00"
    metrics = HealthMetrics()
    metrics.update(report, now=datetime(2026, 12, 1, 10, 30, tzinfo=UTC))
    text = metrics.exposition().decode()
    assert 'npa_health_seconds_since_gate_pass{cluster="c",fleet="f",project="p"} 1800.0' in text
    report.clusters[0].last_gate_passed_at = None  # no pass with its time recorded: no series
    metrics.update(report)
    assert "npa_health_seconds_since_gate_pass{" not in metrics.exposition().decode()


def test_the_gate_notes_when_it_decided() -> None:
    from npa_pulumi.engine.operations.health import _gate_passed_at
    from npa_pulumi.output.stack_outputs import ClusterOutputs

    def passed_at(evidence: dict[str, object]) -> str | None:
        return _gate_passed_at(ClusterOutputs.read({"health_evidence": evidence}))

    evidence = {"passed": True, "finished_at": "2026-12-01T10:00:00+00:00"}
    assert passed_at(evidence) == "2026-12-01T10:00:00+00:00"
    assert passed_at({**evidence, "passed": False}) is None
    assert passed_at({"passed": True}) is None  # recorded by an older version
