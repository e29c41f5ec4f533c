"""Traces (runtime/tracing.py), notifications (output/notifications.py) and the audit trail
(engine/audit.py, engine/automation/audit_store.py): span trees, scrubbing, bounded retries against a
local HTTP server, and records written once and listed."""

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
from npa_pulumi.output.results import FleetResult, StackResult
from npa_pulumi.runtime import tracing
from npa_pulumi.runtime.retry import RetryPolicy

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
