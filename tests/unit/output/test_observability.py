"""Traces (runtime/tracing.py), notifications (output/notifications.py, the spec's `notify:`) and the audit
trail (engine/audit.py, engine/automation/audit_store.py): span trees, scrubbing, bounded retries against a
local HTTP server, webhooks validated where the spec has them, health events on changes only, and records
(repairs' too) written once and listed."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from npa_pulumi.cloud.redaction import scrub
from npa_pulumi.engine import audit
from npa_pulumi.engine.automation import audit_store
from npa_pulumi.output import notifications
from npa_pulumi.output.health import ClusterHealth, FleetHealth, GpuTotals, NodeHealth
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.runtime import tracing
from npa_pulumi.runtime.retry import RetryPolicy
from npa_pulumi.spec import SpecError, parse_spec

SECRET = "abcdef0123456789secretvalue"
TOKEN = f"Bearer {SECRET}"  # what scrub blanks (the PR comment's rules)
BLOCK = "capacityblockgroup-e00secretblock42"  # masked to its tail


def _spans(document: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        span
        for resource in document["resourceSpans"]
        for scope in resource["scopeSpans"]
        for span in scope["spans"]
    ]


def _attrs(span: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in span.get("attributes", [])}


def test_tracing_off_is_a_no_op() -> None:
    assert not tracing.active()
    assert not tracing.start(tracing.TraceSettings(), "npa-pulumi up")
    tracing.stack_phase("s", "updating")
    with tracing.span("terraform apply", stack="s"):
        assert tracing.traceparent("s") is None
    assert tracing.engine_trace_file("s") is None
    assert tracing.finish("ok") == []


def test_span_tree_waves_stacks_phases_and_children(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    tracing.start(tracing.TraceSettings(file=str(out)), "npa-pulumi up", {"npa.command": "up"}, scrub=scrub)
    tracing.assign_wave("f.p.a", 1, 2)
    tracing.stack_phase("f.p", "preparing")
    tracing.stack_phase("f.p", "done")
    tracing.stack_phase("f.p.a", "preparing")
    tracing.stack_phase("f.p.a", "updating")
    tracing.stack_attributes("f.p.a", {"npa.cluster": "a", "npa.kind": "cluster"})
    tracing.child_started("f.p.a", "urn:gate", "GpuHealthGate")
    with tracing.span("terraform apply", stack="f.p.a"):
        parent = tracing.traceparent("f.p.a")
    tracing.child_finished("f.p.a", "urn:gate")
    tracing.stack_phase("f.p.a", "failed", f"gate failed with {TOKEN} on {BLOCK}")
    tracing.wave_finished(1, "halted")
    assert parent is not None and parent.startswith("00-")
    assert tracing.finish("failed", {"npa.failed": 1}) == []
    spans = {s["name"]: s for s in _spans(json.loads(out.read_text()))}
    root = spans["npa-pulumi up"]
    assert "parentSpanId" not in root or not root["parentSpanId"]
    assert spans["wave 1 of 2"]["parentSpanId"] == root["spanId"]
    assert spans["f.p"]["parentSpanId"] == root["spanId"]  # no wave: under the root
    assert spans["f.p.a"]["parentSpanId"] == spans["wave 1 of 2"]["spanId"]
    assert spans["updating"]["parentSpanId"] == spans["f.p.a"]["spanId"]
    assert spans["GpuHealthGate"]["parentSpanId"] == spans["updating"]["spanId"]
    assert spans["terraform apply"]["parentSpanId"] == spans["GpuHealthGate"]["spanId"]
    assert parent.split("-")[2] == spans["terraform apply"]["spanId"]
    assert _attrs(spans["f.p.a"])["npa.status"] == "failed"
    assert BLOCK not in out.read_text()
    assert SECRET not in out.read_text()


def test_engine_spans_are_scrubbed_and_merged(tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    tracing.start(tracing.TraceSettings(file=str(out)), "npa-pulumi up", scrub=scrub)
    tracing.stack_phase("f.p", "updating")
    engine_file = tracing.engine_trace_file("f.p")
    assert engine_file is not None
    trace_id = tracing.traceparent("f.p").split("-")[1]  # type: ignore[union-attr]
    engine = {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "pulumi"}}]},
                "scopeSpans": [
                    {
                        "spans": [
                            {
                                "traceId": trace_id,  # of the command's trace: kept
                                "spanId": "0102030405060708",
                                "name": "pulumi",
                                "kind": 1,
                                "attributes": [{"key": "cli.args", "value": {"stringValue": TOKEN}}],
                            }
                        ]
                    }
                ],
            }
        ]
    }
    engine_file.write_text(json.dumps(engine) + "\n")
    tracing.collect_engine_trace(engine_file)
    tracing.stack_phase("f.p", "done")
    tracing.finish("ok")
    document = json.loads(out.read_text())
    names = [s["name"] for s in _spans(document)]
    assert "pulumi" in names and "f.p" in names
    assert SECRET not in out.read_text()
    assert tracing.to_protobuf(document)  # the same document as OTLP/HTTP's protobuf


def test_otlp_environment() -> None:
    assert tracing.otlp_endpoint({}) == "http://localhost:4318/v1/traces"
    assert (
        tracing.otlp_endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"}) == "http://c:4318/v1/traces"
    )
    assert tracing.otlp_endpoint({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://x/t"}) == "http://x/t"
    assert tracing.otlp_headers({"OTEL_EXPORTER_OTLP_HEADERS": "a=b,c=d%20e"}) == {"a": "b", "c": "d e"}


# ------------------------------------------------------------------------------------ notifications


class _Receiver:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.bodies: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                if receiver.failures > 0:
                    receiver.failures -= 1
                    self.send_response(503)
                else:
                    receiver.bodies.append(json.loads(body))
                    self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/{SECRET}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@pytest.fixture
def receiver() -> Iterator[_Receiver]:
    made = _Receiver(failures=0)
    yield made
    made.server.shutdown()


def _halted() -> FleetResult:
    return FleetResult(
        command="up",
        fleet="f",
        cloud="local",
        backend="file:///tmp/x",
        stacks=[
            StackResult(
                stack="f.p.a",
                kind="cluster",
                project_key="p",
                status="deployed",
                outputs={"lifecycle": "deployed-validation-failed"},
            ),
            StackResult(
                stack="f.p.b",
                kind="cluster",
                project_key="p",
                status="skipped",
                error=f"wave 2 not started; {TOKEN} {BLOCK}",
            ),
        ],
        rollout={"waves": [], "halted": {"wave": 1, "reason": "gate failed"}},
    )


NO_WAIT = RetryPolicy(max_attempts=3, initial_backoff_s=0.0, jitter=0.0)


def test_a_halted_rollout_posts_one_scrubbed_event(receiver: _Receiver) -> None:
    receiver.failures = 2  # two refusals, then accepted: within the bounded retries
    assert notifications.notify(_halted(), [receiver.url], policy=NO_WAIT) == []
    assert len(receiver.bodies) == 1
    event = receiver.bodies[0]
    assert event["events"] == ["rollout-halted", "gate-failed"]
    assert "rollout halted at wave 1" in event["text"]
    assert SECRET not in json.dumps(event)


def test_a_clean_run_posts_nothing(receiver: _Receiver) -> None:
    clean = FleetResult(command="up", fleet="f", cloud="local", backend="file:///tmp/x")
    assert notifications.notify(clean, [receiver.url], policy=NO_WAIT) == []
    assert receiver.bodies == []


def test_a_failed_notification_is_a_warning_without_the_url_secret(receiver: _Receiver) -> None:
    receiver.failures = 10
    warnings = notifications.notify(_halted(), [receiver.url], policy=NO_WAIT)
    assert len(warnings) == 1 and "3 attempt(s)" in warnings[0]
    assert SECRET not in warnings[0]
    assert receiver.failures == 7  # exactly the bounded attempts


def test_a_read_of_a_halted_rollout_posts_nothing() -> None:
    status = _halted()
    status.command = "status"  # shows the halt and the failed gate the `up` already posted
    assert notifications.reasons(status) == []
    assert notifications.reasons(_halted()) == ["rollout-halted", "gate-failed"]


def test_destroy_incomplete_notifies() -> None:
    result = FleetResult(
        command="destroy",
        fleet="f",
        cloud="local",
        backend="b",
        stacks=[StackResult(stack="f.p.a", kind="cluster", project_key="p", status="failed", error="x")],
    )
    assert notifications.reasons(result) == ["destroy-incomplete"]


# ------------------------------------------------------------------------------------ audit


def test_audit_records_are_written_once_and_listed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITHUB_SERVER_URL", "https://github.com")
    monkeypatch.setenv("GITHUB_REPOSITORY", "acme/fleet")
    monkeypatch.setenv("GITHUB_RUN_ID", "42")
    backend = f"file://{tmp_path}"
    started = datetime.now(UTC) - timedelta(seconds=5)
    result = _halted()
    entry = audit.record(result, audit.who(None, "prod"), started, {"clusters": ["a"]}, "sha256:00")
    first = audit.append(backend, entry)
    second = audit.append(backend, entry)
    assert first != second  # one object per record
    assert Path(first).stat().st_mode & 0o777 == 0o600
    with pytest.raises(audit_store.AuditUnavailable):  # never rewritten
        audit_store.append(backend, "npa-fleet", "f", "{}", name=Path(first).name)
    records = audit.read(backend, "f")
    assert [r.command for r in records] == ["up", "up"]
    record = records[0]
    assert record.who.ci_run_url == "https://github.com/acme/fleet/actions/runs/42"
    assert record.who.profile == "prod"
    assert [(s.stack, s.status) for s in record.stacks] == [("f.p.a", "deployed"), ("f.p.b", "skipped")]
    assert record.stacks[0].lifecycle == "deployed-validation-failed"
    assert SECRET not in Path(first).read_text()
    assert audit.read(backend, "f", since=datetime.now(UTC) + timedelta(hours=1)) == []


def test_a_backend_without_a_trail_says_so() -> None:
    with pytest.raises(audit_store.AuditUnavailable):
        audit_store.append("https://api.pulumi.com", "npa-fleet", "f", "{}")


# ------------------------------------------------------------------------------------ the spec's notify

NOTIFY_SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: nt
region: us-central1
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
notify:
NOTIFY
projects:
  - name: a
"""


