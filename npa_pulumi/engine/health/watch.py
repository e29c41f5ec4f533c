"""`health --watch`: the same read on a schedule, its figures as Prometheus metrics and its changes as
JSON lines.

Metrics (the `prometheus_client` library's text exposition, on `--metrics-port`, bound to 127.0.0.1), one
series per cluster / node / condition / reason, replaced whole at every read (a node that left has no series
any more):

    npa_health_gpus{fleet,project,cluster,bucket}                    requested | usable | degraded |
                                                                     maintenance | unqualified | missing
    npa_health_usable_fraction{fleet,project,cluster}
    npa_health_node_condition{fleet,project,cluster,node,condition}  1 per Nebius condition that is True
    npa_health_node_state{fleet,project,cluster,node,state}          1: the node's bucket
    npa_health_maintenance_events{fleet,project,cluster,node,reason} active events per node and reason code
    npa_health_seconds_since_gate_pass{fleet,project,cluster}        since the last health gate pass
                                                                     (none: no pass with its time recorded)
    npa_health_reads_total{fleet}                                    reads done

The repair ladder's series (engine/health/remediation.py), from its ledger (incidents within its 30-day
horizon; faults only, a node that merely joined after the gate pass is no incident):

    npa_health_breaker_open{fleet,scope}                             1 open, 0 closed: fleet,
                                                                     cluster:P/C, capacity-block:ID (masked)
    npa_health_breaker_impaired_percent{fleet,scope}                 GPU nodes impaired within the window
    npa_health_node_incidents{fleet,project,cluster,node}            incidents of the node
    npa_health_node_mtbi_seconds{fleet,project,cluster,node}         mean time between its incidents (2+)
    npa_health_node_mttr_seconds{fleet,project,cluster,node}         mean time to repair (closed ones)
    npa_health_reason_incidents{fleet,reason}                        the same per fault reason
    npa_health_reason_mtbi_seconds{fleet,reason}
    npa_health_reason_mttr_seconds{fleet,reason}
    npa_health_repeat_offender{fleet,project,cluster,node}           1: not requalified automatically

Events (`--events FILE`, appended, one JSON object a line: `at`, `event`, `fleet`, `cluster`, `node`, and
what the event needs): `node-degraded` (with `problems`), `node-recovered`, `node-replaced` (`by`: the
node that joined in the same node group), `node-requalified`, `maintenance-scheduled` and
`maintenance-finished` (`id`, `reason`); with `--remediate`, `remediation-action` (`rung`, `outcome`,
`detail`) per action the ladder took. The first read is the baseline: it emits no transition. Same data as
`health` itself: names and reason codes, nothing secret.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from npa_pulumi.engine.requests import HealthWatch
from npa_pulumi.output.health import DEGRADED, USABLE, FleetHealth, NodeHealth


def transitions(before: FleetHealth | None, after: FleetHealth, at: str) -> list[dict[str, Any]]:
    """What changed between two reads of the same fleet (nothing on the first)."""
    if before is None:
        return []
    found: list[dict[str, Any]] = []
    old_clusters = {c.stack: c for c in before.clusters}
    for cluster in after.clusters:
        previous = old_clusters.get(cluster.stack)
        if previous is None or previous.status == "failed" or cluster.status == "failed":
            continue  # an unreadable read says nothing about its nodes
        base = {"at": at, "fleet": after.fleet, "cluster": cluster.stack}
        found += [{**base, **e} for e in _node_events(previous.nodes, cluster.nodes)]
    old_events = {m.id: m for p in before.projects for m in p.maintenance}
    new_events = {m.id: m for p in after.projects for m in p.maintenance}
    for key in sorted(set(new_events) - set(old_events)):
        m = new_events[key]
        found.append(_maintenance_event("maintenance-scheduled", at, after.fleet, m))
    for key in sorted(set(old_events) - set(new_events)):
        m = old_events[key]
        found.append(_maintenance_event("maintenance-finished", at, after.fleet, m))
    return found


def _node_events(before: list[NodeHealth], after: list[NodeHealth]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    old = {n.name: n for n in before}
    new = {n.name: n for n in after}
    joined = [new[n] for n in sorted(set(new) - set(old)) if new[n].gpu]
    for left in (old[n] for n in sorted(set(old) - set(new)) if old[n].gpu):
        by = next((j for j in joined if j.node_group == left.node_group), None)
        if by is not None:
            joined.remove(by)
            found.append(
                {"event": "node-replaced", "node": left.name, "by": by.name, "node_group": by.node_group}
            )
    for name in sorted(set(old) & set(new)):
        was, now = old[name], new[name]
        if now.state == DEGRADED and was.state != DEGRADED:
            found.append({"event": "node-degraded", "node": name, "problems": now.problems})
        elif now.state == USABLE and was.state in (DEGRADED, "maintenance"):
            found.append({"event": "node-recovered", "node": name})
        if now.qualification == "requalified" and was.qualification != "requalified":
            found.append({"event": "node-requalified", "node": name})
    return found


def ladder_events(report: FleetHealth, at: str) -> list[dict[str, Any]]:
    """`--watch --remediate`: one `remediation-action` event per action of this read (`rung`, `outcome`,
    `detail`; the receipt's path stays out)."""
    view = report.remediation
    if view is None:
        return []
    base = {"at": at, "fleet": report.fleet}
    found = [
        base
        | {"event": "remediation-action"}
        | {k: a[k] for k in ("cluster", "node", "rung", "outcome", "detail")}
        for a in view.actions or []
    ]
    return found


def _maintenance_event(kind: str, at: str, fleet: str, m: Any) -> dict[str, Any]:
    return {
        "at": at,
        "event": kind,
        "fleet": fleet,
        "cluster": m.cluster,
        "node": m.node or m.instance_name,
        "id": m.id,
        "reason": m.reason,
    }


class HealthMetrics:
    """The Prometheus series of the last read, in a registry of their own."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = CollectorRegistry()
        cluster = ["fleet", "project", "cluster"]
        self.gpus = Gauge("npa_health_gpus", "GPUs per bucket", [*cluster, "bucket"], registry=self.registry)
        self.fraction = Gauge(
            "npa_health_usable_fraction", "Usable GPUs over requested", cluster, registry=self.registry
        )
        self.condition = Gauge(
            "npa_health_node_condition",
            "Nebius node conditions that are True",
            [*cluster, "node", "condition"],
            registry=self.registry,
        )
        self.state = Gauge(
            "npa_health_node_state", "Each node's bucket", [*cluster, "node", "state"], registry=self.registry
        )
        self.maintenance = Gauge(
            "npa_health_maintenance_events",
            "Active maintenance events",
            [*cluster, "node", "reason"],
            registry=self.registry,
        )
        self.since_gate = Gauge(
            "npa_health_seconds_since_gate_pass",
            "Seconds since the cluster's last health gate pass",
            cluster,
            registry=self.registry,
        )
        self.reads = Counter("npa_health_reads", "Health reads done", ["fleet"], registry=self.registry)
        self.remediation = _RemediationGauges(self.registry)

    def update(self, report: FleetHealth, now: datetime | None = None) -> None:
        now = now or datetime.now(UTC)
        gauges = (self.gpus, self.fraction, self.condition, self.state, self.maintenance, self.since_gate)
        for gauge in gauges:
            gauge.clear()
        self.remediation.update(report)
        for cluster in report.clusters:
            labels = (report.fleet, cluster.project_key, cluster.cluster_name)
            for bucket, value in cluster.totals.model_dump().items():
                self.gpus.labels(*labels, bucket).set(value)
            self.fraction.labels(*labels).set(cluster.usable_fraction)
            passed = _parsed(cluster.last_gate_passed_at)
            if passed is not None:
                self.since_gate.labels(*labels).set(max(0.0, round((now - passed).total_seconds(), 1)))
            for node in cluster.nodes:
                self._node(labels, node)
        for project in report.projects:  # events no fleet node was matched to
            for event in project.maintenance:
                if event.node is None:
                    unmatched = (report.fleet, project.project_key, "", event.instance_name, event.reason)
                    self.maintenance.labels(*unmatched).inc()
        self.reads.labels(report.fleet).inc()

    def _node(self, labels: tuple[str, str, str], node: NodeHealth) -> None:
        self.state.labels(*labels, node.name, node.state).set(1)
        for condition in node.conditions:
            self.condition.labels(*labels, node.name, condition.type).set(1)
        for event in node.maintenance:
            self.maintenance.labels(*labels, node.name, event.reason).inc()

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)

    def serve(self, port: int, addr: str = "127.0.0.1") -> Callable[[], None]:
        """Serve /metrics; the function that stops the server."""
        from prometheus_client import start_http_server

        server, thread = start_http_server(port, addr=addr, registry=self.registry)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)

        return stop


class _RemediationGauges:
    """The ladder's series: breakers, incidents, MTBI/MTTR per node and reason, repeat offenders."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Gauge

        node = ["fleet", "project", "cluster", "node"]

        def gauge(name: str, what: str, labels: list[str]) -> Gauge:
            return Gauge(name, what, labels, registry=registry)

        self.breaker_open = gauge(
            "npa_health_breaker_open", "Remediation breaker open (1)", ["fleet", "scope"]
        )
        self.breaker_percent = gauge(
            "npa_health_breaker_impaired_percent", "GPU nodes impaired within the window", ["fleet", "scope"]
        )
        self.node_incidents = gauge("npa_health_node_incidents", "Incidents of the node", node)
        self.node_mtbi = gauge("npa_health_node_mtbi_seconds", "Mean time between the node's incidents", node)
        self.node_mttr = gauge("npa_health_node_mttr_seconds", "Mean time to repair the node", node)
        reason = ["fleet", "reason"]
        self.reason_incidents = gauge("npa_health_reason_incidents", "Incidents per fault reason", reason)
        self.reason_mtbi = gauge("npa_health_reason_mtbi_seconds", "Mean time between incidents", reason)
        self.reason_mttr = gauge("npa_health_reason_mttr_seconds", "Mean time to repair", reason)
        self.repeat = gauge(
            "npa_health_repeat_offender", "Repeat offender (not requalified automatically)", node
        )

    def update(self, report: FleetHealth) -> None:
        for gauge in vars(self).values():
            gauge.clear()
        view = report.remediation
        if view is None:
            return
        fleet = report.fleet
        for breaker in view.breakers:
            self.breaker_open.labels(fleet, breaker["scope"]).set(1 if breaker["open"] else 0)
            self.breaker_percent.labels(fleet, breaker["scope"]).set(breaker["percent"])
        numbers = view.numbers
        for entry in numbers.get("nodes") or []:
            labels = (fleet, *_project_cluster(entry["cluster"]), entry["node"])
            self.node_incidents.labels(*labels).set(entry["incidents"])
            _set(self.node_mtbi, labels, entry["mtbi_s"])
            _set(self.node_mttr, labels, entry["mttr_s"])
        for entry in numbers.get("reasons") or []:
            self.reason_incidents.labels(fleet, entry["reason"]).set(entry["incidents"])
            _set(self.reason_mtbi, (fleet, entry["reason"]), entry["mtbi_s"])
            _set(self.reason_mttr, (fleet, entry["reason"]), entry["mttr_s"])
        for entry in numbers.get("repeat_offenders") or []:
            self.repeat.labels(fleet, *_project_cluster(entry["cluster"]), entry["node"]).set(1)


def _project_cluster(key: str) -> tuple[str, str]:
    project, _, cluster = key.partition("/")
    return project, cluster


def _set(gauge: Any, labels: tuple[str, ...], value: float | None) -> None:
    """A figure that is not known yet (one incident: no MTBI) has no series."""
    if value is not None:
        gauge.labels(*labels).set(value)


def _parsed(stamp: str | None) -> datetime | None:
    if not stamp:
        return None
    try:
        found = datetime.fromisoformat(stamp)
    except ValueError:
        return None
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def append_events(path: Path, events: list[dict[str, Any]]) -> None:
    if not events:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as stream:
        for event in events:
            stream.write(json.dumps(event, sort_keys=True) + "\n")


def watch(
    read: Callable[[], FleetHealth],
    options: HealthWatch,
    on_report: Callable[[FleetHealth], None] = lambda _r: None,
    sleep: Callable[[float], None] = time.sleep,
) -> FleetHealth:
    """Read, publish, compare, wait; `iterations` reads (forever without). The last report."""
    metrics = HealthMetrics()
    stop = metrics.serve(options.metrics_port, options.metrics_addr) if options.metrics_port else None
    before: FleetHealth | None = None
    count = 0
    try:
        while True:
            started = time.monotonic()
            report = read()
            metrics.update(report)
            at = datetime.now(UTC).isoformat(timespec="seconds")
            if options.events_path is not None:
                append_events(
                    options.events_path, transitions(before, report, at) + ladder_events(report, at)
                )
            on_report(report)
            before, count = report, count + 1
            if options.iterations is not None and count >= options.iterations:
                return report
            sleep(max(0.0, options.interval_s - (time.monotonic() - started)))
    finally:
        if stop is not None:
            stop()
