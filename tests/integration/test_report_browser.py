"""The fleet report page in a real browser (issue 32, item 5): `report` of a deployed local fleet with one
failed health gate renders in headless Chromium (Debian's package) with no console messages, a screenshot
is taken, and the DOM shows every cluster with its state, the failed one marked, the GPU health section
read now (each cluster's row, a maintenance event Nebius scheduled on one node with its reason code), the
repair ladder's numbers (a node that failed twice: its incidents, MTBI and MTTR as `health --output json`
gives them, and it among the repeat offenders) and the audit trail's last records; the HTML holds none of
the run's secrets (the passphrase, the bucket's access-key secret, the IAM token the bridge mints).
`report --timeline` draws a run's trace there too."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from browser_support import render
from fleet_helpers import by_stack, npa, write_spec

from npa_pulumi.engine.automation.workspace import EngineSettings
from npa_pulumi.output.html_report import _duration
from npa_pulumi.runtime.toolchain import find_pulumi
from npa_pulumi.simulator.cloud import LocalCloud

pytestmark = pytest.mark.integration

SPEC = """\
apiVersion: npa.fleet/v0.0.1
name: rpt
region: us-central1
project_prefix: "rpt-"
defaults:
  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}
  enable_filestore: false
  gpu_health_stabilization_seconds: STABILIZATION
  gpu_health_timeout_minutes: 5
  gpu_cuda_smoke: true
remediation:
  repeat_offender: {incidents: 2, window: 7d}   # two incidents make alpha's GPU node a repeat offender
projects:
  - name: alpha
    object_storage: {enabled: true, storage_class: standard, size_gibibytes: 16}
    clusters:
      - name: train
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
  - name: beta
    clusters:
      - name: train
        gpu_nodes: {count: 1, platform: gpu-h200-sxm, preset: 8gpu-128vcpu-1600gb}
        enable_gpu_cluster: false