def _notify_spec(*entries: str) -> str:
    return NOTIFY_SPEC.replace("NOTIFY", "\n".join(f"  - {json.dumps(e)}" for e in entries))


def test_the_spec_takes_webhooks_and_env_references() -> None:
    spec = parse_spec(_notify_spec("https://hooks.example.com/x", "${NPA_TEST_HOOK}", "$OTHER_HOOK"))
    assert spec.notify == ["https://hooks.example.com/x", "${NPA_TEST_HOOK}", "$OTHER_HOOK"]
    assert "hooks.example.com" not in repr(spec)  # never in a repr (logs, tracebacks)
    assert parse_spec(NOTIFY_SPEC.replace("notify:\nNOTIFY\n", "")).notify == []


def test_bad_webhooks_are_located_and_never_echoed() -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(
            _notify_spec(
                f"ftp://hooks.acme.test/{SECRET}",
                "$1bad",
                f"https:///{SECRET}",
                "https://hooks.acme.test/x",
                "https://hooks.acme.test/x",
                "not a url",
            ),
            "fleet.yaml",
        )
    problems = {(p.path, p.line) for p in caught.value.problems}
    assert problems == {
        ("notify[0]", 7),
        ("notify[1]", 8),
        ("notify[2]", 9),
        ("notify[4]", 11),
        ("notify[5]", 12),
    }
    text = str(caught.value)
    assert "scheme is 'ftp'" in text and "has no host" in text and "repeats notify[3]" in text
    assert SECRET not in text and "hooks.acme.test" not in text
    with pytest.raises(SpecError, match=r"notify\[0\]: must be a string"):
        parse_spec(NOTIFY_SPEC.replace("NOTIFY", "  - 5"))


