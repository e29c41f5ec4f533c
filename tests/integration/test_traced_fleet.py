"""Traces and the audit trail end to end: `up` of a two-cluster local fleet in two waves with `--trace otlp`
against an OTLP/HTTP receiver in this test (the protobuf decoded with opentelemetry-proto) and
`--trace-file`: the root span, the waves, each stack under its wave, the phases, terraform's commands and
the engine's own spans under their stack, no secret anywhere; `report --timeline` draws that trace file in
headless Chromium; then `audit` lists the run, and after `destroy` both, with who and each stack's
outcome."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from browser_support import render
from fleet_helpers import npa, write_spec
from google.protobuf.json_format import MessageToDict
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: traced
region: us-central1
project_prefix: "tr-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
projects:
  - name: alpha
    clusters:
      - name: one
      - name: two
"""


class Collector:
    """An OTLP/HTTP receiver: every request's protobuf body, decoded."""

    def __init__(self) -> None:
        self.raw: list[bytes] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                assert self.path == "/v1/traces"
                assert self.headers["Content-Type"] == "application/x-protobuf"
                collector.raw.append(body)
                self.send_response(200)
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[dict[str, Any]]:
        found = []
        for body in self.raw:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource in request.resource_spans:
                service = next(
                    (a.value.string_value for a in resource.resource.attributes if a.key == "service.name"),
                    "",
                )
                for scope in resource.scope_spans:
                    for span in scope.spans:
                        found.append(
                            {
                                "service": service,
                                "name": span.name,
                                "id": span.span_id.hex(),
                                "parent": span.parent_span_id.hex(),
                                "trace": span.trace_id.hex(),
                                "attributes": MessageToDict(span).get("attributes", []),
                            }
                        )
        return found


@pytest.fixture
def collector() -> Iterator[Collector]:
    made = Collector()
    yield made
    made.server.shutdown()


def _ancestors(span: dict[str, Any], by_id: dict[str, dict[str, Any]]) -> list[str]:
    names = []
    while span["parent"] in by_id:
        span = by_id[span["parent"]]
        names.append(span["name"])
    return names


def _timeline_of_the_run(spec: str, tmp_path: Path, up_json: str, trace_file: Path, passphrase: str) -> None:
    """`report --timeline` of the run's own trace file, in the browser: the project stack, then one cluster
    per wave, all three on the longest path; each stack's phases and terraform's commands drawn."""
    document = tmp_path / "up.json"
    document.write_text(up_json)
    page = tmp_path / "timeline.html"
    drawn = npa(
        "report", "--spec", spec, "--from-json", str(document), "--timeline", str(trace_file),
        "--output", str(page),
    )  # fmt: skip
    assert drawn.code == 0, drawn.stderr[-3000:]
    rendered = render(page, tmp_path / "timeline.png", size="1280,1000")
    assert rendered.console == [], rendered.console
    svg = _TimelineSvg()
    svg.feed(rendered.dom)
    assert svg.stacks == {
        "traced.alpha": ("", "true"),
        "traced.alpha.one": ("1", "true"),
        "traced.alpha.two": ("2", "true"),
    }
    assert svg.waves == ["1", "2"] and svg.links == 2
    assert {"preparing", "updating"} <= svg.phases
    assert {"terraform init", "terraform apply", "kubeconfig"} <= svg.steps
    assert passphrase not in page.read_text()