"""
BAD_PAGE = '<!DOCTYPE html><html><body><script>console.error("control-marker")</script></body></html>'


class _Grid(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: dict[str, tuple[str, str]] = {}
        self.health: dict[str, str] = {}  # the GPU health section's rows: stack -> its health status
        self.reasons: list[str] = []  # its maintenance events' reason codes
        self.offenders: list[str] = []  # the repair ladder's repeat offenders (node names)
        self.incidents: dict[str, list[str]] = {}  # its incidents table: reason or node -> the row's cells
        self._row: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "td" and found.get("data-stack"):
            self.cells[str(found["data-stack"])] = (str(found["data-status"]), str(found["data-lifecycle"]))
        if tag == "tr" and found.get("data-health"):
            self.health[str(found["data-stack"])] = str(found["data-health"])
        if tag == "li" and found.get("data-reason"):
            self.reasons.append(str(found["data-reason"]))
        if tag == "li" and found.get("class") == "offender":
            self.offenders.append(str(found["data-node"]))
        if tag == "tr" and (found.get("data-node") or found.get("data-reason")):
            self._row = self.incidents.setdefault(str(found.get("data-node") or found.get("data-reason")), [])
        if tag == "td" and self._row is not None:
            self._row.append("")

    def handle_data(self, data: str) -> None:
        if self._row:
            self._row[-1] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "tr":
            self._row = None


def _alpha_gpu_node(spec: str, node: str) -> dict[str, Any]:
    result = npa("health", "--spec", spec, "--only-projects", "alpha", "--output", "json")
    assert result.code in (0, 1), result.stderr[-3000:]
    [cluster] = result.json()["clusters"]
    found: dict[str, Any] = next(n for n in cluster["nodes"] if n["name"] == node)
    return found


def _until(spec: str, node: str, settled: Callable[[dict[str, Any]], bool], what: str) -> None:
    deadline = time.monotonic() + 120
    while not settled(found := _alpha_gpu_node(spec, node)):
        assert time.monotonic() < deadline, f"never {what}: {json.dumps(found)[:2000]}"
        time.sleep(2)


def _watch_alpha(spec: str) -> dict[str, Any]:
    result = npa(
        "health", "--spec", spec, "--only-projects", "alpha", "--watch", "--interval", "1s",
        "--iterations", "1", "--output", "json",
    )  # fmt: skip
    assert result.code in (0, 1), result.stderr[-3000:]
    document: dict[str, Any] = result.json()
    return document


def _fails_twice(spec: str, cluster_id: str, node: str) -> dict[str, Any]:
    """Alpha's GPU node shows NebiusGPUError, is requalified once it clears (its incident closed by the
    passing gate), then shows it again: two incidents, a repeat offender (the spec's repeat_offender), an
    MTBI and an MTTR. The last watch's `remediation.numbers`."""
    fault = [
        "local-cloud",
        "fault",
        "node",
        "--cluster",
        cluster_id,
        "--node",
        node,
        "--kind",
        "nebius-gpu-error",
    ]
    npa(*fault, check=True)
    _until(spec, node, lambda n: bool(n["conditions"]), "NebiusGPUError")
    _watch_alpha(spec)  # the first incident opens
    npa(*fault, "--clear", check=True)
    _until(spec, node, lambda n: not n["conditions"], "cleared")
    requalified = npa(
        "health", "--spec", spec, "--only-projects", "alpha", "--requalify", "--yes", "--output", "json"
    )
    assert requalified.json()["clusters"][0]["requalify"]["passed"] == [node], requalified.stdout[-2000:]
    _watch_alpha(spec)  # closed: returned after its gate passed
    npa(*fault, check=True)
    _until(spec, node, lambda n: bool(n["conditions"]), "NebiusGPUError again")
    numbers: dict[str, Any] = _watch_alpha(spec)["remediation"]["numbers"]  # the second incident opens
    npa(*fault, "--clear", check=True)
    return numbers


def _errors(stdout: str) -> str:
    try:
        return json.dumps({s["stack"]: s["error"] for s in json.loads(stdout)["stacks"] if s.get("error")})
    except (ValueError, KeyError, TypeError):
        return stdout[-2000:]


def _spec(tmp_path: Path, stabilization: int) -> str:
    return str(write_spec(tmp_path / "fleet.yaml", SPEC.replace("STABILIZATION", str(stabilization))))


def _secrets(home: Path) -> dict[str, str]:
    settings = EngineSettings.resolve(None)
    outputs = subprocess.run(
        [str(find_pulumi()), "stack", "output", "--json", "--show-secrets", "--stack", "rpt.alpha"],
        cwd=settings.work_dir,
        env={**os.environ, **settings.env()},
        capture_output=True,
        text=True,
        check=True,
    )
    return {
        "passphrase": (home / ".npa-pulumi" / "passphrase").read_text().strip(),
        "bucket secret": json.loads(outputs.stdout)["storage_secret_access_key"],
        "iam token": LocalCloud().access_token().get_secret_value(),
    }


def test_the_console_check_sees_a_console_message(tmp_path: Path) -> None:
    """The control: a page that logs to the console is caught, so an empty list below means something."""
    page = tmp_path / "bad.html"
    page.write_text(BAD_PAGE)
    rendered = render(page, tmp_path / "bad.png")
    assert any("control-marker" in message for message in rendered.console), rendered.console


def test_report_of_a_fleet_with_a_failed_gate(kube_api: Path, tmp_path: Path) -> None:
    npa("local-cloud", "init", check=True)
    spec = _spec(tmp_path, 2)
    # One cluster at a time: the page is what is tested here, not two control planes booting side by side
    # on a loaded runner (where a device-plugin pod once stayed Pending past the gate's timeout).
    first = npa("up", "--spec", spec, "--yes", "-j", "1", "--output", "json")
    assert first.code == 0, _errors(first.stdout) + first.stderr[-3000:]
    beta = by_stack(first.json())["rpt.beta.train"]
    bad = sorted(n for n, v in beta["health"]["nodes"].items() if v.get("gpu"))[0]
    fault = ["local-cloud", "fault", "node", "--cluster", beta["cluster_id"], "--node", bad]
    npa(*fault, "--kind", "pod-failure", check=True)
    failed = npa("up", "--spec", _spec(tmp_path, 3), "--yes", "-j", "2", "--output", "json")
    assert failed.code == 1, _errors(failed.stdout) + failed.stderr[-3000:]
    assert by_stack(failed.json())["rpt.beta.train"]["status"] == "deployed-validation-failed"
    alpha = by_stack(first.json())["rpt.alpha.train"]
    serviced = sorted(n for n, v in alpha["health"]["nodes"].items() if v.get("gpu"))[0]
    numbers = _fails_twice(spec, alpha["cluster_id"], serviced)
    [figures] = [e for e in numbers["nodes"] if e["node"] == serviced]
    assert (figures["incidents"], figures["open"]) == (2, 1)
    assert figures["mtbi_s"] is not None and figures["mttr_s"] is not None
    assert [o["node"] for o in numbers["repeat_offenders"]] == [serviced]
    npa(
        "local-cloud", "maintenance", "add", "--cluster", alpha["cluster_id"], "--node", serviced,
        "--reason", "HW_IB_LINK_DOWN", check=True,
    )  # fmt: skip

    page = tmp_path / "fleet.html"
    report = npa("report", "--spec", spec, "--output", str(page))
    assert report.code == 1, report.stderr[-3000:]  # a failed cluster, as `status` exits
    assert "Traceback" not in report.stderr
    html = page.read_text()

    rendered = render(page, tmp_path / "fleet.png")
    assert rendered.console == [], rendered.console
    assert rendered.screenshot.stat().st_size > 10_000
    assert rendered.screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    grid = _Grid()
    grid.feed(rendered.dom)
    assert grid.cells == {
        "rpt.alpha.train": ("deployed", "deployed"),
        "rpt.beta.train": ("deployed-validation-failed", "failed"),
    }
    assert bad in rendered.dom  # the gate's reason names the node
    # The audit trail's last records, newest first: the requalification of alpha's node, the failed `up`,
    # then the first one.
    audited = re.findall(r'<tr data-command="([^"]+)" data-outcome="([^"]+)"', rendered.dom)
    assert audited == [("health --requalify", "ok"), ("up", "failed"), ("up", "ok")]
    # The GPU health now: alpha's GPUs under maintenance (its node named with the reason code), beta's
    # nodes never qualified by a gate pass.
    assert grid.health == {"rpt.alpha.train": "below-min-usable", "rpt.beta.train": "below-min-usable"}
    assert grid.reasons == ["HW_IB_LINK_DOWN"] and serviced in rendered.dom
    assert "8× gpu-h200-sxm" in rendered.dom
    # The repair ladder's numbers, as `health --output json` gave them: the node's incidents, MTBI and MTTR
    # (and those of its reason), and the node among the repeat offenders.
    assert grid.offenders == [serviced]
    expected = [str(figures["incidents"]), _duration(figures["mtbi_s"]), _duration(figures["mttr_s"])]
    assert grid.incidents[serviced][1:] == expected, grid.incidents
    [reason] = [e for e in numbers["reasons"] if e["reason"] == "gpu-error"]
    assert grid.incidents["gpu-error"][1:] == [
        str(reason["incidents"]),
        _duration(reason["mtbi_s"]),
        _duration(reason["mttr_s"]),
    ]

    for name, secret in _secrets(kube_api).items():
        assert secret and secret not in html, f"the {name} is in the report"
    assert not re.search(r"(?i)(src|href)\s*=\s*[\"']?(https?:)?//", html)


class _Timeline(HTMLParser):
    """The timeline's stack rows (their data), wave bands and longest-path links in the browser's DOM."""

    def __init__(self) -> None:
        super().__init__()
        self.stacks: dict[str, dict[str, str]] = {}
        self.waves: list[str] = []
        self.links = 0
        self.svg = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.svg = self.svg or (tag == "svg" and found.get("id") == "timeline")
        if tag == "g" and "stack" in found.get("class", "").split():
            self.stacks[found["data-stack"]] = found
        if tag == "g" and found.get("class") == "wave":
            self.waves.append(found["data-wave"])
        if tag == "path" and found.get("class") == "longest-path":
            self.links += 1


def test_report_draws_a_runs_timeline(isolated_home: Path, tmp_path: Path) -> None:
    """`report --timeline FILE` of a trace shaped like `--trace-file`'s (tests/timeline_trace.py: two projects
    and five clusters in two waves at --concurrency 2, one failed), rendered in the browser: the SVG, each
    stack's bar, the waits, the waves and the longest path marked; a screenshot is kept beside the page."""
    from timeline_trace import up_trace

    spec = tmp_path / "fleet.yaml"
    write_spec(
        spec,
        "apiVersion: npa.fleet/v0.0.1\nname: tl\nregion: us-central1\n"
        "defaults:\n  cpu_nodes: {count: 1, platform: cpu-d3, preset: 4vcpu-16gb}\n"
        "projects:\n  - {name: p1, clusters: [{name: a}, {name: b}, {name: e}]}\n"
        "  - {name: p2, clusters: [{name: c}, {name: d}]}\n",
    )
    status = tmp_path / "status.json"
    clusters = [("p1", c, "deployed") for c in "abe"] + [("p2", "d", "deployed"), ("p2", "c", "failed")]
    status.write_text(
        json.dumps(
            {
                "command": "status",
                "fleet": "tl",
                "cloud": "local",
                "backend": "file:///state",
                "clusters": [
                    {"project_key": p, "cluster_name": c, "stack": f"tl.{p}.{c}", "status": s}
                    for p, c, s in clusters
                ],
            }
        )
    )
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(up_trace()))
    page = tmp_path / "timeline.html"
    report = npa(
        "report",
        "--spec",
        str(spec),
        "--from-json",
        str(status),
        "--timeline",
        str(trace),
        "--output",
        str(page),
    )
    assert report.code == 1, report.stderr[-3000:]  # tl.p2.c is failed: the page is written all the same
    rendered = render(page, tmp_path / "timeline.png", size="1280,1200")
    assert rendered.console == [], rendered.console
    assert rendered.screenshot.stat().st_size > 10_000
    drawn = _Timeline()
    drawn.feed(rendered.dom)
    assert drawn.svg
    assert list(drawn.stacks) == ["tl.p1", "tl.p2", "tl.p2.d", "tl.p1.a", "tl.p1.b", "tl.p1.e", "tl.p2.c"]
    critical = [s for s, row in drawn.stacks.items() if row["data-critical"] == "true"]
    assert critical == ["tl.p1", "tl.p1.a", "tl.p1.e", "tl.p2.c"]
    waits = {s: float(row["data-wait-s"]) for s, row in drawn.stacks.items() if float(row["data-wait-s"])}
    assert waits == {"tl.p2.d": 4.0, "tl.p2.c": 10.0}
    assert drawn.stacks["tl.p2.c"]["data-status"] == "failed"
    assert drawn.waves == ["1", "2"] and drawn.links == 3
    assert "Longest path" in rendered.dom