def test_targets_merge_flags_with_the_spec_and_read_the_environment() -> None:
    flag = "https://flag.example.com/a"
    urls, warnings = notifications.targets(
        [flag, flag],
        ["${HOOK_SET}", "$HOOK_UNSET", "${HOOK_BAD}", flag, "https://spec.example.com/b"],
        {"HOOK_SET": "https://env.example.com/c", "HOOK_BAD": f"ftp://x/{SECRET}"},
    )
    assert urls == [flag, "https://env.example.com/c", "https://spec.example.com/b"]
    assert warnings == [
        "notify[1]: ${HOOK_UNSET} is not set: nothing is posted there",
        "notify[2]: ${HOOK_BAD} must be an http(s) URL (its scheme is 'ftp'): nothing is posted there",
    ]


# ------------------------------------------------------------------------------------ health notifications


def _health_report(**states: tuple[str, int]) -> FleetHealth:
    """stack -> (status, degraded GPUs) of a fleet of 8-GPU clusters."""
    clusters = []
    for stack, (status, degraded) in states.items():
        node = NodeHealth(
            name=f"{stack}-n1",
            gpu=True,
            state="degraded" if degraded else "usable",
            ready=not degraded,
            problems=[f"NebiusGPUError: {TOKEN}"] if degraded else [],
        )
        clusters.append(
            ClusterHealth(
                stack=stack,
                project_key="p",
                cluster_name=stack.rsplit(".", 1)[-1],
                kube_context="ctx",
                status=status,
                totals=GpuTotals(requested=8, usable=8 - degraded, degraded=degraded),
                nodes=[node],
            )
        )
    return FleetHealth(fleet="f", cloud="local", min_usable=0.5, clusters=clusters)