class _TimelineSvg(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stacks: dict[str, tuple[str, str]] = {}
        self.waves: list[str] = []
        self.phases: set[str] = set()
        self.steps: set[str] = set()
        self.links = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        classes = found.get("class", "").split()
        if tag == "g" and "stack" in classes:
            self.stacks[found["data-stack"]] = (found["data-wave"], found["data-critical"])
        elif tag == "g" and "wave" in classes:
            self.waves.append(found["data-wave"])
        elif tag == "rect" and "phase" in classes:
            self.phases.add(found["data-phase"])
        elif tag == "rect" and "step" in classes:
            self.steps.add(found["data-name"])
        elif tag == "path" and "longest-path" in classes:
            self.links += 1


def test_traced_up_then_audit_then_destroy(isolated_home: Path, tmp_path: Path, collector: Collector) -> None:
    npa("local-cloud", "init", check=True)
    spec = str(write_spec(tmp_path / "fleet.yaml", SPEC))
    trace_file = tmp_path / "trace.json"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint, "OTEL_EXPORTER_OTLP_HEADERS": "x-team=fleet"}
    up = npa(
        "up", "--spec", spec, "--cloud", "local", "--yes", "--output", "json", "--waves", "1;rest",
        "--trace", "otlp", "--trace-file", str(trace_file), env=env,
    )  # fmt: skip
    assert up.code == 0, up.stderr[-4000:] + up.stdout[-2000:]

    spans = collector.spans()
    by_id = {s["id"]: s for s in spans}
    assert len({s["trace"] for s in spans}) == 1  # one trace: the engine's spans joined it
    roots = [s for s in spans if s["parent"] not in by_id]
    assert [r["name"] for r in roots] == ["npa-pulumi up"]
    named = {s["name"]: s for s in spans if s["service"] == "npa-pulumi"}
    root = named["npa-pulumi up"]
    assert named["wave 1 of 2"]["parent"] == root["id"] and named["wave 2 of 2"]["parent"] == root["id"]
    assert named["traced.alpha"]["parent"] == root["id"]  # the project stack: before any wave
    waves = {named["traced.alpha.one"]["parent"], named["traced.alpha.two"]["parent"]}
    assert waves == {named["wave 1 of 2"]["id"], named["wave 2 of 2"]["id"]}
    for cluster in ("traced.alpha.one", "traced.alpha.two"):
        under = [s for s in spans if cluster in _ancestors(s, by_id)]
        names = {s["name"] for s in under}
        assert "updating" in names, names
        assert {"terraform init", "terraform apply"} <= names, names
        assert any(s["service"] != "npa-pulumi" for s in under), "the engine's spans hang under the stack"
    assert "kubeconfig" in {s["name"] for s in spans}

    passphrase = (isolated_home / ".npa-pulumi" / "passphrase").read_text().strip()
    raw = b"".join(collector.raw)
    assert passphrase.encode() not in raw
    assert b"x-team" not in raw  # the collector's headers never travel in an attribute
    document = json.loads(trace_file.read_text())
    file_names = {s["name"] for r in document["resourceSpans"] for sc in r["scopeSpans"] for s in sc["spans"]}
    assert {"npa-pulumi up", "wave 1 of 2", "traced.alpha.one", "terraform apply"} <= file_names
    assert passphrase not in trace_file.read_text()
    _timeline_of_the_run(spec, tmp_path, up.stdout, trace_file, passphrase)

    listed = npa("audit", "--spec", spec, "--output", "json", check=True).json()["records"]
    assert [r["command"] for r in listed] == ["up"]
    record = listed[0]
    assert record["outcome"] == up.json().get("outcome", record["outcome"])
    assert record["who"]["os_user"] and record["spec_digest"].startswith("sha256:")
    assert {s["stack"]: s["status"] for s in record["stacks"]}["traced.alpha.one"] == "deployed"

    down = npa("destroy", "--spec", spec, "--cloud", "local", "--yes", "--output", "json")
    assert down.code == 0, down.stderr[-4000:]
    listed = npa("audit", "--spec", spec, "--output", "json", check=True).json()["records"]
    assert [r["command"] for r in listed] == ["up", "destroy"]
    assert {s["status"] for s in listed[1]["stacks"]} == {"destroyed"}
    text = npa("audit", "--spec", spec, check=True).stdout
    assert "destroy" in text and "traced.alpha.two: destroyed" in text