def test_health_notifies_degraded_clusters_once_then_only_changes(receiver: _Receiver) -> None:
    notifier = notifications.HealthNotifier([receiver.url], policy=NO_WAIT)
    healthy = _health_report(**{"f.p.a": ("ok", 0), "f.p.b": ("ok", 0)})
    assert notifier(healthy) == [] and receiver.bodies == []  # a healthy first read: nothing

    degraded = _health_report(**{"f.p.a": ("ok", 1), "f.p.b": ("below-min-usable", 8)})
    assert notifier(degraded) == []
    assert len(receiver.bodies) == 1
    event = receiver.bodies[0]
    assert event["command"] == "health" and event["events"] == ["below-min-usable", "cluster-degraded"]
    assert [(c["stack"], c["state"], c["usable"]) for c in event["clusters"]] == [
        ("f.p.a", "degraded", 7),
        ("f.p.b", "below-min-usable", 0),
    ]
    assert "f.p.b: below-min-usable (0/8 GPUs usable, 8 degraded" in event["text"]
    assert SECRET not in json.dumps(event)  # the node's problem text is scrubbed

    notifier(degraded)  # the same read again: no change, no event
    unreadable = _health_report(**{"f.p.a": ("failed", 0), "f.p.b": ("below-min-usable", 8)})
    notifier(unreadable)  # an unreadable cluster keeps its last condition: no "recovered"
    assert len(receiver.bodies) == 1

    recovered = _health_report(**{"f.p.a": ("ok", 0), "f.p.b": ("below-min-usable", 8)})
    notifier(recovered)
    assert len(receiver.bodies) == 2
    assert receiver.bodies[1]["events"] == ["cluster-recovered"]
    assert [c["stack"] for c in receiver.bodies[1]["clusters"]] == ["f.p.a"]


def test_a_one_shot_health_read_of_a_degraded_fleet_posts_one_event(receiver: _Receiver) -> None:
    notifier = notifications.HealthNotifier([receiver.url], policy=NO_WAIT)
    notifier(_health_report(**{"f.p.a": ("below-min-usable", 4)}))
    assert [b["events"] for b in receiver.bodies] == [["below-min-usable"]]
    receiver.failures = 10
    warnings = notifications.HealthNotifier([receiver.url], policy=NO_WAIT)(
        _health_report(**{"f.p.a": ("ok", 1)})
    )
    assert len(warnings) == 1 and SECRET not in warnings[0]  # a warning, never the URL's secret


def test_the_ladder_notifies_a_breaker_once_when_it_opens_and_each_read_that_acted(
    receiver: _Receiver,
) -> None:
    from npa_pulumi.output.health import RemediationView

    notifier = notifications.HealthNotifier([receiver.url], policy=NO_WAIT)
    report = _health_report(**{"f.p.a": ("ok", 0)})
    breaker = {"scope": "cluster:p/a", "open": True, "impaired": 3, "total": 8, "opened_by": "w"}
    action = {"cluster": "p/a", "node": "f.p.a-n1", "rung": "cordon-and-report", "outcome": "done"}
    report.remediation = RemediationView(breakers=[breaker], actions=[action])
    assert notifier(report) == []
    [event] = receiver.bodies
    assert event["events"] == ["breaker-open", "remediation-actions"]
    assert event["breakers_opened"] == ["cluster:p/a"]
    assert event["actions"] == {"p/a": {"cordon-and-report done": 1}}
    assert "f.p.a-n1" not in json.dumps(event)  # node names stay in `health` and the receipts
    report.remediation = RemediationView(breakers=[breaker], actions=[])
    notifier(report)  # still open, nothing done: no event
    assert len(receiver.bodies) == 1
    planned = {"scope": "fleet", "open": True, "impaired": 3, "total": 8, "opened_by": ""}
    report.remediation = RemediationView(breakers=[breaker, planned], actions=[])
    notifier(report)  # a dry run's plan trips nothing for real: no event
    assert len(receiver.bodies) == 1


# ------------------------------------------------------------------------------------ audit of repairs


def test_a_reconcile_run_is_recorded_with_counts() -> None:
    result = FleetResult(
        command="verify-mig",
        fleet="f",
        cloud="local",
        backend="b",
        stacks=[
            StackResult(
                stack="f.p.a",
                kind="cluster",
                project_key="p",
                status="ready",
                health={"repaired_stale_taint": 2},
            ),
            StackResult(
                stack="f.p.b",
                kind="cluster",
                project_key="p",
                status="ready",
                health={"repaired_stale_taint": 0},
            ),
        ],
    )
    entry = audit.record(result, audit.who(None), datetime.now(UTC), {}, None, repair="reconcile")
    assert (entry.command, entry.repair) == ("verify-mig", "reconcile")
    assert [s.detail for s in entry.stacks] == [
        "removed the stale mig-not-ready taint from 2 node(s)",
        "nothing to repair",
    ]
    assert audit.record(result, audit.who(None), datetime.now(UTC), {}, None).stacks[0].detail is None


def test_a_requalify_run_is_recorded_without_node_names(tmp_path: Path) -> None:
    report = _health_report(**{"f.p.a": ("ok", 0), "f.p.b": ("ok", 0), "f.p.c": ("failed", 0)})
    report.clusters[0].requalify = {"nodes": ["node-x1"], "passed": ["node-x1"], "failed": []}
    report.clusters[1].requalify = {
        "nodes": ["node-y1", "node-y2"],
        "passed": [],
        "failed": ["node-y1", "node-y2"],
        "refused": {"node-y2": "a pod holds its GPUs"},
    }
    entry = audit.requalify_record(report, audit.who(None), datetime.now(UTC), {}, None)
    assert entry is not None
    assert (entry.command, entry.repair, entry.outcome) == ("health", "requalify", "failed")
    assert [(s.stack, s.status) for s in entry.stacks] == [("f.p.a", "requalified"), ("f.p.b", "failed")]
    assert entry.stacks[1].detail == (
        "probed 2 unqualified node(s): 0 passed, 2 failed (1 refused: GPU workloads ran)"
    )
    assert entry.totals == {"clusters": 2, "nodes": 3, "passed": 1, "failed": 2, "refused": 1}
    path = audit.append(f"file://{tmp_path}", entry)
    assert "node-" not in Path(path).read_text()
    [listed] = audit.read(f"file://{tmp_path}", "f")
    assert listed.repair == "requalify"
    nothing = _health_report(**{"f.p.a": ("failed", 0)})
    assert audit.requalify_record(nothing, audit.who(None), datetime.now(UTC), {}, None) is None
